#!/usr/bin/env bash
# Side by side: tollgate's Envoy rate limit service and envoy ratelimit's,
# in one run, on one throwaway redis-server, with the same config
# (bench/rls/load.yaml: 50/s per account, 10,000 accounts) and the same
# client (bench/load -mode rls), closed loop at each concurrency of C
# (default "16 64"), ROUNDS rounds (default 3) interleaving the servers,
# the order rotating round by round. Shows bench/load's report of every
# run (decisions/s, latency, decisions per server CPU-second, the CPU of
# Redis over the same window), then one table: per server CPU-second and
# per CPU-second of the server and Redis together, and tollgate's ratios
# to envoy ratelimit within each round.
#
#   PEER=/path/to/ratelimit bash bench/rls.sh
#   PEER=/path/to/ratelimit BEFORE=/path/to/old/tollgate bash bench/rls.sh
#
# BEFORE, a tollgate binary (say, built from main), runs as a third server
# in the same rounds, for a before/after of a change within one run; the
# table then has its figures and tollgate's ratio to it too.
# TOLLGATE_ARGS adds flags to tollgate serve, both builds (e.g.
# "--store-pipelines 1"); PROFILE=FILE writes a CPU profile of the
# current tollgate's whole run (serve --cpuprofile).
#
# Each figure per server CPU-second comes with the server's CPU seconds;
# from fewer than 200 ticks (2 s) bench/load refuses it and says to run
# longer. D=20s by default for that (at 5 s a loaded machine gave 1-37
# ticks). PIN and PORT_BASE: see bench/lib.sh (tollgate, envoy ratelimit
# and Redis on one half of the CPUs, the load generator on the other, by
# default).
#
# PEER is envoy ratelimit built from its public source (not kept in this
# repository):  git clone https://github.com/envoyproxy/ratelimit &&
#               (cd ratelimit && go build -o /tmp/ratelimit ./src/service_cmd)
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-20s}
C=${C:-16 64}
ROUNDS=${ROUNDS:-3}
: "${PEER:?set PEER to an envoy ratelimit binary}"
[ -f "$PEER" ] && [ -x "$PEER" ] || { echo "PEER=$PEER: no executable file there; build envoy ratelimit as the head of bench/rls.sh says" >&2; exit 1; }
if [ -n "${BEFORE:-}" ]; then
  [ -f "$BEFORE" ] && [ -x "$BEFORE" ] || { echo "BEFORE=$BEFORE: no executable file there; give a tollgate binary (go build -o FILE ./cmd/tollgate at the older commit)" >&2; exit 1; }
fi
. bench/lib.sh
tmp=$(mktemp -d)
go build -tags grpcnotrace -o "$tmp/tollgate" ./cmd/tollgate
go build -o "$tmp/load" ./bench/load
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }

port rport
"${pin_server[@]}" redis-server --bind 127.0.0.1 --port "$rport" --save "" --appendonly no >/dev/null &
rpid=$!
pids=("$rpid")
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
wait_port "$rport"

# envoy ratelimit reads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml.
mkdir -p "$tmp/runtime/ratelimit/config"
cp bench/rls/load.yaml "$tmp/runtime/ratelimit/config/"

# Every server runs for the whole measurement, so that a change in the
# shared machine's load hits them alike.
declare -A grpc=() pid=()
names=(tollgate)
prof=()
[ -n "${PROFILE:-}" ] && prof=(--cpuprofile "$PROFILE")
port gport; port hport
# shellcheck disable=SC2086
"${pin_server[@]}" "$tmp/tollgate" serve --listen "127.0.0.1:$hport" --store "redis://127.0.0.1:$rport/0" \
  --rls-config bench/rls --grpc-listen "127.0.0.1:$gport" --log-level warn "${prof[@]}" ${TOLLGATE_ARGS:-} &
pid[tollgate]=$!; pids+=("${pid[tollgate]}"); grpc[tollgate]=$gport
if [ -n "${BEFORE:-}" ]; then
  port gport; port hport
  # shellcheck disable=SC2086
  "${pin_server[@]}" "$BEFORE" serve --listen "127.0.0.1:$hport" --store "redis://127.0.0.1:$rport/0" \
    --rls-config bench/rls --grpc-listen "127.0.0.1:$gport" --log-level warn ${TOLLGATE_ARGS:-} &
  pid[before]=$!; pids+=("${pid[before]}"); grpc[before]=$gport
  names+=(before)
fi

# envoy ratelimit as its README recommends for throughput: implicit Redis
# pipelining (REDIS_PIPELINE_WINDOW; 150us is radix's own default window)
# and no stats (DISABLE_STATS=true).
port gport; port phport; port pdport
"${pin_server[@]}" env USE_STATSD=false DISABLE_STATS=true LOG_LEVEL=warn BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$rport" \
  REDIS_PIPELINE_WINDOW="${PEER_PIPELINE_WINDOW:-150us}" REDIS_PIPELINE_LIMIT="${PEER_PIPELINE_LIMIT:-0}" \
  RUNTIME_ROOT="$tmp/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
  HOST=127.0.0.1 PORT="$phport" DEBUG_HOST=127.0.0.1 DEBUG_PORT="$pdport" GRPC_HOST=127.0.0.1 GRPC_PORT="$gport" \
  "$PEER" >"$tmp/peer.log" 2>&1 &
pid[peer]=$!; pids+=("${pid[peer]}"); grpc[peer]=$gport
names+=(peer)
for n in "${names[@]}"; do wait_port "${grpc[$n]}"; done
declare -A title=([tollgate]=tollgate [before]="tollgate before (BEFORE)" [peer]="envoy ratelimit")

# figures OUT prints "SERVER_FIGURE (CPU s) | SERVER+REDIS_FIGURE" from
# bench/load's output: decisions per server CPU-second beside the
# server's CPU seconds, and per CPU-second of the server and Redis
# together; "refused" where bench/load refused the server's figure.
figures() {
  local dec srv st
  dec=$(sed -n 's/.* decisions=\([0-9]*\) .*/\1/p' <<<"$1")
  srv=$(sed -n 's/.*server_cpu_seconds=\([0-9.]*\).*/\1/p' <<<"$1")
  st=$(sed -n 's/^store_cpu_seconds=\([0-9.]*\).*/\1/p' <<<"$1")
  if grep -q decisions_per_server_cpu_second <<<"$1" && [ -n "$st" ]; then
    python3 -c 'import sys; d, a, b = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]); print(f"{d/a:.0f} ({a:.2f} s) | {d/(a+b):.0f} ({a+b:.2f} s)")' "$dec" "$srv" "$st"
  else
    echo "refused (${srv:-?} s) | refused"
  fi
}
# div A B prints A/B to 2 decimals and ×, or "refused: run longer".
div() {
  local a=${1%% *} b=${2%% *}
  if ! [[ $a =~ ^[0-9]+$ && $b =~ ^[0-9]+$ ]]; then echo "refused: run longer"
  elif [ "$b" -eq 0 ]; then echo "n/a (0 below)"
  else python3 -c 'import sys; print(f"{int(sys.argv[1])/int(sys.argv[2]):.2f}×")' "$a" "$b"
  fi
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$pinning; D=$D"
rows=()
for round in $(seq "$ROUNDS"); do
  for c in $C; do
    declare -A got=()
    for k in "${!names[@]}"; do # the order rotates round by round
      n=${names[$(((k + round - 1) % ${#names[@]}))]}
      echo "## round $round: ${title[$n]} c=$c"
      out=$("${pin_client[@]}" "$tmp/load" -mode rls -grpc "127.0.0.1:${grpc[$n]}" -pid "${pid[$n]}" -store-pid "$rpid" -c "$c" -d "$D" | grep -v '^first error' || true)
      echo "$out"
      echo
      got[$n]=$(figures "$out")
    done
    t=${got[tollgate]} p=${got[peer]}
    row="| $c | $round | $t | $p | $(div "${t%%|*}" "${p%%|*}") | $(div "${t#*| }" "${p#*| }") |"
    if [ -n "${BEFORE:-}" ]; then
      b=${got[before]}
      row+=" $b | $(div "${b%%|*}" "${p%%|*}") | $(div "${b#*| }" "${p#*| }") | $(div "${t%%|*}" "${b%%|*}") | $(div "${t#*| }" "${b#*| }") |"
    fi
    rows+=("$row")
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$pinning; D=$D"
echo
echo "Decisions per CPU-second of the server (its CPU seconds) and of the server and Redis together (their CPU seconds); ratios within each round:"
echo
head="| c | round | tollgate: server | tollgate: server+Redis | envoy ratelimit: server | envoy ratelimit: server+Redis | tollgate ÷ envoy ratelimit, server | tollgate ÷ envoy ratelimit, server+Redis |"
rule="|---|---|---|---|---|---|---|---|"
if [ -n "${BEFORE:-}" ]; then
  head+=" before: server | before: server+Redis | before ÷ envoy ratelimit, server | before ÷ envoy ratelimit, server+Redis | tollgate ÷ before, server | tollgate ÷ before, server+Redis |"
  rule+="---|---|---|---|---|---|"
fi
echo "$head"
echo "$rule"
printf '%s\n' "${rows[@]}"
