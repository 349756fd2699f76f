# Shared by the bench/*.sh scripts (sourced from the repository's root,
# after `set -euo pipefail`): where the servers and the load generator run,
# and which ports they listen on.
#
# PIN=1 runs the servers (and whatever serves them: Redis, a backend,
# autoscaled instances) on the first half of the CPUs this shell may use
# and the load generator on the other half (taskset), so the client never
# takes the server's core; PIN=0 lets them share every CPU. The default is
# PIN=1 when there are 2 CPUs or more and taskset is installed.
# SERVER_CPUS and CLIENT_CPUS (taskset -c lists) set the halves instead.
# Start servers as  "${pin_server[@]}" CMD ... &  and the load generator
# as  "${pin_client[@]}" CMD ...  (taskset execs CMD: $! is its pid).
#
# PORT_BASE=N: every port a script listens on is the first free one of
# N .. N+49, in order, and N+50 .. N+99 are left for the ports of
# autoscaled instances (bench/proxy.sh passes them as --instance-ports);
# unset, the kernel picks free ports, as before. Take a port with
#   port VAR
# (in the script's own shell, not in $(...): it counts).

# The servers the scripts start keep their registry and quota requests in
# memory, as when these figures were first measured, and never share (or
# wait for the lock of) the user's data directory; set TOLLGATE_DATA_DIR
# to measure with one.
export TOLLGATE_DATA_DIR="${TOLLGATE_DATA_DIR-}"

bench_cpus=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')
bench_ncpu=$(wc -w <<<"$bench_cpus")
if [ -z "${PIN:-}" ]; then
  if [ "$bench_ncpu" -ge 2 ] && command -v taskset >/dev/null; then PIN=1; else PIN=0; fi
fi
case $PIN in
1)
  command -v taskset >/dev/null || { echo "PIN=1 needs taskset (util-linux)" >&2; exit 1; }
  if [ -z "${SERVER_CPUS:-}" ] || [ -z "${CLIENT_CPUS:-}" ]; then
    [ "$bench_ncpu" -ge 2 ] || { echo "PIN=1 needs 2 CPUs or more; this shell may use $bench_ncpu" >&2; exit 1; }
    read -ra bench_c <<<"$bench_cpus"
    half=$((bench_ncpu / 2))
    SERVER_CPUS=${SERVER_CPUS:-$(IFS=,; echo "${bench_c[*]:0:half}")}
    CLIENT_CPUS=${CLIENT_CPUS:-$(IFS=,; echo "${bench_c[*]:half}")}
  fi
  pin_server=(taskset -c "$SERVER_CPUS")
  pin_client=(taskset -c "$CLIENT_CPUS")
  pinning="pinned (PIN=1, taskset): servers on CPU $SERVER_CPUS, load generator on CPU $CLIENT_CPUS"
  ;;
0)
  pin_server=(env)
  pin_client=(env)
  pinning="not pinned (PIN=0): servers and load generator share CPUs ${bench_cpus// /,}"
  ;;
*) echo "PIN=$PIN: want 1 or 0" >&2; exit 1 ;;
esac
echo "# $pinning"

bench_next_port=${PORT_BASE:-}
if [ -n "${PORT_BASE:-}" ]; then
  case $PORT_BASE in *[!0-9]*) echo "PORT_BASE=$PORT_BASE: want a port number" >&2; exit 1 ;; esac
  [ "$PORT_BASE" -ge 1024 ] && [ "$PORT_BASE" -le 65436 ] || { echo "PORT_BASE=$PORT_BASE: want 1024 to 65436 (it takes 100 ports)" >&2; exit 1; }
  INSTANCE_PORTS=${INSTANCE_PORTS:-$((PORT_BASE + 50))-$((PORT_BASE + 99))}
  echo "# ports: $PORT_BASE-$((PORT_BASE + 49)) for the servers, $INSTANCE_PORTS for autoscaled instances (PORT_BASE=$PORT_BASE)"
fi

# port VAR sets VAR to a loopback port free to listen on: the next free
# one of PORT_BASE's range, or one the kernel picks.
port() {
  local p
  if [ -z "${PORT_BASE:-}" ]; then
    p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  else
    while :; do
      if [ "$bench_next_port" -gt $((PORT_BASE + 49)) ]; then
        echo "no free port left in $PORT_BASE-$((PORT_BASE + 49)) (PORT_BASE): choose another PORT_BASE" >&2
        exit 1
      fi
      p=$bench_next_port
      bench_next_port=$((bench_next_port + 1))
      python3 -c 'import socket, sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$p" 2>/dev/null && break
    done
  fi
  printf -v "$1" %s "$p"
}

# cpu_figure OUT prints "FIGURE (CPU s)" from bench/load's output OUT: the
# decisions per server CPU-second beside the server CPU seconds they came
# from, or "refused (CPU s)" when bench/load refused the figure (fewer than
# 200 ticks of server CPU: run longer).
cpu_figure() {
  local fig cpu
  fig=$(sed -n 's/.*decisions_per_server_cpu_second=\([0-9]*\).*/\1/p' <<<"$1")
  cpu=$(sed -n 's/.*server_cpu_seconds=\([0-9.]*\).*/\1/p' <<<"$1")
  echo "${fig:-refused} (${cpu:-?} s)"
}

# ratio A B [SUFFIX] prints A/B to 2 decimals (and SUFFIX) from two
# cpu_figure cells, or "refused: run longer" when either figure was refused.
ratio() {
  local a=${1%% *} b=${2%% *}
  if ! [[ $a =~ ^[0-9]+$ && $b =~ ^[0-9]+$ ]]; then echo "refused: run longer"
  elif [ "$b" -eq 0 ]; then echo "n/a (0 below)"
  else python3 -c "import sys; print(f'{int(sys.argv[1])/int(sys.argv[2]):.2f}{sys.argv[3]}')" "$a" "$b" "${3:-}"
  fi
}
