#!/usr/bin/env bash
# The embedded store's start and writes, before and after it became a
# cache over the file (issue 37 item 5), side by side in one run: the
# build at BEFORE (a commit; default the one before the cache) and this
# tree, alternating ROUNDS times (default 2). Each runs
# BenchmarkStartWith100kInstancesAnd100kRequests (state/transfer: open,
# start, heap after it and after reading 10 scopes and 10 accounts) and
# BenchmarkDurableWrites (cloudmap: RegisterInstance from 64 clients in
# memory and in the embedded store).
#
#   bash bench/startcache.sh
set -euo pipefail
cd "$(dirname "$0")/.."
before=${BEFORE:-cf579aa}
old=$(mktemp -d)
trap 'rm -rf "$old"' EXIT
git archive "$before" | tar -x -C "$old"
for round in $(seq "${ROUNDS:-2}"); do
  for tree in "$old" "$PWD"; do
    name=after
    [ "$tree" = "$old" ] && name="before ($before)"
    echo "# round $round: $name"
    (cd "$tree" && go test ./state/transfer/ -run XXX -bench StartWith100k -benchtime 3x | grep '^Benchmark')
    for b in DurableWrites/memory DurableWrites/bolt/delay=10ms; do
      (cd "$tree" && go test ./cloudmap/ -run XXX -bench "$b\$" -benchtime 3s | grep '^Benchmark')
    done
  done
done
