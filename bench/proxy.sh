#!/usr/bin/env bash
# Proxy to an autoscaled instance, side by side: the same trivial service
# (bench/proxy backend, answering "ok\n") behind tollgate's pool (an
# autoscale service, one instance), behind a 20-line
# httputil.ReverseProxy, and behind nginx (the Debian package; one
# process, upstream keepalive, no access log). Each round drives every
# proxy once, in turn, with the same closed-loop GET load; the report is
# requests per proxy CPU-second (the backend's CPU is not counted, and it
# is the same program for all), and each proxy's ratio to the
# ReverseProxy and to nginx in the same round; then each proxy's p99
# latency and tollgate's distance to nginx's. Each line gives the proxy's
# CPU seconds over the measured window; a figure from less than 2 s of
# them (200 ticks of 10 ms) is refused, and so are its ratios: run longer.
# D=20s by default for that (at 5 s a loaded machine gave 1-37 ticks).
#
#   bash bench/proxy.sh                  # ROUNDS=3 C="16 64" D=20s
#   PORT_BASE=40000 bash bench/proxy.sh  # listen on 40000-40049, instances on 40050-40099
#   BASE=/tmp/tollgate-old bash bench/proxy.sh   # and another tollgate build, as peer "base"
#   TOLLGATE_ARGS="--cpuprofile /tmp/proxy.prof" bash bench/proxy.sh   # flags for tollgate serve
#
# PIN and PORT_BASE: see bench/lib.sh (by default the proxies, the backend
# and the autoscaled instance on one half of the CPUs, the load generator
# on the other). With PORT_BASE (or INSTANCE_PORTS=LOW-HIGH) tollgate
# serve gets --instance-ports: the lower half of the range, and BASE (if
# it knows the flag) the upper half.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
C=${C:-16 64}
D=${D:-20s}
command -v nginx >/dev/null || { echo "bench/proxy.sh needs nginx (the Debian package: apt-get install nginx-light)" >&2; exit 1; }
. bench/lib.sh
dir=$(mktemp -d)
go build -tags grpcnotrace -o "$dir/tollgate" ./cmd/tollgate
go build -o "$dir/load" ./bench/load
go build -o "$dir/proxy" ./bench/proxy
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
waitport() { for _ in $(seq 100); do curl -fsS -o /dev/null "$1" && return 0; sleep 0.1; done; echo "not serving: $1" >&2; exit 1; }

port bport; PORT=$bport "${pin_server[@]}" "$dir/proxy" backend & pids+=($!)
port rport; "${pin_server[@]}" "$dir/proxy" reverseproxy -addr "127.0.0.1:$rport" -to "http://127.0.0.1:$bport" 2>/dev/null & rpid=$!; pids+=($rpid)
port nport
cat >"$dir/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; pid $dir/nginx.pid; error_log stderr error;
events { worker_connections 4096; }
http {
  access_log off;
  upstream backend { server 127.0.0.1:$bport; keepalive 256; }
  server {
    listen 127.0.0.1:$nport;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
EOF
"${pin_server[@]}" nginx -c "$dir/nginx.conf" -p "$dir" & npid=$!; pids+=($npid)
port tport
cat >"$dir/tollgate.yaml" <<EOF
services:
  - name: hello
    route: {path_prefix: /hello/, strip_prefix: true}
    autoscale: {command: [$dir/proxy, backend], min_instances: 1, max_instances: 1, max_concurrency: 1000}
EOF
# The autoscaled instances' ports: INSTANCE_PORTS (from PORT_BASE, see
# bench/lib.sh), halved between tollgate and BASE; else tollgate's default.
tinst=() xinst=()
if [ -n "${INSTANCE_PORTS:-}" ]; then
  lo=${INSTANCE_PORTS%-*} hi=${INSTANCE_PORTS#*-}
  case "$lo$hi" in *[!0-9]* | "") echo "INSTANCE_PORTS=$INSTANCE_PORTS: want LOW-HIGH" >&2; exit 1 ;; esac
  [ "$hi" -gt "$lo" ] || { echo "INSTANCE_PORTS=$INSTANCE_PORTS: want LOW-HIGH, LOW < HIGH" >&2; exit 1; }
  mid=$(( (lo + hi) / 2 ))
  tinst=(--instance-ports "$lo-$mid") xinst=(--instance-ports "$((mid + 1))-$hi")
  echo "# tollgate's instance ports: $lo-$mid${BASE:+, BASE: $((mid + 1))-$hi}"
fi
# shellcheck disable=SC2086 # TOLLGATE_ARGS: flags, split on spaces
"${pin_server[@]}" "$dir/tollgate" serve --config "$dir/tollgate.yaml" --listen "127.0.0.1:$tport" ${tinst[@]+"${tinst[@]}"} ${TOLLGATE_ARGS:-} 2>"$dir/tollgate.log" & tpid=$!; pids+=($tpid)
peers="tollgate reverseproxy nginx"
if [ -n "${BASE:-}" ]; then
  port xport
  # An older build may not know --instance-ports: it then picks its own.
  help=$("$BASE" serve -h 2>&1 || true)
  grep -q -- -instance-ports <<<"$help" || xinst=()
  "${pin_server[@]}" "$BASE" serve --config "$dir/tollgate.yaml" --listen "127.0.0.1:$xport" ${xinst[@]+"${xinst[@]}"} 2>"$dir/base.log" & xpid=$!; pids+=($xpid)
  waitport "http://127.0.0.1:$xport/hello/"
  peers="base $peers"
fi
waitport "http://127.0.0.1:$bport/"; waitport "http://127.0.0.1:$rport/"; waitport "http://127.0.0.1:$nport/"; waitport "http://127.0.0.1:$tport/hello/"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# tollgate's instance: where it listens, from its log (--instance-ports).
grep -o 'msg="instance started".*' "$dir/tollgate.log" | head -1 | cut -c1-200 || true
for round in $(seq "$ROUNDS"); do
  # The order rotates from one round to the next, so that no proxy is
  # always measured first (or right after the same one).
  set -- $peers
  for _ in $(seq $(( (round - 1) % $# ))); do set -- "${@:2}" "$1"; done
  order="$*"
  for c in $C; do
    for peer in $order; do
      case $peer in
        base) url="http://127.0.0.1:$xport/hello/" pid=$xpid ;;
        tollgate) url="http://127.0.0.1:$tport/hello/" pid=$tpid ;;
        reverseproxy) url="http://127.0.0.1:$rport/" pid=$rpid ;;
        nginx) url="http://127.0.0.1:$nport/" pid=$npid ;;
      esac
      out=$("${pin_client[@]}" "$dir/load" -mode get -url "$url" -pid "$pid" -c "$c" -d "$D")
      rps=$(sed -n 's/^requests\/s=\([0-9]*\).*/\1/p' <<<"$out")
      cpu=$(sed -n 's/.*decisions_per_server_cpu_second=\([0-9]*\).*/\1/p' <<<"$out")
      cpus=$(sed -n 's/.*server_cpu_seconds=\([0-9.]*\).*/\1/p' <<<"$out")
      p50=$(sed -n 's/.*p50=\([^ ]*\).*/\1/p' <<<"$out")
      p99=$(sed -n 's/.* p99=\([^ ]*\).*/\1/p' <<<"$out")
      errs=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$out")
      echo "round=$round c=$c peer=$peer requests/s=$rps per_cpu_second=${cpu:-refused} cpu_seconds=$cpus p50=$p50 p99=$p99 errors=$errs"
    done
  done
done | tee "$dir/results"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$pinning; D=$D"
python3 - "$dir/results" <<'EOF'
import sys, collections
r = collections.defaultdict(dict)
p99 = collections.defaultdict(dict)
def ms(d):  # a Go duration as bench/load prints it, in milliseconds
    for unit, f in (("ms", 1), ("µs", 1e-3), ("us", 1e-3), ("ns", 1e-6), ("s", 1e3)):
        if d.endswith(unit):
            try:
                return float(d[:-len(unit)]) * f
            except ValueError:
                return None
    return None
for line in open(sys.argv[1]):
    f = dict(kv.split('=', 1) for kv in line.split())
    r[(f['round'], f['c'])][f['peer']] = f['per_cpu_second']
    p99[(f['round'], f['c'])][f['peer']] = ms(f.get('p99', ''))
def q(v, a, b):  # a refused figure (under 200 ticks of CPU) refuses its ratios
    if not (v[a].isdigit() and v[b].isdigit()):
        return "refused"
    return f"{int(v[a])/int(v[b]):.2f}" if int(v[b]) else "n/a"
print("per proxy CPU-second, same round: tollgate/reverseproxy, tollgate/nginx, reverseproxy/nginx[, tollgate/base]")
print("(refused: a figure from less than 2 s of the proxy's CPU; run longer, D=...)")
for (rnd, c), v in sorted(r.items(), key=lambda x: (int(x[0][1]), int(x[0][0]))):
    base = f"  {q(v, 'tollgate', 'base')}" if 'base' in v else ""
    print(f"c={c} round={rnd}: {q(v, 'tollgate', 'reverseproxy')}  {q(v, 'tollgate', 'nginx')}  {q(v, 'reverseproxy', 'nginx')}{base}")
print("p99 latency (ms), same round: tollgate, reverseproxy, nginx[, base]; tollgate - nginx")
for (rnd, c), v in sorted(p99.items(), key=lambda x: (int(x[0][1]), int(x[0][0]))):
    cells = [v.get(peer) for peer in ("tollgate", "reverseproxy", "nginx", "base")]
    shown = "  ".join("?" if x is None else f"{x:.2f}" for x in cells[:3] + ([cells[3]] if 'base' in v else []))
    gap = f"{cells[0] - cells[2]:+.2f}" if cells[0] is not None and cells[2] is not None else "?"
    print(f"c={c} round={rnd}: {shown}; {gap}")
EOF
