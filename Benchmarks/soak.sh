#!/usr/bin/env bash
# `make soak` (not part of `make test`): Midtier's hot path for SOAK_MINUTES (default 30) at
# half the maximum rate measured at the start, 50 users interleaved, every token revoked at the
# sandbox every 5 minutes (renewals under load). Samples the server's RSS and open file
# descriptors under load (each minute's median of 11 samples) and fails when either drifts more
# than 10 % from its value at the end of the warm-up (the first tenth), or when any call fails. Raw output in Benchmarks/results/<time>-soak/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
MINUTES=${SOAK_MINUTES:-30}
out="$repo/Benchmarks/results/$(date -u +%Y%m%dT%H%M%SZ)-soak"
mkdir -p "$out"
source Benchmarks/setup.sh

# 50 users, each with a registered device.
users="$work/soak-users.txt"
for i in $(seq 1 50); do
  id=$(curl -s -D - -o /dev/null -u "user$i:bench-password" -X POST "http://127.0.0.1:$mport/odata/applications/v1/demo/Connections" | awk 'tolower($1)=="x-smp-appcid:" {print $2}' | tr -d '\r')
  echo "$(printf 'user%s:bench-password' "$i" | base64) $id" >>"$users"
done
export SOAK_USERS=$users SOAK_PATH="/bench$path"
connections=64
url="http://127.0.0.1:$mport/bench$path"

rss() { awk '/VmRSS/ {print $2}' "/proc/$midtier/status"; }
fds() { ls "/proc/$midtier/fd" | wc -l; }
rate() { awk '/Requests\/sec/ {print $2}' "$1"; }
# Non-2xx answers plus socket errors (connect, read, write, timeout).
errors() { awk '/Non-2xx/ {n += $5} /Socket errors/ {gsub(",", ""); n += $4 + $6 + $8 + $10} END {print n + 0}' "$1"; }

SOAK_DELAY_MS=0 wrk -c 64 -t 2 -d 3s -s Benchmarks/soak.lua "$url" >/dev/null 2>&1  # every user's first exchange
SOAK_DELAY_MS=0 wrk -c 64 -t 2 -d 10s -s Benchmarks/soak.lua "$url" >"$out/max.txt" 2>&1
max=$(rate "$out/max.txt")
target=$(echo "$max / 2" | bc -l)
# Each connection sends about 1000 / (delay + latency) requests a second; the delay is
# steered toward the target rate minute by minute.
latency_ms=$(echo "$connections * 1000 / $max" | bc -l)
export SOAK_DELAY_MS=$(echo "$connections * 1000 / $target - $latency_ms" | bc -l)
printf "maximum %.0f req/s; soaking %s minutes at %.0f req/s (50 users)\n" "$max" "$MINUTES" "$target" | tee "$out/summary.txt"

echo "minute rate errors delay_ms rss_kib fds" >"$out/samples.txt"
total_errors=0
for minute in $(seq 1 "$MINUTES"); do
  [ $((minute % 5)) -eq 0 ] && curl -s -o /dev/null -X POST "http://127.0.0.1:$sport/sandbox/revoke-tokens"
  wrk -c "$connections" -t 2 -d 60s -s Benchmarks/soak.lua "$url" >"$out/minute-$minute.txt" 2>&1 & load=$!
  # Sampled under load every 5 s; the minute's value is the median (the count of pooled
  # connections to the upstream moves with the momentary concurrency).
  : >"$work/rss.txt"; : >"$work/fds.txt"
  for _ in $(seq 1 11); do sleep 5; rss >>"$work/rss.txt"; fds >>"$work/fds.txt"; done
  memory=$(sort -n "$work/rss.txt" | sed -n 6p); descriptors=$(sort -n "$work/fds.txt" | sed -n 6p)
  wait "$load"
  measured=$(rate "$out/minute-$minute.txt")
  total_errors=$((total_errors + $(errors "$out/minute-$minute.txt")))
  printf "%s %s %s %.2f %s %s\n" "$minute" "$measured" "$(errors "$out/minute-$minute.txt")" "$SOAK_DELAY_MS" "$memory" "$descriptors" | tee -a "$out/samples.txt"
  # Steer toward the target rate for the next minute: period = delay + latency.
  SOAK_DELAY_MS=$(echo "d = ($SOAK_DELAY_MS + $latency_ms) * $measured / $target - $latency_ms; if (d < 0) d = 0; d" | bc -l)
done

# The baseline is the sample at the end of the warm-up, the first tenth of the run (the rate
# controller settles and every user's token and connection pool are in place by then).
warm=$(( MINUTES / 10 > 1 ? MINUTES / 10 : 1 ))
awk -v errors="$total_errors" -v warm="$warm" 'NR == warm + 1 {rss0 = $5; fd0 = $6} NR > 1 {rss = $5; fd = $6; n++; sum += $2}
  END {
    drss = (rss - rss0) / rss0 * 100; dfd = (fd - fd0) / fd0 * 100
    printf "average %.0f req/s over %d minutes; %d non-2xx answers\n", sum / n, n, errors
    printf "RSS %d -> %d KiB (%+.1f %%), open fds %d -> %d (%+.1f %%) from minute %d to the end\n", rss0, rss, drss, fd0, fd, dfd, warm
    ok = (drss < 10 && drss > -10 && dfd < 10 && dfd > -10 && errors == 0)
    print (ok ? "soak: PASS (drift below 10 %, no errors)" : "soak: FAIL")
    exit (ok ? 0 : 1)
  }' "$out/samples.txt" | tee -a "$out/summary.txt"
