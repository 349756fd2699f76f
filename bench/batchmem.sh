#!/usr/bin/env bash
# Memory under maximum-size batches: 64 concurrent workers each send batches
# of 1,000 takes (the default --max-batch) padded to 1 MiB (the default
# --max-body) to a `tollgate serve` with default flags, closed loop; the load
# generator reports the server's peak RSS (VmHWM) and how many requests the
# in-flight bound shed with 503.
#
#   bash bench/batchmem.sh                       # D=20s by default
#   BIN=/path/to/tollgate bash bench/batchmem.sh # measure another build
#   BATCH=25800 PAD=0 bash bench/batchmem.sh     # the issue's 25,800-take batches
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-20s}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin=${BIN:-$dir/tollgate}
[ -n "${BIN:-}" ] || go build -tags grpcnotrace -o "$bin" ./cmd/tollgate
go build -o "$dir/load" ./bench/load
"$dir/load" -spawn "$bin" -mode batch -batch "${BATCH:-1000}" -pad-body "${PAD:-1048576}" -c 64 -d "$D" \
  -serve-args "${SERVE_ARGS:-}"
