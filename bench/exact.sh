#!/usr/bin/env bash
# The exactness check of issue 17 (see bench/exact/main.go and BENCHMARKS.md): real
# `tollgate serve --store redis://…` processes, a throwaway redis-server, 64 clients on one
# key (ECS cluster-read, 50 burst, 20/s) for 5 s, two CPU burners on the same cores.
#
#   bash bench/exact.sh              # the four cases, 20 runs each (about 8 min)
#   RUNS=3 bash bench/exact.sh       # fewer runs
#   TOLLGATE=path/to/tollgate bash bench/exact.sh   # another build (e.g. an older one)
#
# It fails if a run of the first three cases admits more than its bound. The fourth case
# (two nodes, --store-nodes 1) shows what an undercounted --store-nodes costs; it is
# reported, not checked.
#
# PORT_BASE (see bench/lib.sh): redis-server and the servers listen on the
# range's first free ports. PIN=1 puts redis-server, the servers and the CPU
# burners on one half of the CPUs and the clients on the other; off by
# default here: the check's load is everything contending for the same cores.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-20}
PIN=${PIN:-0}
. bench/lib.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin=${TOLLGATE:-}
if [ -z "$bin" ]; then
  bin=$dir/tollgate
  go build -tags grpcnotrace -o "$bin" ./cmd/tollgate
fi
go build -o "$dir/exact" ./bench/exact
x="${pin_client[*]} $dir/exact -tollgate $bin -runs $RUNS"
[ "$PIN" = 1 ] && x="$x -server-cpus $SERVER_CPUS"
[ -n "${PORT_BASE:-}" ] && x="$x -port-base $PORT_BASE"
echo "## one node, CPU load"
$x
echo "## one node, CPU load, redis-server stopped (SIGSTOP) for 1 s at 2 s"
$x -fault stop -stop-at 2s -stop 1s
echo "## two nodes on defaults (counting each other in Redis), CPU load, redis-server stopped for 3 s at 1 s"
$x -nodes 2 -fault stop -stop-at 1s -stop 3s
echo "## two nodes, --store-nodes 1 (undercounted), the same outage: reported, not checked"
$x -nodes 2 -store-nodes 1 -fault stop -stop-at 1s -stop 3s -slack 1000000
