#!/usr/bin/env bash
# `make bench-ab BEFORE=<binary>`: one step's effect, A/B. This machine drifts by ±20 % between
# runs of a few seconds, more than most single steps, so a step is judged by running two
# Midtier binaries at once on the same state — `BEFORE` (a release binary saved before the
# step, e.g. `cp .build/release/midtier /tmp/midtier-before`) and the current build — and
# alternating rounds between them: per round, `wrk -c 64` on the tiny document (CPU per call,
# requests per second) and `wrk -c 1` on the 1 KB entity (p50). Prints each round and the
# medians (docs/benchmarks.md). ROUNDS (default 6) and SECONDS_PER_RUN (default 4).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
: "${BEFORE:?set BEFORE to the release binary to compare against}"
before=$(realpath "$BEFORE")
ROUNDS=${ROUNDS:-6}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-4}
out="$repo/Benchmarks/results/ab-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
source Benchmarks/setup.sh

ticks() { local sum=0 pid; for pid in "$@"; do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo "$sum"; }

# `before` on a copy of the configuration with ports of its own, on the same store.
python3 - "$work" <<'PY'
import json, shutil, socket, sys
work = sys.argv[1]
def free():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port
shutil.copytree(f"{work}/config", f"{work}/config-before")
settings = json.load(open(f"{work}/config-before/midtier.json"))
port = free()
settings.update({"listen": f"127.0.0.1:{port}", "adminListen": f"127.0.0.1:{free()}", "publicURL": f"http://127.0.0.1:{port}"})
json.dump(settings, open(f"{work}/config-before/midtier.json", "w"))
open(f"{work}/before-port", "w").write(str(port))
PY
bport=$(cat "$work/before-port")
"$before" serve --config "$work/config-before" >"$out/midtier-before.log" 2>&1 & mbefore=$!; pids+=($mbefore)
wait_for "http://127.0.0.1:$bport/healthz"

declare -A port=([after]=$mport [before]=$bport) pid=([after]=$midtier [before]=$mbefore)
for side in before after; do
  wrk -c 64 -t 2 -d 2s "http://127.0.0.1:${port[$side]}/bench$tiny" -H "$auth" -H "X-SMP-APPCID: $appcid" >/dev/null
done
for round in $(seq 1 "$ROUNDS"); do
  order="before after"; [ $((round % 2)) = 0 ] && order="after before"
  for side in $order; do
    b=$(ticks "${pid[$side]}")
    wrk -c 64 -t 2 -d "${SECONDS_PER_RUN}s" "http://127.0.0.1:${port[$side]}/bench$tiny" -H "$auth" -H "X-SMP-APPCID: $appcid" >"$out/wrk-$side-$round.txt"
    a=$(ticks "${pid[$side]}")
    n=$(awk '/requests in/ {print $1}' "$out/wrk-$side-$round.txt")
    p50=$(wrk -c 1 -t 1 -d "${SECONDS_PER_RUN}s" --latency "http://127.0.0.1:${port[$side]}/bench$path" -H "$auth" -H "X-SMP-APPCID: $appcid" | awk '$1=="50%" {print $2}')
    echo "$side $round $(awk '/Requests\/sec/ {print $2}' "$out/wrk-$side-$round.txt") $(printf '%.1f' "$(echo "($a - $b) * 10000 / $n" | bc -l)") $p50"
  done
done | tee "$out/rounds.txt"
python3 - "$out/rounds.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def microseconds(text): return float(text[:-2]) * (1000 if text.endswith("ms") else 1)
medians = {}
for side in ("before", "after"):
    mine = [row for row in rows if row[0] == side]
    medians[side] = (statistics.median(float(r[2]) for r in mine), statistics.median(float(r[3]) for r in mine),
                     statistics.median(microseconds(r[4]) for r in mine))
    print(f"{side:6}: {medians[side][0]:.0f} req/s at c=64, CPU per call {medians[side][1]:.1f} us, p50 at c=1 {medians[side][2]:.0f} us (medians)")
wins = sum(1 for r in range(1, len(rows) // 2 + 1)
           if float(next(x for x in rows if x[0] == "after" and x[1] == str(r))[3]) < float(next(x for x in rows if x[0] == "before" and x[1] == str(r))[3]))
print(f"after / before CPU per call {medians['after'][1] / medians['before'][1]:.3f}; the step used less CPU in {wins} of {len(rows) // 2} rounds")
PY
echo "raw output: $out"
