#!/usr/bin/env bash
# /v1/take/batch x 100 side by side with a no-op server moving the same
# bytes (bench/noop: reads each body, answers with a batch answer tollgate
# gave), both running for the whole measurement. Each round drives both,
# in turn (the order alternating round by round), with the same
# closed-loop batches from bench/load; the report is decisions per server
# CPU-second (beside the server's CPU seconds it came from; a figure from
# less than 2 s of them is refused, and its ratio: run longer) and
# tollgate's ratio to the no-op in that round. D=20s by default for that
# (at 5 s a loaded machine gave 1-37 ticks of 10 ms). PIN and PORT_BASE:
# see bench/lib.sh.
#
#   bash bench/batch.sh                       # ROUNDS=3 C="16 64" D=20s BATCH=100
#   PROFILE=/tmp/batch.prof bash bench/batch.sh   # and a CPU profile of tollgate's whole run
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
C=${C:-16 64}
D=${D:-20s}
BATCH=${BATCH:-100}
. bench/lib.sh
dir=$(mktemp -d)
go build -tags grpcnotrace -o "$dir/tollgate" ./cmd/tollgate
go build -o "$dir/load" ./bench/load
go build -o "$dir/noop" ./bench/noop
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
waitport() { for _ in $(seq 100); do curl -sS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "not serving: $1" >&2; exit 1; }

port tport
prof=()
[ -n "${PROFILE:-}" ] && prof=(--cpuprofile "$PROFILE")
"${pin_server[@]}" "$dir/tollgate" serve --listen "127.0.0.1:$tport" "${prof[@]}" 2>"$dir/tollgate.log" & tpid=$!; pids+=($tpid)
waitport "http://127.0.0.1:$tport/healthz"
# One answer of tollgate's to a batch as bench/load builds them: the
# no-op's answer, byte for byte.
python3 - "$BATCH" >"$dir/body.json" <<'PY'
import random, sys
acts = ["CreateCluster", "DescribeClusters", "ListClusters", "RunTask", "DescribeTasks", "ListTasks"]
n = int(sys.argv[1])
reqs = ",".join('{"account":"%012d","action":"%s"}' % (random.randrange(10000), random.choice(acts)) for _ in range(n))
print('{"service":"ecs","region":"us-east-1","requests":[%s]}' % reqs, end="")
PY
curl -fsS -H 'Content-Type: application/json' --data-binary @"$dir/body.json" "http://127.0.0.1:$tport/v1/take/batch" >"$dir/answer.json"
port nport
"${pin_server[@]}" "$dir/noop" -addr "127.0.0.1:$nport" -answer "$dir/answer.json" & npid=$!; pids+=($npid)
waitport "http://127.0.0.1:$nport/"
echo "answer: $(wc -c <"$dir/answer.json") bytes to a $(wc -c <"$dir/body.json")-byte batch of $BATCH"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "decisions per server CPU-second (server CPU seconds); $pinning; D=$D"
declare -A url=([tollgate]="http://127.0.0.1:$tport" [noop]="http://127.0.0.1:$nport") pid=([tollgate]=$tpid [noop]=$npid)
printf '| c | round | tollgate | no-op | tollgate ÷ no-op |\n|---|---|---|---|---|\n'
for r in $(seq "$ROUNDS"); do
  order="tollgate noop"; [ $((r % 2)) -eq 0 ] && order="noop tollgate"
  for c in $C; do
    declare -A got=()
    for p in $order; do
      out=$("${pin_client[@]}" "$dir/load" -url "${url[$p]}" -pid "${pid[$p]}" -mode batch -batch "$BATCH" -c "$c" -d "$D")
      got[$p]=$(cpu_figure "$out")
      if grep -q 'errors=[1-9]' <<<"$out"; then echo "$p: $out" >&2; fi
    done
    printf '| %s | %s | %s | %s | %s |\n' "$c" "$r" "${got[tollgate]}" "${got[noop]}" "$(ratio "${got[tollgate]}" "${got[noop]}")"
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
