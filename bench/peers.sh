#!/usr/bin/env bash
# Single decisions side by side, all servers running for the whole
# measurement and interleaved round by round (the order rotating), on the
# memory store, one decision per call, 10,000 accounts at 50/s each:
#
#   gRPC: tollgate's Envoy rate limit service (ShouldRateLimit,
#         bench/rls/load.yaml), gubernator's GetRateLimits (the same 50 per
#         1,000 ms, TOKEN_BUCKET, one node, its in-memory cache), and a
#         no-op grpc-go rate limit service (bench/noop -grpc: the floor);
#   HTTP: tollgate's POST /v1/take (the ECS preset), gubernator's JSON
#         POST /v1/GetRateLimits (its grpc-gateway), and a no-op net/http
#         handler answering with the bytes of one of tollgate's answers
#         (bench/noop -answer).
#
# The figure is decisions per server CPU-second (bench/load reads each
# server's CPU time from /proc over the measured window), and the ratios
# are within one round.
#
#   GUBERNATOR=/path/to/gubernator bash bench/peers.sh   # ROUNDS=3 C="16 64" D=5s
#
# GUBERNATOR is built from its public source (not kept in this repository):
#   git clone https://github.com/gubernator-io/gubernator &&
#   (cd gubernator && go build -o /tmp/gubernator ./cmd/gubernator)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
C=${C:-16 64}
D=${D:-5s}
: "${GUBERNATOR:?set GUBERNATOR to a gubernator binary}"
dir=$(mktemp -d)
go build -tags grpcnotrace -o "$dir/tollgate" ./cmd/tollgate
go build -o "$dir/load" ./bench/load
go build -o "$dir/noop" ./bench/noop
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$dir"' EXIT

thttp=$(free); tgrpc=$(free)
"$dir/tollgate" serve --listen "127.0.0.1:$thttp" --store memory --rls-config bench/rls \
  --grpc-listen "127.0.0.1:$tgrpc" --log-level warn 2>"$dir/tollgate.log" & tpid=$!; pids+=($tpid)
# One node: its default member-list discovery, knowing only itself (with
# discovery "none" it owns no keys and answers every request with an
# error); tracing export off.
ghttp=$(free); ggrpc=$(free); gml=$(free)
env GUBER_GRPC_ADDRESS="127.0.0.1:$ggrpc" GUBER_HTTP_ADDRESS="127.0.0.1:$ghttp" \
  GUBER_MEMBERLIST_ADDRESS="127.0.0.1:$gml" GUBER_MEMBERLIST_BIND_ADDRESS="127.0.0.1:$gml" \
  GUBER_MEMBERLIST_KNOWN_NODES="127.0.0.1:$gml" GUBER_LOG_LEVEL=warn OTEL_TRACES_EXPORTER=none \
  "$GUBERNATOR" >"$dir/gubernator.log" 2>&1 & gpid=$!; pids+=($gpid)
wait_port "$thttp"; wait_port "$tgrpc"
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$ghttp/v1/HealthCheck" | grep -q '"peer_count":1' && break
  sleep 0.1
done
# The no-op HTTP answer: tollgate's to a take as bench/load sends it.
curl -fsS -H 'Content-Type: application/json' \
  --data '{"service":"ecs","account":"000000001234","region":"us-east-1","action":"DescribeClusters"}' \
  "http://127.0.0.1:$thttp/v1/take" >"$dir/answer.json"
nhttp=$(free); ngrpc=$(free)
"$dir/noop" -addr "127.0.0.1:$nhttp" -answer "$dir/answer.json" & nhpid=$!; pids+=($nhpid)
"$dir/noop" -grpc "127.0.0.1:$ngrpc" & ngpid=$!; pids+=($ngpid)
wait_port "$nhttp"; wait_port "$ngrpc"
echo "no-op HTTP answer: $(wc -c <"$dir/answer.json") bytes: $(cat "$dir/answer.json")"

# name -> bench/load arguments and server pid
declare -A args=(
  [tollgate-grpc]="-mode rls -grpc 127.0.0.1:$tgrpc"
  [gubernator-grpc]="-mode gubernator -grpc 127.0.0.1:$ggrpc"
  [noop-grpc]="-mode rls -grpc 127.0.0.1:$ngrpc"
  [tollgate-http]="-mode take -url http://127.0.0.1:$thttp"
  [gubernator-http]="-mode gubernator-http -url http://127.0.0.1:$ghttp"
  [noop-http]="-mode take -url http://127.0.0.1:$nhttp"
)
declare -A pid=([tollgate-grpc]=$tpid [gubernator-grpc]=$gpid [noop-grpc]=$ngpid
  [tollgate-http]=$tpid [gubernator-http]=$gpid [noop-http]=$nhpid)
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
rows_grpc=(); rows_http=()
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  for c in $C; do
    for proto in grpc http; do
      names=("tollgate-$proto" "gubernator-$proto" "noop-$proto")
      declare -A got=()
      for k in 0 1 2; do # the order rotates round by round
        n=${names[$(( (k + r - 1) % 3 ))]}
        # shellcheck disable=SC2086
        out=$("$dir/load" ${args[$n]} -pid "${pid[$n]}" -c "$c" -d "$D")
        got[$n]=$(sed -n 's/.*decisions_per_server_cpu_second=\([0-9]*\).*/\1/p' <<<"$out")
        if grep -q 'errors=[1-9]' <<<"$out"; then echo "$n c=$c round $r: $out" >&2; fi
      done
      row="| $c | $r | ${got[tollgate-$proto]} | ${got[gubernator-$proto]} | ${got[noop-$proto]} | $(ratio "${got[tollgate-$proto]}" "${got[gubernator-$proto]}")× | $(ratio "${got[tollgate-$proto]}" "${got[noop-$proto]}") |"
      if [ "$proto" = grpc ]; then rows_grpc+=("$row"); else rows_http+=("$row"); fi
      echo "$proto $row" >&2
    done
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "gRPC (tollgate ShouldRateLimit, gubernator GetRateLimits, no-op grpc-go), decisions per server CPU-second:"
echo "| c | round | tollgate | gubernator | no-op | tollgate ÷ gubernator | tollgate ÷ no-op |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows_grpc[@]}"
echo
echo "HTTP (tollgate POST /v1/take, gubernator POST /v1/GetRateLimits, no-op net/http), decisions per server CPU-second:"
echo "| c | round | tollgate | gubernator | no-op | tollgate ÷ gubernator | tollgate ÷ no-op |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows_http[@]}"
