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
#
# PIN and PORT_BASE: see bench/lib.sh (the server on one half of the CPUs,
# the load generator on the other, by default; with PORT_BASE the server
# listens on the range's first free port).
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-20s}
. bench/lib.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin=${BIN:-$dir/tollgate}
[ -n "${BIN:-}" ] || go build -tags grpcnotrace -o "$bin" ./cmd/tollgate
go build -o "$dir/load" ./bench/load
spawn=(-spawn "$bin")
[ "$PIN" = 1 ] && spawn+=(-spawn-cpus "$SERVER_CPUS")
listen=
if [ -n "${PORT_BASE:-}" ]; then port lport; listen="--listen 127.0.0.1:$lport "; fi
"${pin_client[@]}" "$dir/load" "${spawn[@]}" -mode batch -batch "${BATCH:-1000}" -pad-body "${PAD:-1048576}" -c 64 -d "$D" \
  -serve-args "$listen${SERVE_ARGS:-}"
