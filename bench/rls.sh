#!/usr/bin/env bash
# Side by side: tollgate's Envoy rate limit service and envoy ratelimit's,
# in one run, on one throwaway redis-server, with the same config
# (bench/rls/load.yaml: 50/s per account, 10,000 accounts) and the same
# client (bench/load -mode rls), closed loop at c = 16 and 64, ROUNDS
# rounds (default 3) interleaving the two servers. Reports
# decisions/s, latency, decisions per server CPU-second, and the CPU of
# Redis over the same window.
#
#   PEER=/path/to/ratelimit bash bench/rls.sh
#
# TOLLGATE_ARGS adds flags to tollgate serve (e.g. "--store-pipelines 1").
# Each figure per server CPU-second comes with the server's CPU seconds
# (and ticks of 10 ms); from fewer than 200 ticks bench/load refuses it
# and says to run longer. D=20s by default for that (at 5 s a loaded
# machine gave 1-37 ticks). PIN and PORT_BASE: see bench/lib.sh (tollgate,
# envoy ratelimit and Redis on one half of the CPUs, the load generator on
# the other, by default).
#
# PEER is envoy ratelimit built from its public source (not kept in this
# repository):  git clone https://github.com/envoyproxy/ratelimit &&
#               (cd ratelimit && go build -o /tmp/ratelimit ./src/service_cmd)
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-20s}
: "${PEER:?set PEER to an envoy ratelimit binary}"
[ -f "$PEER" ] && [ -x "$PEER" ] || { echo "PEER=$PEER: no executable file there; build envoy ratelimit as the head of bench/rls.sh says" >&2; exit 1; }
. bench/lib.sh
tmp=$(mktemp -d)
go build -tags grpcnotrace -o "$tmp/tollgate" ./cmd/tollgate
go build -o "$tmp/load" ./bench/load
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }

port rport
"${pin_server[@]}" redis-server --bind 127.0.0.1 --port "$rport" --save "" --appendonly no >/dev/null &
rpid=$!
pids=("$rpid")
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
wait_port "$rport"

# envoy ratelimit reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml.
mkdir -p "$tmp/runtime/ratelimit/config"
cp bench/rls/load.yaml "$tmp/runtime/ratelimit/config/"

measure() { # name grpc-port server-pid c
  echo "## $1 c=$4"
  "${pin_client[@]}" "$tmp/load" -mode rls -grpc "127.0.0.1:$2" -pid "$3" -store-pid "$rpid" -c "$4" -d "$D" | grep -v '^first error' || true
  echo
}

# Both servers run for the whole measurement; each round measures every
# concurrency on both, the order alternating from one round to the next,
# so that a change in the shared machine's load hits both alike.
port gport; port hport
"${pin_server[@]}" "$tmp/tollgate" serve --listen "127.0.0.1:$hport" --store "redis://127.0.0.1:$rport/0" \
  --rls-config bench/rls --grpc-listen "127.0.0.1:$gport" --log-level warn ${TOLLGATE_ARGS:-} &
tpid=$!; pids+=("$tpid")
wait_port "$gport"
tport=$gport

# envoy ratelimit as its README recommends for throughput: implicit Redis
# pipelining (REDIS_PIPELINE_WINDOW; 150us is radix's own default window)
# and no stats (DISABLE_STATS=true).
port gport; port phport; port pdport
"${pin_server[@]}" env USE_STATSD=false DISABLE_STATS=true LOG_LEVEL=warn BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$rport" \
  REDIS_PIPELINE_WINDOW="${PEER_PIPELINE_WINDOW:-150us}" REDIS_PIPELINE_LIMIT="${PEER_PIPELINE_LIMIT:-0}" \
  RUNTIME_ROOT="$tmp/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
  HOST=127.0.0.1 PORT="$phport" DEBUG_HOST=127.0.0.1 DEBUG_PORT="$pdport" GRPC_HOST=127.0.0.1 GRPC_PORT="$gport" \
  "$PEER" >"$tmp/peer.log" 2>&1 &
ppid_=$!; pids+=("$ppid_")
wait_port "$gport"
pport=$gport

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$pinning; D=$D"
for round in $(seq "${ROUNDS:-3}"); do
  for c in 16 64; do
    if [ $((round % 2)) = 1 ]; then order="tollgate peer"; else order="peer tollgate"; fi
    for who in $order; do
      echo "# round $round"
      if [ "$who" = tollgate ]; then measure tollgate "$tport" "$tpid" "$c"
      else measure "envoy ratelimit" "$pport" "$ppid_" "$c"; fi
    done
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
