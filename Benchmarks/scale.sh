#!/usr/bin/env bash
# `make bench-scale`: the request path and the admin list with 1 000, 100 000 and 1 000 000
# registrations (SIZES), on SQLite (docs/benchmarks.md, "At enterprise size"). Each store is
# made through the store's bulk path (midtier-bench make-store: one user's registrations in the
# shape an SDK app makes), then Midtier serves it with its default memory cache and wrk calls
# through it with user0's Basic credentials and ids drawn from 1 000 of them (hot), skewed
# (nine calls in ten to a tenth of all) or uniformly over all with a memory of 5 000 (so that it
# fills and evicts): first while the cache fills (from cold), then warm, at c=64 and c=1. Also: disk per registration, resident memory, and the admin list's pages.
# Raw output in Benchmarks/results/<time>-scale/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
DURATION=${DURATION:-10}
SIZES=${SIZES:-"1000 100000 1000000"}
out="$repo/Benchmarks/results/$(date -u +%Y%m%dT%H%M%SZ)-scale"
mkdir -p "$out"
source Benchmarks/setup.sh
kill "$midtier" 2>/dev/null || true; wait "$midtier" 2>/dev/null || true

token="bench-admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin_hash=$(printf '%s\n' "$token" | "$bin" hash-secret --cost 10)
latency() { # wrk output -> "rps p50 p99 max" (ms)
  awk '/Requests\/sec/ {r=$2}
       function ms(v) { if (v ~ /us$/) { sub("us", "", v); return v / 1000 } if (v ~ /ms$/) { sub("ms", "", v); return v + 0 } sub("s", "", v); return v * 1000 }
       $1=="Latency" && $2 != "Distribution" {max=ms($4)} $1=="50%" {p50=ms($2)} $1=="99%" {p99=ms($2)} END {printf "%s %.2f %.2f %.2f", r, p50, p99, max}' "$1"
}
printf '%-9s %-8s %-8s %-4s %10s %9s %9s %9s\n' registrations spread phase c rps p50_ms p99_ms max_ms | tee "$out/summary.txt"
for size in $SIZES; do
  config="$work/config-$size"; cp -r "$work/config" "$config"
  python3 - "$config/midtier.json" "$work/scale-$size.sqlite" "$admin_hash" <<'PY'
import json, sys
path, store, admin_hash = sys.argv[1:]
settings = json.load(open(path))
settings.update({"store": f"sqlite:{store}", "adminTokenHashes": [admin_hash]})
json.dump(settings, open(path, "w"))
PY
  start=$(date +%s.%N)
  "$bench" make-store --config "$config" --registrations "$size" >"$out/make-store-$size.txt"
  echo "made $size registrations in $(echo "$(date +%s.%N) - $start" | bc) s" >>"$out/notes.txt"
  # hot: 1 000 registrations of the store called again and again (the store's size is all that
  # changes between sizes); skewed: nine calls in ten to a tenth of all; uniform: all alike (at
  # a million, more than the cache keeps: the misses' cost and the eviction's steady state).
  for spread in hot skewed uniform; do
    skew=0; [ $spread = skewed ] && skew=1
    ids=$size; [ $spread = hot ] && ids=$((size < 1000 ? size : 1000))
    # The uniform spread with a memory of 5 000 registrations: full within seconds, then every
    # call on a registration not kept lets another go (the eviction's steady state).
    python3 - "$config/midtier.json" $spread <<'PY'
import json, sys
path, spread = sys.argv[1:]
settings = json.load(open(path))
settings.pop("memoryCache", None)
if spread == "uniform": settings["memoryCache"] = {"registrations": 5000, "unknownIds": 5000, "users": 5000}
json.dump(settings, open(path, "w"))
PY
    "$bin" serve --config "$config" >"$out/midtier-$size-$spread.log" 2>&1 & served=$!; pids+=($served)
    wait_for "http://127.0.0.1:$mport/healthz"
    for phase in filling warm warm-1; do
      c=64; t=2; [ $phase = warm-1 ] && { c=1; t=1; }
      SCALE_IDS=$ids SCALE_SKEW=$skew SCALE_PATH="/bench$tiny" SCALE_AUTH="${auth#Authorization: }" \
        wrk -c $c -t $t -d "${DURATION}s" --latency -s Benchmarks/scale.lua "http://127.0.0.1:$mport/" >"$out/wrk-$size-$spread-$phase.txt" 2>&1
      read -r rps p50 p99 max <<<"$(latency "$out/wrk-$size-$spread-$phase.txt")"
      printf '%-9s %-8s %-8s %-4s %10s %9s %9s %9s\n' "$size" $spread $phase $c "$rps" "$p50" "$p99" "$max" | tee -a "$out/summary.txt"
      grep -q "Non-2xx" "$out/wrk-$size-$spread-$phase.txt" && echo "  (non-2xx answers: see wrk-$size-$spread-$phase.txt)" | tee -a "$out/summary.txt"
    done
    echo "$size $spread: resident $(awk '/VmRSS/ {print $2}' /proc/$served/status) KiB" >>"$out/notes.txt"
    if [ $spread = hot ]; then
      # The admin list: every page of 100 (at most 50 pages), p99 of their times.
      python3 - "$aport" "$token" "$size" >>"$out/notes.txt" <<'PY'
import json, sys, time, urllib.request
port, token, size = sys.argv[1:]
def page(after):
    url = f"http://127.0.0.1:{port}/admin/v1/registrations?limit=100" + (f"&after={after}" if after else "")
    return json.load(urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + token}), timeout=120))
page(None)  # the admin token's bcrypt check, remembered after the first call
# A page near the end of the store (the cursor of registration size - 150, midtier-bench's ids).
n = max(0, int(size) - 150)
start = time.monotonic()
last = page("r1." + "%08x-0000-4000-8000-%012x" % (n, n))
print(f"admin list, a page near the end: {len(last['registrations'])} registrations in {(time.monotonic() - start) * 1000:.1f} ms")
times, after, pages = [], None, 0
while pages < 50:
    url = f"http://127.0.0.1:{port}/admin/v1/registrations?limit=100" + (f"&after={after}" if after else "")
    start = time.monotonic()
    body = json.load(urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + token}), timeout=120))
    times.append((time.monotonic() - start) * 1000)
    pages += 1
    after = body.get("next")
    if not after: break
times.sort()
print(f"admin list: the first {pages} pages of 100, p50 {times[len(times) // 2]:.1f} ms, max {times[-1]:.1f} ms")
PY
    fi
    kill "$served"; wait "$served" 2>/dev/null || true
  done
  echo "$size: store $(stat -c %s "$work/scale-$size.sqlite") bytes" >>"$out/notes.txt"
  rm -f "$work/scale-$size.sqlite"*
done
echo "memory per cached registration ..."
for n in 200000; do
  read -r before after kept <<<"$("$bench" registration-cache-memory --registrations $n)"
  echo "standing only: $(( (after - before) * 1024 / kept )) B per cached registration ($kept)" >>"$out/notes.txt"
  read -r before after kept <<<"$("$bench" registration-cache-memory --registrations $n --whole-rows)"
  echo "whole rows (before this change): $(( (after - before) * 1024 / kept )) B per registration ($kept)" >>"$out/notes.txt"
done
cat "$out/notes.txt"
