#!/usr/bin/env bash
# The crash harness, 100 rounds (ROUNDS=…): concurrent writers register
# Cloud Map instances, request and approve quota increases against
# `tollgate serve --data-dir`, which is killed with SIGKILL at a random
# moment of each round and restarted; every acknowledged write must be
# there after each restart (see internal/crashtest).
#
#   bash bench/kill9.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/tollgate
trap 'rm -rf "${bin%/*}"' EXIT
go build -tags grpcnotrace -o "$bin" ./cmd/tollgate
go run ./bench/killnine -bin "$bin" -rounds "${ROUNDS:-100}" -writers "${WRITERS:-4}"
