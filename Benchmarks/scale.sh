#!/usr/bin/env bash
# `make bench-scale`: the request path and the admin list with 1 000, 100 000 and 1 000 000
# registrations (SIZES), on SQLite and PostgreSQL (STORES, default "sqlite postgres";
# docs/benchmarks.md, "At enterprise size"). Each store is made through the store's own bulk
# path (midtier-bench make-store: one user's registrations in the shape an SDK app makes; on
# PostgreSQL into a database of its own per size, made empty and migrated first, then
# VACUUM ANALYZE as autovacuum would do soon after), then Midtier serves it with its default
# memory cache and wrk calls through it with user0's Basic credentials and ids drawn from 1 000
# of them (hot), skewed (nine calls in ten to a tenth of all) or uniformly over all with a
# memory of 5 000 (so that it fills and evicts): first while the cache fills (from cold), then
# warm, at c=64 and c=1. Also: disk per registration (SQLite: the file; PostgreSQL: the
# registrations table with its indexes, and the database's growth), resident memory, and the
# admin list's pages. With postgres in STORES the whole run goes under a throwaway PostgreSQL
# (Tests/e2e/postgres.py run: own folder and loopback port, fsync on, default settings),
# stopped and removed at the end, also when a step fails.
# MIDTIER=<binary> serves with that release binary instead of the current build (a step's
# before and after, measured the same way).
# Raw output in Benchmarks/results/<time>-scale/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
DURATION=${DURATION:-10}
SIZES=${SIZES:-"1000 100000 1000000"}
STORES=${STORES:-"sqlite postgres"}
for store in $STORES; do
  case $store in sqlite | postgres) ;; *) echo "STORES: unknown store $store (sqlite, postgres)"; exit 2 ;; esac
done
if [[ " $STORES " == *" postgres "* && -z "${SCALE_UNDER_POSTGRES:-}" ]]; then
  command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || scripts/install-deps.sh
  SCALE_UNDER_POSTGRES=1 exec python3 Tests/e2e/postgres.py run -- "$repo/Benchmarks/scale.sh"
fi
out="$repo/Benchmarks/results/$(date -u +%Y%m%dT%H%M%SZ)-scale"
mkdir -p "$out"
source Benchmarks/setup.sh
kill "$midtier" 2>/dev/null || true; wait "$midtier" 2>/dev/null || true
bin=$(realpath "${MIDTIER:-$bin}")

token="bench-admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
admin_hash=$(printf '%s\n' "$token" | "$bin" hash-secret --cost 10)
latency() { # wrk output -> "rps p50 p99 max" (ms)
  awk '/Requests\/sec/ {r=$2}
       function ms(v) { if (v ~ /us$/) { sub("us", "", v); return v / 1000 } if (v ~ /ms$/) { sub("ms", "", v); return v + 0 } sub("s", "", v); return v * 1000 }
       $1=="Latency" && $2 != "Distribution" {max=ms($4)} $1=="50%" {p50=ms($2)} $1=="99%" {p99=ms($2)} END {printf "%s %.2f %.2f %.2f", r, p50, p99, max}' "$1"
}
elapsed() { echo "$(date +%s.%N) - $1" | bc; }
# PostgreSQL: psql as the throwaway server's application role (it may create databases).
pg() { psql "$1" -v ON_ERROR_STOP=1 -Atq -c "$2"; }
pg_url() { python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$MIDTIER_TEST_POSTGRES" "$1"; }
printf '%-8s %-9s %-8s %-8s %-4s %10s %9s %9s %9s\n' store registrations spread phase c rps p50_ms p99_ms max_ms | tee "$out/summary.txt"
for store in $STORES; do
for size in $SIZES; do
  run="$store-$size"
  config="$work/config-$run"; cp -r "$work/config" "$config"
  if [ "$store" = sqlite ]; then
    location="sqlite:$work/scale-$size.sqlite"
  else
    # A database of its own per size, empty; the throwaway server goes away at the end.
    database="scale_$size"; url=$(pg_url "$database")
    pg "$MIDTIER_TEST_POSTGRES" "CREATE DATABASE $database"
    location="$url"
  fi
  python3 - "$config/midtier.json" "$location" "$admin_hash" <<'PY'
import json, sys
path, store, admin_hash = sys.argv[1:]
settings = json.load(open(path))
settings.update({"store": store, "adminTokenHashes": [admin_hash]})
json.dump(settings, open(path, "w"))
PY
  if [ "$store" = postgres ]; then
    # The schema first (make-store of none: open and migrate), so that the database's growth
    # is the registrations' alone and the fill below is timed as on SQLite.
    start=$(date +%s.%N)
    "$bench" make-store --config "$config" --registrations 0 >"$out/make-store-$run-empty.txt" 2>&1
    echo "$run: empty store opened and migrated in $(elapsed "$start") s" >>"$out/notes.txt"
    empty_bytes=$(pg "$url" "SELECT pg_database_size(current_database())")
  fi
  start=$(date +%s.%N)
  "$bench" make-store --config "$config" --registrations "$size" >"$out/make-store-$run.txt"
  echo "$run: made $size registrations in $(elapsed "$start") s; load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/notes.txt"
  if [ "$store" = postgres ]; then
    # What autovacuum does soon after a bulk insert (visibility map, planner statistics),
    # done now so that it does not land in a measurement.
    start=$(date +%s.%N)
    pg "$url" "VACUUM (ANALYZE) midtier_registration"
    echo "$run: VACUUM ANALYZE in $(elapsed "$start") s" >>"$out/notes.txt"
    echo "$run: registrations table $(pg "$url" "SELECT pg_total_relation_size('midtier_registration')") bytes with its indexes (as made)" >>"$out/notes.txt"
  fi
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
    start=$(date +%s.%N)
    "$bin" serve --config "$config" >"$out/midtier-$run-$spread.log" 2>&1 & served=$!; pids+=($served)
    wait_for "http://127.0.0.1:$mport/healthz"
    echo "$run $spread: serving after $(elapsed "$start") s" >>"$out/notes.txt"
    for phase in filling warm warm-1; do
      c=64; t=2; [ $phase = warm-1 ] && { c=1; t=1; }
      SCALE_IDS=$ids SCALE_SKEW=$skew SCALE_PATH="/bench$tiny" SCALE_AUTH="${auth#Authorization: }" \
        wrk -c $c -t $t -d "${DURATION}s" --latency -s Benchmarks/scale.lua "http://127.0.0.1:$mport/" >"$out/wrk-$run-$spread-$phase.txt" 2>&1
      read -r rps p50 p99 max <<<"$(latency "$out/wrk-$run-$spread-$phase.txt")"
      printf '%-8s %-9s %-8s %-8s %-4s %10s %9s %9s %9s\n' $store "$size" $spread $phase $c "$rps" "$p50" "$p99" "$max" | tee -a "$out/summary.txt"
      grep -q "Non-2xx" "$out/wrk-$run-$spread-$phase.txt" && echo "  (non-2xx answers: see wrk-$run-$spread-$phase.txt)" | tee -a "$out/summary.txt"
    done
    echo "$run $spread: resident $(awk '/VmRSS/ {print $2}' /proc/$served/status) KiB; load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/notes.txt"
    if [ $spread = hot ]; then
      # The admin list: every page of 100 (at most 50 pages), p99 of their times.
      python3 - "$aport" "$token" "$size" "$run" >>"$out/notes.txt" <<'PY'
import json, sys, time, urllib.request
port, token, size, run = sys.argv[1:]
def page(after):
    url = f"http://127.0.0.1:{port}/admin/v1/registrations?limit=100" + (f"&after={after}" if after else "")
    return json.load(urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer " + token}), timeout=120))
page(None)  # the admin token's bcrypt check, remembered after the first call
# A page near the end of the store (the cursor of registration size - 150, midtier-bench's ids).
n = max(0, int(size) - 150)
start = time.monotonic()
last = page("r1." + "%08x-0000-4000-8000-%012x" % (n, n))
print(f"{run}: admin list, a page near the end: {len(last['registrations'])} registrations in {(time.monotonic() - start) * 1000:.1f} ms")
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
print(f"{run}: admin list: the first {pages} pages of 100, p50 {times[len(times) // 2]:.1f} ms, max {times[-1]:.1f} ms")
PY
    fi
    kill "$served"; wait "$served" 2>/dev/null || true
  done
  if [ "$store" = sqlite ]; then
    bytes=$(stat -c %s "$work/scale-$size.sqlite")
    echo "$run: store $bytes bytes, $((bytes / size)) B per registration (the file, after the runs)" >>"$out/notes.txt"
    rm -f "$work/scale-$size.sqlite"*
  else
    # The registrations table with its TOAST and its indexes, and the whole database's growth
    # over the empty migrated one (every table; not the write-ahead log), after the runs: the
    # runs' contact writes leave old row versions until vacuum reuses their space.
    read -r heap indexes table whole <<<"$(pg "$url" "SELECT pg_relation_size('midtier_registration'), pg_indexes_size('midtier_registration'),
      pg_total_relation_size('midtier_registration'), pg_database_size(current_database())" | tr '|' ' ')"
    echo "$run: registrations table $table bytes ($heap rows, $indexes indexes), $((table / size)) B per registration;" \
      "database grew $((whole - empty_bytes)) bytes, $(((whole - empty_bytes) / size)) B per registration (after the runs)" >>"$out/notes.txt"
    pg "$url" "SELECT indexrelid::regclass || ' ' || pg_relation_size(indexrelid) FROM pg_index WHERE indrelid = 'midtier_registration'::regclass" \
      | sed "s/^/$run: index /" >>"$out/notes.txt"
    pg "$MIDTIER_TEST_POSTGRES" "DROP DATABASE $database WITH (FORCE)"
  fi
done
done
echo "memory per cached registration ..."
for n in 200000; do
  read -r before after kept <<<"$("$bench" registration-cache-memory --registrations $n)"
  echo "standing only: $(( (after - before) * 1024 / kept )) B per cached registration ($kept)" >>"$out/notes.txt"
  read -r before after kept <<<"$("$bench" registration-cache-memory --registrations $n --whole-rows)"
  echo "whole rows (before this change): $(( (after - before) * 1024 / kept )) B per registration ($kept)" >>"$out/notes.txt"
done
cat "$out/notes.txt"
