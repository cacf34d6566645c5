#!/usr/bin/env bash
# `make bench-syscalls`: system calls per proxied call (docs/benchmarks.md, "System calls per
# call"), counted with `strace -c -f` attached to each proxy while wrk drives it — a measure
# that does not depend on how busy the machine is, unlike CPU time. For nginx (whose workers
# also serve the upstream) the direct run's count per call is subtracted, as for CPU.
# Targets: nginx proxy_pass, Caddy, Midtier's hot path, and the bare SwiftNIO proxy over
# Midtier's connection pool (midtier-bench floors); the tiny document, at c=64 and c=1.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
SECONDS_PER_RUN=${SECONDS_PER_RUN:-4}
out="$repo/Benchmarks/results/syscalls-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
source Benchmarks/setup.sh
command -v strace >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null; }

pport=$(free_port)
"$bench" floors --hummingbird-port "$(free_port)" --nio-port "$(free_port)" --proxy-port "$pport" --upstream "http://127.0.0.1:$up" >/dev/null 2>&1 & floors=$!; pids+=($floors)
wait_for "http://127.0.0.1:$pport/tiny"
nginx_workers=$(pgrep -f "nginx: worker" -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')

# count NAME CONNECTIONS PIDS URL [HEADER]: strace the pids while wrk runs; writes
# $out/strace-NAME.txt and $out/wrk-NAME.txt.
count() {
  local name=$1 c=$2 pidlist=$3 url=$4; shift 4
  local args=() p
  for p in $pidlist; do args+=(-p "$p"); done
  local headers=()
  for h in "$@"; do headers+=(-H "$h"); done
  strace -c -f -o "$out/strace-$name.txt" "${args[@]}" & local tracer=$!
  sleep 1
  wrk -c "$c" -t 1 -d "${SECONDS_PER_RUN}s" "${headers[@]}" "$url" >"$out/wrk-$name.txt" 2>&1
  kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
}
requests() { awk '/requests in/ {print $1}' "$out/wrk-$1.txt"; }
# calls NAME [SYSCALL]: calls per request in run NAME (all system calls, or one).
calls() {
  local total
  # strace -c's columns: % time, seconds, usecs/call, calls, [errors], syscall (or "total").
  total=$(awk -v s="${2:-total}" '$NF==s {print $4}' "$out/strace-$1.txt")
  echo "${total:-0} / $(requests "$1")" | bc -l
}

for c in 64 1; do
  count direct-$c $c "$nginx_workers" "http://127.0.0.1:$up$tiny"
  count nginx-$c $c "$nginx_workers" "http://127.0.0.1:$proxy$tiny"
  count caddy-$c $c "$caddy_pid" "http://127.0.0.1:$caddy$tiny" "$auth"
  count midtier-$c $c "$midtier" "http://127.0.0.1:$mport/bench$tiny" "$auth" "X-SMP-APPCID: $appcid"
  count floor-$c $c "$floors" "http://127.0.0.1:$pport$tiny"
done

{
  echo "system calls per proxied call (tiny document; strace -c -f, ${SECONDS_PER_RUN}s of wrk per run; nginx less its direct run)"
  for c in 64 1; do
    printf "c=%-3s %-8s %8s %8s %8s %8s %8s %8s %8s\n" "$c" "" total read write writev epoll_ctl epoll_wait other
    for target in nginx caddy midtier floor; do
      all=$(calls $target-$c)
      [ $target = nginx ] && all=$(echo "$all - $(calls direct-$c)" | bc -l)
      row=""; sum=0
      for s in read write writev epoll_ctl epoll_wait; do
        v=$(calls $target-$c $s)
        [ $target = nginx ] && v=$(echo "$v - $(calls direct-$c $s)" | bc -l)
        row="$row $(printf '%8.2f' "$v")"; sum=$(echo "$sum + $v" | bc -l)
      done
      printf "      %-8s %8.2f%s %8.2f\n" "$target" "$all" "$row" "$(echo "$all - $sum" | bc -l)"
    done
  done
} | tee "$out/summary.txt"
echo "raw output: $out"
