#!/usr/bin/env bash
# Side by side on the memory store: tollgate's Envoy rate limit service
# (ShouldRateLimit, bench/rls/load.yaml: 50/s per account) and gubernator's
# gRPC GetRateLimits (the same 50 per 1,000 ms per account, TOKEN_BUCKET,
# one node, its in-memory cache), in one run, with the same client
# (bench/load -mode rls / -mode gubernator: 10,000 accounts, one decision
# per call), closed loop at c = 16 and 64. Reports decisions/s, latency
# and decisions per server CPU-second.
#
#   GUBERNATOR=/path/to/gubernator bash bench/gubernator.sh
#
# GUBERNATOR is built from its public source (not kept in this repository):
#   git clone https://github.com/gubernator-io/gubernator &&
#   (cd gubernator && go build -o /tmp/gubernator ./cmd/gubernator)
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-10s}
: "${GUBERNATOR:?set GUBERNATOR to a gubernator binary}"
tmp=$(mktemp -d)
go build -tags grpcnotrace -o "$tmp/tollgate" ./cmd/tollgate
go build -o "$tmp/load" ./bench/load
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT

measure() { # name mode grpc-port server-pid c
  echo "## $1 c=$5"
  "$tmp/load" -mode "$2" -grpc "127.0.0.1:$3" -pid "$4" -c "$5" -d "$D" | grep -v '^first error' || true
  echo
}

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for c in 16 64; do
  gport=$(free)
  "$tmp/tollgate" serve --listen "127.0.0.1:$(free)" --store memory \
    --rls-config bench/rls --grpc-listen "127.0.0.1:$gport" --log-level warn &
  tpid=$!; pids+=("$tpid")
  wait_port "$gport"
  measure "tollgate rls (memory)" rls "$gport" "$tpid" "$c"
  kill "$tpid"; wait "$tpid" 2>/dev/null || true

  # One node: its default member-list discovery, knowing only itself (with
  # discovery "none" it owns no keys and answers every request with an
  # error); tracing export off, as statsd is off for envoy ratelimit.
  gport=$(free); hport=$(free); mport=$(free)
  env GUBER_GRPC_ADDRESS="127.0.0.1:$gport" GUBER_HTTP_ADDRESS="127.0.0.1:$hport" \
    GUBER_MEMBERLIST_ADDRESS="127.0.0.1:$mport" GUBER_MEMBERLIST_BIND_ADDRESS="127.0.0.1:$mport" \
    GUBER_MEMBERLIST_KNOWN_NODES="127.0.0.1:$mport" GUBER_LOG_LEVEL=warn OTEL_TRACES_EXPORTER=none \
    "$GUBERNATOR" >"$tmp/gubernator.log" 2>&1 &
  gpid=$!; pids+=("$gpid")
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$hport/v1/HealthCheck" | grep -q '"peer_count":1' && break
    sleep 0.1
  done
  measure "gubernator" gubernator "$gport" "$gpid" "$c"
  kill "$gpid"; wait "$gpid" 2>/dev/null || true
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
