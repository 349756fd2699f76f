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
#         (bench/noop -answer). gubernator's gateway is not its handler:
#         it calls gubernator's own gRPC GetRateLimits over loopback, so
#         its figure includes a second request; hence
#   handler to handler: tollgate's POST /v1/take (its handler, HTTP) and
#         gubernator's gRPC GetRateLimits (its handler), both on 10,000
#         distinct keys: tollgate's takes all DescribeClusters (one
#         cluster-read bucket per account), gubernator's one key per
#         account. (In the HTTP trio tollgate's takes spread over 6 ECS
#         actions in 3 of the preset's categories: 30,000 buckets.)
#
# The figure is decisions per server CPU-second (bench/load reads each
# server's CPU time from /proc over the measured window; the server's CPU
# seconds are beside each figure, and a figure from less than 2 s of them
# is refused: run longer), and the ratios are within one round.
#
#   GUBERNATOR=/path/to/gubernator bash bench/peers.sh   # ROUNDS=3 C="16 64" D=20s
#
# D=20s by default: the servers must use at least 200 ticks (2 s) of CPU
# each for a figure, and at 5 s a loaded machine gave them 1-37. PIN and
# PORT_BASE: see bench/lib.sh (the servers on one half of the CPUs, the
# load generator on the other, by default; ports from a range).
#
# GUBERNATOR is built from its public source (not kept in this repository):
#   git clone https://github.com/gubernator-io/gubernator &&
#   (cd gubernator && go build -o /tmp/gubernator ./cmd/gubernator)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
C=${C:-16 64}
D=${D:-20s}
: "${GUBERNATOR:?set GUBERNATOR to a gubernator binary (see the head of bench/peers.sh)}"
[ -f "$GUBERNATOR" ] && [ -x "$GUBERNATOR" ] || { echo "GUBERNATOR=$GUBERNATOR: no executable file there; build gubernator as the head of bench/peers.sh says" >&2; exit 1; }
. bench/lib.sh
dir=$(mktemp -d)
go build -tags grpcnotrace -o "$dir/tollgate" ./cmd/tollgate
go build -o "$dir/load" ./bench/load
go build -o "$dir/noop" ./bench/noop
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$dir"' EXIT

port thttp; port tgrpc
"${pin_server[@]}" "$dir/tollgate" serve --listen "127.0.0.1:$thttp" --store memory --rls-config bench/rls \
  --grpc-listen "127.0.0.1:$tgrpc" --log-level warn 2>"$dir/tollgate.log" & tpid=$!; pids+=($tpid)
# One node: its default member-list discovery, knowing only itself (with
# discovery "none" it owns no keys and answers every request with an
# error); tracing export off.
port ghttp; port ggrpc; port gml
"${pin_server[@]}" env GUBER_GRPC_ADDRESS="127.0.0.1:$ggrpc" GUBER_HTTP_ADDRESS="127.0.0.1:$ghttp" \
  GUBER_MEMBERLIST_ADDRESS="127.0.0.1:$gml" GUBER_MEMBERLIST_BIND_ADDRESS="127.0.0.1:$gml" \
  GUBER_MEMBERLIST_KNOWN_NODES="127.0.0.1:$gml" GUBER_LOG_LEVEL=warn OTEL_TRACES_EXPORTER=none \
  "$GUBERNATOR" >"$dir/gubernator.log" 2>&1 & gpid=$!; pids+=($gpid)
wait_port "$thttp"; wait_port "$tgrpc"
healthy=0
for _ in $(seq 300); do
  kill -0 "$gpid" 2>/dev/null || break
  curl -sf "http://127.0.0.1:$ghttp/v1/HealthCheck" | grep -q '"peer_count":1' && { healthy=1; break; }
  sleep 0.1
done
if [ $healthy = 0 ]; then
  echo "gubernator ($GUBERNATOR) did not become healthy with one peer on 127.0.0.1:$ghttp; its log:" >&2
  tail -20 "$dir/gubernator.log" >&2
  exit 1
fi
# The no-op HTTP answer: tollgate's to a take as bench/load sends it.
curl -fsS -H 'Content-Type: application/json' \
  --data '{"service":"ecs","account":"000000001234","region":"us-east-1","action":"DescribeClusters"}' \
  "http://127.0.0.1:$thttp/v1/take" >"$dir/answer.json"
port nhttp; port ngrpc
"${pin_server[@]}" "$dir/noop" -addr "127.0.0.1:$nhttp" -answer "$dir/answer.json" & nhpid=$!; pids+=($nhpid)
"${pin_server[@]}" "$dir/noop" -grpc "127.0.0.1:$ngrpc" & ngpid=$!; pids+=($ngpid)
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
  # handler to handler, 10,000 keys each (gubernator-grpc is the one above)
  [tollgate-take1]="-mode take -actions DescribeClusters -url http://127.0.0.1:$thttp"
)
declare -A pid=([tollgate-grpc]=$tpid [gubernator-grpc]=$gpid [noop-grpc]=$ngpid
  [tollgate-http]=$tpid [gubernator-http]=$gpid [noop-http]=$nhpid [tollgate-take1]=$tpid)
rows_grpc=(); rows_http=(); rows_handler=()
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  for c in $C; do
    for proto in grpc http handler; do
      if [ $proto = handler ]; then names=(tollgate-take1 gubernator-grpc)
      else names=("tollgate-$proto" "gubernator-$proto" "noop-$proto"); fi
      declare -A got=()
      for k in "${!names[@]}"; do # the order rotates round by round
        n=${names[$(( (k + r - 1) % ${#names[@]} ))]}
        # shellcheck disable=SC2086
        out=$("${pin_client[@]}" "$dir/load" ${args[$n]} -pid "${pid[$n]}" -c "$c" -d "$D")
        got[$n]=$(cpu_figure "$out")
        if grep -q 'errors=[1-9]' <<<"$out"; then echo "$n c=$c round $r: $out" >&2; fi
      done
      case $proto in
      handler)
        row="| $c | $r | ${got[tollgate-take1]} | ${got[gubernator-grpc]} | $(ratio "${got[tollgate-take1]}" "${got[gubernator-grpc]}" ×) |"
        rows_handler+=("$row") ;;
      *)
        row="| $c | $r | ${got[tollgate-$proto]} | ${got[gubernator-$proto]} | ${got[noop-$proto]} | $(ratio "${got[tollgate-$proto]}" "${got[gubernator-$proto]}" ×) | $(ratio "${got[tollgate-$proto]}" "${got[noop-$proto]}") |"
        if [ "$proto" = grpc ]; then rows_grpc+=("$row"); else rows_http+=("$row"); fi ;;
      esac
      echo "$proto $row" >&2
    done
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$pinning; D=$D"
echo
echo "Decisions per server CPU-second (that server's CPU seconds over the measured window)."
echo
echo "gRPC (tollgate ShouldRateLimit, gubernator GetRateLimits, no-op grpc-go), 10,000 keys each:"
echo "| c | round | tollgate | gubernator | no-op | tollgate ÷ gubernator | tollgate ÷ no-op |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows_grpc[@]}"
echo
echo "HTTP (tollgate POST /v1/take: its handler, 30,000 buckets; gubernator POST /v1/GetRateLimits: its HTTP gateway, which calls gubernator's own gRPC over loopback, 10,000 keys; no-op net/http):"
echo "| c | round | tollgate | gubernator (gateway → its gRPC) | no-op | tollgate ÷ gubernator's gateway (not its handler) | tollgate ÷ no-op |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows_http[@]}"
echo
echo "Handler to handler (tollgate POST /v1/take, all DescribeClusters: 10,000 buckets; gubernator gRPC GetRateLimits: 10,000 keys):"
echo "| c | round | tollgate /v1/take | gubernator gRPC | tollgate ÷ gubernator |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows_handler[@]}"
