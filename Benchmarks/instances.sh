#!/usr/bin/env bash
# `make bench-instances`: several instances on PostgreSQL (docs/benchmarks.md).
#   1. Hot-path throughput of an instance on PostgreSQL against the one on SQLite, same run
#      (the request path reads memory, so they should match).
#   2. Block-to-refused across instances: a block made on instance A, timed from A's
#      acknowledgement until instance B refuses the user; p50 and p99 over 100 blocks.
#   3. The block storm (issue 38): USERS users (default 10 000), each with one registration
#      onboarded on A and called once through B, blocked on A at a steady pace over
#      BLOCK_SECONDS (default 60); each block timed from A's acknowledgement until B refuses
#      that user (p50/p99/max, how many over 1 s), with the CPU seconds of A, B and PostgreSQL
#      meanwhile and B's change-feed log lines. STORM_ONLY=1 runs only this one; USERS=0 skips it.
# Loopback only; every load is bounded in time or count. Raw output in Benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
DURATION=${DURATION:-10}
BLOCKS=${BLOCKS:-100}
USERS=${USERS:-10000}
BLOCK_SECONDS=${BLOCK_SECONDS:-60}
STORM_ONLY=${STORM_ONLY:-0}
out="$repo/Benchmarks/results/instances-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
source Benchmarks/setup.sh
command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || scripts/install-deps.sh

python3 Tests/e2e/postgres.py run -- python3 Benchmarks/instances.py \
  --bin "$bin" --bench "$bench" --config "$work/config" --work "$work" --out "$out" --duration "$DURATION" --blocks "$BLOCKS" \
  --users "$USERS" --block-seconds "$BLOCK_SECONDS" $([ "$STORM_ONLY" = 1 ] && echo --storm-only) \
  --sqlite-port "$mport" --path "/bench$path" | tee "$out/summary.txt"
echo "raw output: $out"
