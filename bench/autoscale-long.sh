#!/usr/bin/env bash
# The long autoscale cases of issue 18, through `tollgate serve` and real
# instance processes (the test service), too long for go test:
#
#   bench/autoscale-long.sh long    # a 50 s and a 2 min cold start from zero, a 10 min request
#   bench/autoscale-long.sh crowd   # 20,000 clients at once on a service starting from zero
#   bench/autoscale-long.sh cpu     # cpus: 0.5 under a busy loop of 2 threads, 20 s
#
# long: each case prints the HTTP status, the time it took and how many
# instances its service started (one each is the point). crowd: the
# clients' answers by where each request ended (bench/pending), tollgate's
# peak RSS, file descriptors and accept queue (ss), the kernel's listen
# counters over the run (nstat), the open-file limits and tollgate's
# warnings; PENDING_ARGS adds flags to bench/pending (e.g. "-dials 20000"
# for every client dialling at once), KEEP_LOG=FILE keeps tollgate's log.
# cpu: the
# busy instance's CPU time (user + system of its process, from /proc, not
# the cgroup tollgate reads) over 20 s of wall time, as utilisation of its
# 0.5 CPUs, beside an unlimited service's.
# Run from the repository root; needs ~12 min (long), ~2 min (crowd) or
# ~1 min (cpu).
#
# PORT_BASE (see bench/lib.sh): tollgate listens on the range's first free
# port and its instances get --instance-ports from the range's upper half
# (else a random port, and tollgate's default instance ports). PIN=1 puts
# tollgate (and so its instances) on one half of the CPUs and bench/pending
# on the other; off by default here, as these cases measure no server
# against its client and the cpu case's unlimited service wants every CPU.
set -euo pipefail
mode=${1:-long}
PIN=${PIN:-0}
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; [ -z "${KEEP_LOG:-}" ] || cp "$tmp/log" "$KEEP_LOG"; rm -rf "$tmp"' EXIT
go build -tags grpcnotrace -o "$tmp/tollgate" ./cmd/tollgate
go build -o "$tmp/testservice" ./internal/testservice/cmd/testservice
go build -o "$tmp/pending" ./bench/pending
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
svc() { # name startup-delay extra-settings
	cat <<YAML
  - name: $1
    route: {path_prefix: /$1/, strip_prefix: true}
    autoscale:
      command: [$tmp/testservice]
      env: {TESTSERVICE_STARTUP_DELAY: $2, TESTSERVICE_HOST: 127.0.0.1}
      readiness: {timeout: 5m}
$3
YAML
}
{
	echo "services:"
	svc slow50 50s "      max_instances: 3"
	svc slow120 120s "      max_instances: 3"
	svc long 0s "      request_timeout: 15m"
	svc crowd 20s "      max_instances: 1
      max_concurrency: 1000
      max_pending: 20000
      request_timeout: 10m"
	svc capped 0s "      cpus: 0.5
      min_instances: 1"
	svc free 0s "      min_instances: 1"
} >"$tmp/tollgate.yaml"
"$tmp/tollgate" check "$tmp/tollgate.yaml" | grep -E '^service|limits' || true
inst=()
if [ -n "${PORT_BASE:-}" ]; then
	port port
	inst=(--instance-ports "$INSTANCE_PORTS")
else
	port=$((20000 + RANDOM % 20000))
fi
"${pin_server[@]}" "$tmp/tollgate" serve --listen 127.0.0.1:$port --config "$tmp/tollgate.yaml" ${inst[@]+"${inst[@]}"} >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.2; done
base="http://127.0.0.1:$port"
started() { grep -c "msg=\"instance started\".*service=$1 " "$tmp/log" || true; }
timed() { # name url
	local t0=$SECONDS code
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1200 "$2" || true)
	echo "$1: HTTP $code after $((SECONDS - t0)) s, instances started: $(started "$1")"
}
case $mode in
long)
	timed slow50 "$base/slow50/" &
	a=$!
	timed slow120 "$base/slow120/" &
	b=$!
	timed long "$base/long/?latency=10m" &
	c=$!
	wait $a $b $c
	;;
crowd)
	peak_rss=0 peak_fd=0 peak_q=0
	echo "somaxconn $(cat /proc/sys/net/core/somaxconn), tcp_max_syn_backlog $(cat /proc/sys/net/ipv4/tcp_max_syn_backlog), open-file limit $(ulimit -n) (tollgate: $(awk '/Max open files/ {print $4}' /proc/$pid/limits)), uptime:$(uptime | sed 's/.*load/ load/')"
	counters="TcpExtListenOverflows TcpExtListenDrops TcpExtTCPReqQFullDrop TcpExtSyncookiesSent TcpExtSyncookiesRecv TcpExtSyncookiesFailed TcpExtTCPAbortOnData TcpOutRsts"
	nstat -n >/dev/null 2>&1 || true # reset nstat's history: the next reading is the run's
	# shellcheck disable=SC2086 # PENDING_ARGS: more flags of bench/pending, split on spaces
	"${pin_client[@]}" "$tmp/pending" -url "$base/crowd/?latency=1s" -n 20000 -timeout 10m ${PENDING_ARGS:-} >"$tmp/clients" &
	cpid=$!
	while kill -0 $cpid 2>/dev/null; do
		rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
		fd=$(ls /proc/$pid/fd | wc -l)
		q=$(ss -ltnH "sport = :$port" | awk '{print $2}') # the accept queue: connections not yet accepted
		((rss > peak_rss)) && peak_rss=$rss
		((fd > peak_fd)) && peak_fd=$fd
		((q > peak_q)) && peak_q=$q
		sleep 0.5
	done
	cat "$tmp/clients"
	echo "tollgate peak RSS $((peak_rss / 1024)) MiB, peak file descriptors $peak_fd, peak accept queue $peak_q, instances started: $(started crowd)"
	# shellcheck disable=SC2086
	echo "kernel counters over the run (all of this network namespace): $(nstat -z $counters 2>/dev/null | awk 'NR > 1 {printf "%s=%s ", $1, $2}')"
	echo "tollgate's log: $(grep -c 'Accept error' "$tmp/log" || true) accept errors, $(grep -c 'too many open files' "$tmp/log" || true) 'too many open files', $(grep -c 'level=WARN' "$tmp/log" || true) warnings, uptime:$(uptime | sed 's/.*load/ load/')"
	grep 'level=WARN\|level=ERROR' "$tmp/log" | sed 's/time=[^ ]* //' | cut -c1-160 | sort | uniq -c | sort -rn | head -5
	;;
cpu)
	ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, in USER_HZ (100 a second)
	for name in capped free; do
		for _ in $(seq 300); do grep -q "msg=\"instance ready\".*service=$name " "$tmp/log" && break; sleep 0.2; done
		ipid=$(grep "msg=\"instance started\".*service=$name " "$tmp/log" | head -1 | sed 's/.* pid=\([0-9]*\).*/\1/')
		curl -s -o /dev/null "$base/$name/?cpu=40s" & # two busy threads, each wanting 40 s of CPU
		b1=$!
		curl -s -o /dev/null "$base/$name/?cpu=40s" &
		b2=$!
		sleep 2 # both running
		c0=$(ticks "$ipid") t0=$(date +%s.%N)
		sleep 20
		c1=$(ticks "$ipid") t1=$(date +%s.%N)
		awk -v n="$name" -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" 'BEGIN {
			cores = c / 100 / (t1 - t0)
			printf "%s: %.3f cores over %.1f s; utilisation of 0.5 CPUs %.0f %%\n", n, cores, t1 - t0, cores / 0.5 * 100 }'
		kill $b1 $b2 2>/dev/null || true
	done
	grep -o 'msg="cpus and memory are[^"]*"' "$tmp/log" | sort | uniq -c
	;;
*) echo "usage: $0 long|crowd|cpu" >&2; exit 2 ;;
esac
