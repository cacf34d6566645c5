#!/usr/bin/env bash
# `make bench-instances`: several instances on PostgreSQL (docs/benchmarks.md).
#   1. Hot-path throughput of an instance on PostgreSQL against the one on SQLite, same run
#      (the request path reads memory, so they should match).
#   2. Block-to-refused across instances: a block made on instance A, timed from A's
#      acknowledgement until instance B refuses the user; p50 and p99 over 100 blocks.
# Loopback only; every load is bounded in time or count. Raw output in Benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
DURATION=${DURATION:-10}
BLOCKS=${BLOCKS:-100}
out="$repo/Benchmarks/results/instances-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
source Benchmarks/setup.sh
command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || scripts/install-deps.sh

python3 Tests/e2e/postgres.py run -- python3 Benchmarks/instances.py \
  --bin "$bin" --config "$work/config" --work "$work" --out "$out" --duration "$DURATION" --blocks "$BLOCKS" \
  --sqlite-port "$mport" --path "/bench$path" | tee "$out/summary.txt"
echo "raw output: $out"
