#!/usr/bin/env bash
# The cost of SigV4 verification end to end over HTTP: the same signed
# AWS JSON requests (bench/load -mode aws -sign: ECS calls of 10,000 keys,
# each signed by aws-sdk-go-v2's signer) against `tollgate serve` without
# and with --credentials, in interleaved rounds, closed loop at c = 16; the
# report's last lines give verified ÷ unverified decisions per server
# CPU-second, per round and overall. With BEFORE=<git revision> a third
# server, built from that revision, is measured verified in each round too.
#
#   PIN=1 bash bench/sigv4.sh            # ROUNDS=6 D=20s by default
#   PIN=1 BEFORE=6a20a84 bash bench/sigv4.sh
#
# PIN and PORT_BASE: see bench/lib.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-20s}
ROUNDS=${ROUNDS:-6}
C=${C:-16}
. bench/lib.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -tags grpcnotrace -o "$dir/tollgate" ./cmd/tollgate
go build -o "$dir/load" ./bench/load
# In a directory of its own: the server re-reads the file when its
# directory changes, and the reports are written next to it.
mkdir "$dir/creds"
"$dir/load" -write-credentials "$dir/creds/credentials" -keys 10000
servers=(unverified verified)
if [ -n "${BEFORE:-}" ]; then
  mkdir "$dir/before"
  git archive "$BEFORE" | tar -x -C "$dir/before"
  (cd "$dir/before" && go build -tags grpcnotrace -o "$dir/tollgate-before" ./cmd/tollgate)
  servers+=(before)
fi
echo "# $pinning; D=$D; c=$C; $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
  for s in "${servers[@]}"; do
    bin=$dir/tollgate args=""
    case $s in
    verified) args="--credentials $dir/creds/credentials" ;;
    before) bin=$dir/tollgate-before args="--credentials $dir/creds/credentials" ;;
    esac
    spawn=(-spawn "$bin")
    [ "$PIN" = 1 ] && spawn+=(-spawn-cpus "$SERVER_CPUS")
    if [ -n "${PORT_BASE:-}" ]; then port lport; args="$args --listen 127.0.0.1:$lport"; fi
    [ -n "$args" ] && spawn+=(-serve-args "$args")
    echo "## round $round: $s"
    "${pin_client[@]}" "$dir/load" "${spawn[@]}" -d "$D" -warmup 3s -mode aws -sign -keys 10000 -c "$C" | grep -v '^first error' | tee "$dir/out"
    cps=$(sed -n 's/.*decisions_per_server_cpu_second=\([0-9.]*\).*/\1/p' "$dir/out")
    echo "$round $s ${cps:-0}" >>"$dir/cps"
  done
done
echo "# decisions per server CPU-second, verified ÷ unverified"
python3 - "$dir/cps" <<'PY'
import sys, collections
by = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, s, v = line.split()
    if float(v) > 0:  # 0: too little server CPU in the window for a figure
        by[r][s] = float(v)
servers = ["unverified", "verified", "before"]
full = [r for r in sorted(by, key=int) if "unverified" in by[r] and "verified" in by[r]]
for r in sorted(by, key=int):
    d = by[r]
    if r not in full:
        print("round %s: left out (a server got too little CPU for a figure)" % r)
        continue
    line = "round %s: unverified %.0f, verified %.0f: %.3f" % (r, d["unverified"], d["verified"], d["verified"] / d["unverified"])
    if "before" in d:
        line += "; before (verified) %.0f: %.3f" % (d["before"], d["before"] / d["unverified"])
    print(line)
if full:
    tot = {s: sum(by[r][s] for r in full) for s in servers if all(s in by[r] for r in full)}
    print("all rounds: verified ÷ unverified %.3f" % (tot["verified"] / tot["unverified"]) +
          ("; before ÷ unverified %.3f" % (tot["before"] / tot["unverified"]) if "before" in tot else ""))
PY
