#!/usr/bin/env bash
# Proxy to an autoscaled instance, side by side: the same trivial service
# (bench/proxy backend, answering "ok\n") behind tollgate's pool (an
# autoscale service, one instance), behind a 20-line
# httputil.ReverseProxy, and behind nginx (the Debian package; one
# process, upstream keepalive, no access log). Each round drives every
# proxy once, in turn, with the same closed-loop GET load; the report is
# requests per proxy CPU-second (the backend's CPU is not counted, and it
# is the same program for all), and each proxy's ratio to the
# ReverseProxy and to nginx in the same round.
#
#   bash bench/proxy.sh                  # ROUNDS=3 C="16 64" D=5s
#   BASE=/tmp/tollgate-old bash bench/proxy.sh   # and another tollgate build, as peer "base"
#   TOLLGATE_ARGS="--cpuprofile /tmp/proxy.prof" bash bench/proxy.sh   # flags for tollgate serve
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
C=${C:-16 64}
D=${D:-5s}
dir=$(mktemp -d)
go build -tags grpcnotrace -o "$dir/tollgate" ./cmd/tollgate
go build -o "$dir/load" ./bench/load
go build -o "$dir/proxy" ./bench/proxy
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
waitport() { for _ in $(seq 100); do curl -fsS -o /dev/null "$1" && return 0; sleep 0.1; done; echo "not serving: $1" >&2; exit 1; }

bport=$(free); PORT=$bport "$dir/proxy" backend & pids+=($!)
rport=$(free); "$dir/proxy" reverseproxy -addr "127.0.0.1:$rport" -to "http://127.0.0.1:$bport" 2>/dev/null & rpid=$!; pids+=($rpid)
nport=$(free)
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
nginx -c "$dir/nginx.conf" -p "$dir" & npid=$!; pids+=($npid)
tport=$(free)
cat >"$dir/tollgate.yaml" <<EOF
services:
  - name: hello
    route: {path_prefix: /hello/, strip_prefix: true}
    autoscale: {command: [$dir/proxy, backend], min_instances: 1, max_instances: 1, max_concurrency: 1000}
EOF
"$dir/tollgate" serve --config "$dir/tollgate.yaml" --listen "127.0.0.1:$tport" ${TOLLGATE_ARGS:-} 2>"$dir/tollgate.log" & tpid=$!; pids+=($tpid)
peers="tollgate reverseproxy nginx"
if [ -n "${BASE:-}" ]; then
  xport=$(free)
  "$BASE" serve --config "$dir/tollgate.yaml" --listen "127.0.0.1:$xport" 2>"$dir/base.log" & xpid=$!; pids+=($xpid)
  waitport "http://127.0.0.1:$xport/hello/"
  peers="base $peers"
fi
waitport "http://127.0.0.1:$bport/"; waitport "http://127.0.0.1:$rport/"; waitport "http://127.0.0.1:$nport/"; waitport "http://127.0.0.1:$tport/hello/"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
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
      out=$("$dir/load" -mode get -url "$url" -pid "$pid" -c "$c" -d "$D")
      rps=$(sed -n 's/^requests\/s=\([0-9]*\).*/\1/p' <<<"$out")
      cpu=$(sed -n 's/.*decisions_per_server_cpu_second=\([0-9]*\).*/\1/p' <<<"$out")
      p50=$(sed -n 's/.*p50=\([^ ]*\).*/\1/p' <<<"$out")
      errs=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$out")
      echo "round=$round c=$c peer=$peer requests/s=$rps per_cpu_second=$cpu p50=$p50 errors=$errs"
    done
  done
done | tee "$dir/results"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir/results" <<'EOF'
import sys, collections
r = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = dict(kv.split('=', 1) for kv in line.split())
    r[(f['round'], f['c'])][f['peer']] = float(f['per_cpu_second'] or 'nan')
print("per proxy CPU-second, same round: tollgate/reverseproxy, tollgate/nginx, reverseproxy/nginx[, tollgate/base]")
for (rnd, c), v in sorted(r.items(), key=lambda x: (int(x[0][1]), int(x[0][0]))):
    base = f"  {v['tollgate']/v['base']:.2f}" if 'base' in v else ""
    print(f"c={c} round={rnd}: {v['tollgate']/v['reverseproxy']:.2f}  {v['tollgate']/v['nginx']:.2f}  {v['reverseproxy']/v['nginx']:.2f}{base}")
EOF
