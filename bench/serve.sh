#!/usr/bin/env bash
# Measures `tollgate serve` with the load generator: decisions/s, latency
# and decisions per server CPU-second, closed loop at c = 16 and 64, for the
# native API, its batch endpoint (100 takes per request) and the AWS path;
# then paced at half the closed-loop peak just measured (FRACTION=0.5) for
# the tail latency. With
# REDIS=1 it also runs against a throwaway local redis-server.
#
#   bash bench/serve.sh            # memory store
#   REDIS=1 bash bench/serve.sh    # and the Redis store
#
# Each run's report gives the server's CPU seconds (and ticks of 10 ms);
# from fewer than 200 ticks bench/load gives no figure per CPU-second and
# says to run longer. D=20s by default for that (at 5 s a loaded machine
# gave 1-37 ticks). PIN and PORT_BASE: see bench/lib.sh (the server, and
# Redis, on one half of the CPUs, the load generator on the other, by
# default; with PORT_BASE the server listens on the range's first free port).
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-20s}
. bench/lib.sh
bin=$(mktemp -d)/tollgate
go build -tags grpcnotrace -o "$bin" ./cmd/tollgate
go build -o "${bin%/*}/load" ./bench/load
load="${bin%/*}/load"

out="${bin%/*}/out"
spawn=(-spawn "$bin")
[ "$PIN" = 1 ] && spawn+=(-spawn-cpus "$SERVER_CPUS")
if [ -n "${PORT_BASE:-}" ]; then port lport; spawn+=(-serve-args "--listen 127.0.0.1:$lport"); fi
echo "# $pinning; D=$D"
run() { echo "## $*"; "${pin_client[@]}" "$load" "${spawn[@]}" -d "$D" "$@" | grep -v '^first error' | tee "$out"; echo; }
# peak prints the requests/s of the last run.
peak() { sed -n 's/^requests\/s=\([0-9.]*\).*/\1/p' "$out"; }
# paced prints FRACTION (default 0.5) of a closed-loop requests/s, at least 1.
paced() { python3 -c "import sys; print(max(1, round(float(sys.argv[1]) * float(sys.argv[2]))))" "$1" "${FRACTION:-0.5}"; }

for mode in take aws; do
  for c in 16 64; do
    run -mode $mode -c $c
    if [ $mode = take ] && [ $c = 16 ]; then peak_take=$(peak); fi
  done
done
for c in 16 64; do
  run -mode batch -batch 100 -c $c
  if [ $c = 16 ]; then peak_batch=$(peak); fi
done
# Tail latency paced at FRACTION (default 0.5) of this machine's closed-loop
# peak at c = 16, measured above (a fixed rate above the peak only measures
# the queue); RATE_TAKE and RATE_BATCH set the rates instead.
rate_take=${RATE_TAKE:-$(paced "$peak_take")}
rate_batch=${RATE_BATCH:-$(paced "$peak_batch")}
echo "# paced at ${FRACTION:-0.5} of the c = 16 peaks: $peak_take and $peak_batch requests/s"
run -mode take -c 16 -rate "$rate_take"
run -mode batch -batch 100 -c 16 -rate "$rate_batch"

if [ "${REDIS:-0}" = 1 ]; then
  port rport
  "${pin_server[@]}" redis-server --bind 127.0.0.1 --port "$rport" --save "" --appendonly no >/dev/null &
  rpid=$!
  trap 'kill $rpid' EXIT
  sleep 0.5
  for c in 16 64; do run -store "redis://127.0.0.1:$rport/0" -mode take -c $c; done
  for c in 16 64; do run -store "redis://127.0.0.1:$rport/0" -mode batch -batch 100 -c $c; done
fi
