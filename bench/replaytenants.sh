#!/usr/bin/env bash
# A million tenants through tollgate replay (issue 38, see BENCHMARKS.md): a
# CloudTrail trail of TENANTS accounts (default 1,000,000), two records each
# in two seconds, one bucket each, replayed without retries; prints the CPU
# time, records per CPU-second and the largest RSS.
#
#   bash bench/replaytenants.sh
#   TENANTS=100000 bash bench/replaytenants.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TENANTS=${TENANTS:-1000000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/tollgate" ./cmd/tollgate
go build -o "$dir/cloudtrailgen" ./bench/cloudtrailgen
"$dir/cloudtrailgen" -out "$dir/trail" -seconds 2 -tenants "$TENANTS" -rate 1 -burst 2 -lines
records=$((TENANTS * 2))
/usr/bin/time -f "%U %S %M" -o "$dir/time" "$dir/tollgate" replay --retry none --throttled-only --temp-dir "$dir" "$dir/trail" >/dev/null
read -r user sys rss <"$dir/time"
awk -v u="$user" -v s="$sys" -v r="$rss" -v n="$records" -v t="$TENANTS" 'BEGIN {
  cpu = u + s
  printf "%d records of %d tenants: %.1f CPU-s (%.1f user, %.1f sys), %.0f records per CPU-second, max RSS %.0f MB, %.0f bytes a bucket\n",
    n, t, cpu, u, s, n / cpu, r / 1024, r * 1024 / t
}'
