#!/usr/bin/env bash
# Measures `tollgate serve` with the load generator: decisions/s, latency
# and decisions per server CPU-second, closed loop at c = 16 and 64, for the
# native API, its batch endpoint (100 takes per request) and the AWS path;
# then paced at about half the closed-loop peak for the tail latency. With
# REDIS=1 it also runs against a throwaway local redis-server.
#
#   bash bench/serve.sh            # memory store
#   REDIS=1 bash bench/serve.sh    # and the Redis store
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-10s}
bin=$(mktemp -d)/tollgate
go build -o "$bin" ./cmd/tollgate
go build -o "${bin%/*}/load" ./bench/load
load="${bin%/*}/load"

run() { echo "## $*"; "$load" -spawn "$bin" -d "$D" "$@" | grep -v '^first error' ; echo; }

for mode in take aws; do
  for c in 16 64; do run -mode $mode -c $c; done
done
for c in 16 64; do run -mode batch -batch 100 -c $c; done
# Tail latency at about half of the closed-loop peak (set RATE_* to override).
run -mode take -c 16 -rate "${RATE_TAKE:-15000}"
run -mode batch -batch 100 -c 16 -rate "${RATE_BATCH:-4000}"

if [ "${REDIS:-0}" = 1 ]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no >/dev/null &
  rpid=$!
  trap 'kill $rpid' EXIT
  sleep 0.5
  for c in 16 64; do run -store "redis://127.0.0.1:$port/0" -mode take -c $c; done
  for c in 16 64; do run -store "redis://127.0.0.1:$port/0" -mode batch -batch 100 -c $c; done
fi
