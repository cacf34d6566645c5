#!/usr/bin/env bash
# `make bench-allocations`: heap allocations per proxied call (docs/benchmarks.md), counted by
# Benchmarks/malloc-count.c preloaded into Midtier and into the floors (midtier-bench floors)
# while wrk drives them — like system calls, a measure that does not depend on how busy the
# machine is. Targets: Midtier's hot path, the bare SwiftNIO proxy over Midtier's connection
# pool, and that proxy as a task per call with Hummingbird's Request and Response; the tiny
# document and the 1 KB entity Midtier rewrites, at c=64 and c=1.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
SECONDS_PER_RUN=${SECONDS_PER_RUN:-4}
out="$repo/Benchmarks/results/allocations-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
gcc -O2 -shared -fPIC Benchmarks/malloc-count.c -o "$out/malloc-count.so"
MIDTIER_WRAPPER="env LD_PRELOAD=$out/malloc-count.so MALLOC_COUNT_FILE=$out/counts-midtier.txt"
source Benchmarks/setup.sh

pport=$(free_port); tport=$(free_port)
env LD_PRELOAD="$out/malloc-count.so" MALLOC_COUNT_FILE="$out/counts-floors.txt" \
  "$bench" floors --hummingbird-port "$(free_port)" --nio-port "$(free_port)" --proxy-port "$pport" --task-proxy-port "$tport" \
  --upstream "http://127.0.0.1:$up" >/dev/null 2>&1 & floors=$!; pids+=($floors)
wait_for "http://127.0.0.1:$pport/tiny"; wait_for "http://127.0.0.1:$tport/tiny"

# The count a process has made so far (it appends one line per SIGUSR2).
allocations() { # pid file
  lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
  local before; before=$(lines "$2")
  kill -USR2 "$1"
  for _ in $(seq 1 100); do [ "$(lines "$2")" -gt "$before" ] && break; sleep 0.02; done
  tail -1 "$2" | awk '{print $2}'
}
# measure NAME CONNECTIONS PID FILE URL [HEADER...]: allocations per call over one wrk run
# (after a warm-up run, so that pools and caches are filled).
measure() {
  local name=$1 c=$2 pid=$3 file=$4 url=$5; shift 5
  local headers=() h
  for h in "$@"; do headers+=(-H "$h"); done
  wrk -c "$c" -t 1 -d 1s "${headers[@]}" "$url" >/dev/null 2>&1
  local before after
  before=$(allocations "$pid" "$file")
  wrk -c "$c" -t 1 -d "${SECONDS_PER_RUN}s" "${headers[@]}" "$url" >"$out/wrk-$name.txt" 2>&1
  after=$(allocations "$pid" "$file")
  echo "$name $(echo "($after - $before) / $(awk '/requests in/ {print $1}' "$out/wrk-$name.txt")" | bc -l)" >>"$out/per-call.txt"
}

for c in 64 1; do
  for doc in tiny entity; do
    p=$tiny; [ $doc = entity ] && p=$path
    measure midtier-$doc-$c $c "$midtier" "$out/counts-midtier.txt" "http://127.0.0.1:$mport/bench$p" "$auth" "X-SMP-APPCID: $appcid"
    measure nio-proxy-$doc-$c $c "$floors" "$out/counts-floors.txt" "http://127.0.0.1:$pport$p"
    measure task-proxy-$doc-$c $c "$floors" "$out/counts-floors.txt" "http://127.0.0.1:$tport$p"
  done
done

{
  echo "heap allocations per proxied call (malloc-count.c; ${SECONDS_PER_RUN}s of wrk per run after a 1 s warm-up)"
  printf "%-6s %-8s %10s %15s %12s\n" "" "" midtier "bare NIO proxy" "task proxy"
  for c in 64 1; do
    for doc in tiny entity; do
      v() { awk -v n="$1-$doc-$c" '$1==n {printf "%.1f", $2}' "$out/per-call.txt"; }
      printf "c=%-4s %-8s %10s %15s %12s\n" "$c" "$doc" "$(v midtier)" "$(v nio-proxy)" "$(v task-proxy)"
    done
  done
} | tee "$out/summary.txt"
echo "raw output: $out"
