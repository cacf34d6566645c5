#!/usr/bin/env bash
# `make bench`: Midtier's hot path against nginx proxy_pass, Caddy (the Go peer) and the
# upstream itself, in one run on this machine, with the 1 KB entity Midtier rewrites and the
# 62-byte document; plus assertion signing against `openssl speed`, cold bursts and memory.
# Prints ratios; writes the raw output to Benchmarks/results/<time>/. Loopback only; every
# load is bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
DURATION=${DURATION:-10}
out="$repo/Benchmarks/results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
source Benchmarks/setup.sh

# CPU time (user + system, in clock ticks) used so far by the processes in $cpu_pids.
ticks() { local sum=0 pid; for pid in ${cpu_pids:-}; do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo "$sum"; }
nginx_workers=$(pgrep -f "nginx: worker" -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')
run_wrk() { # name connections threads url [headers...]; also records the CPU ticks $cpu_pids used
  local name=$1 c=$2 t=$3 url=$4; shift 4
  local args=()
  for h in "$@"; do args+=(-H "$h"); done
  local before; before=$(ticks)
  wrk -c "$c" -t "$t" -d "${DURATION}s" --latency "${args[@]}" "$url" >"$out/wrk-$name.txt" 2>&1
  echo $(($(ticks) - before)) >"$out/ticks-$name.txt"
}
requests() { awk '/requests in/ {print $1}' "$out/wrk-$1.txt"; }
# CPU microseconds per request of the measured processes during run $1.
cpu_us() { echo "$(cat "$out/ticks-$1.txt") * 1000000 / $(getconf CLK_TCK) / $(requests "$1")" | bc -l; }
rps() { awk '/Requests\/sec/ {print $2}' "$out/wrk-$1.txt"; }
p50() { awk '$1=="50%" {v=$2; if (v ~ /us$/) {sub("us","",v); print v} else if (v ~ /ms$/) {sub("ms","",v); print v*1000} else {sub("s","",v); print v*1000000}}' "$out/wrk-$1.txt"; }
non2xx() { awk '/Non-2xx/ {print $5} END {}' "$out/wrk-$1.txt"; }

echo "throughput at c=64 and latency at c=1, ${DURATION}s each ..."
for doc in entity tiny; do
  p=$path; [ $doc = tiny ] && p=$tiny
  cpu_pids=$nginx_workers run_wrk direct-$doc-64 64 2 "http://127.0.0.1:$up$p"
  cpu_pids=$nginx_workers run_wrk nginx-$doc-64 64 2 "http://127.0.0.1:$proxy$p"
  cpu_pids="$nginx_workers $caddy_pid" run_wrk caddy-$doc-64 64 2 "http://127.0.0.1:$caddy$p" "$auth"
  cpu_pids="$nginx_workers $midtier" run_wrk midtier-$doc-64 64 2 "http://127.0.0.1:$mport/bench$p" "$auth" "X-SMP-APPCID: $appcid"
done
# The floors: the same small answer from a bare Hummingbird application and a bare SwiftNIO
# server (no proxying, no checks): what a Swift server costs per call before any of Midtier's work.
# And a bare NIO server forwarding to the upstream over Midtier's own connection pool (no
# checks, no rewriting): what a proxied call could cost with the device side in NIO handlers.
# And that bare proxy in the shape of Midtier's request path (a Swift task per call,
# Hummingbird's Request and Response values), still without checks: the stack's own floor.
hport=$(free_port); nport=$(free_port); pport=$(free_port); tport=$(free_port)
"$bench" floors --hummingbird-port "$hport" --nio-port "$nport" --proxy-port "$pport" --task-proxy-port "$tport" \
  --upstream "http://127.0.0.1:$up" >/dev/null 2>&1 & floors=$!; pids+=($floors)
for port in $hport $nport $pport $tport; do wait_for "http://127.0.0.1:$port/tiny"; done
cpu_pids=$floors run_wrk floor-hummingbird 64 2 "http://127.0.0.1:$hport/tiny"
cpu_pids=$floors run_wrk floor-nio 64 2 "http://127.0.0.1:$nport/tiny"
cpu_pids="$nginx_workers $floors" run_wrk floor-nio-proxy 64 2 "http://127.0.0.1:$pport/tiny"
cpu_pids="$nginx_workers $floors" run_wrk floor-task-proxy 64 2 "http://127.0.0.1:$tport/tiny"
run_wrk floor-nio-proxy-1 1 1 "http://127.0.0.1:$pport$path"
run_wrk floor-task-proxy-1 1 1 "http://127.0.0.1:$tport$path"
kill $floors 2>/dev/null || true

run_wrk direct-1 1 1 "http://127.0.0.1:$up$path"
run_wrk nginx-1 1 1 "http://127.0.0.1:$proxy$path"
run_wrk caddy-1 1 1 "http://127.0.0.1:$caddy$path" "$auth"
run_wrk midtier-1 1 1 "http://127.0.0.1:$mport/bench$path" "$auth" "X-SMP-APPCID: $appcid"

# Tracing's cost: a second Midtier on the same state with `tracing` at 1 % to a collector
# stand-in, against the first (tracing off), in alternating rounds (this machine drifts between
# runs more than the difference); medians.
echo "tracing cost ..."
sink_port=$(free_port); tport2=$(free_port); taport=$(free_port)
python3 Benchmarks/otlp_sink.py "$sink_port" "$out/otlp-sink.txt" & sink=$!; pids+=($sink)
cp -r "$work/config" "$work/config-traced"
python3 - "$work/config-traced/midtier.json" "$tport2" "$taport" "$sink_port" <<'PY'
import json, sys
path, port, admin, sink = sys.argv[1:]
settings = json.load(open(path))
settings.update({"listen": f"127.0.0.1:{port}", "adminListen": f"127.0.0.1:{admin}", "publicURL": f"http://127.0.0.1:{port}",
                 "tracing": {"endpoint": f"http://127.0.0.1:{sink}/v1/traces", "samplingRatio": 0.01}})
json.dump(settings, open(path, "w"))
PY
"$bin" serve --config "$work/config-traced" >"$out/midtier-traced.log" 2>&1 & traced=$!; pids+=($traced)
wait_for "http://127.0.0.1:$tport2/healthz"
wrk -c 64 -t 2 -d 2s "http://127.0.0.1:$tport2/bench$tiny" -H "$auth" -H "X-SMP-APPCID: $appcid" >/dev/null
for round in 1 2 3; do
  order="off on"; [ $round = 2 ] && order="on off"
  for mode in $order; do
    if [ $mode = off ]; then cpu_pids=$midtier run_wrk tracing-off-$round 64 2 "http://127.0.0.1:$mport/bench$tiny" "$auth" "X-SMP-APPCID: $appcid"
    else cpu_pids=$traced run_wrk tracing-on-$round 64 2 "http://127.0.0.1:$tport2/bench$tiny" "$auth" "X-SMP-APPCID: $appcid"; fi
  done
done
# Stopped as an operator stops it: a graceful stop must end with exit code 0 (a crash here once
# went unnoticed, docs/reliability.md "Stopping with traces on").
kill $traced 2>/dev/null || true; traced_exit=0; wait $traced 2>/dev/null || traced_exit=$?
kill $sink 2>/dev/null || true; wait $sink 2>/dev/null || true
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
tracing_off_us=$(median3 "$(cpu_us tracing-off-1)" "$(cpu_us tracing-off-2)" "$(cpu_us tracing-off-3)")
tracing_on_us=$(median3 "$(cpu_us tracing-on-1)" "$(cpu_us tracing-on-2)" "$(cpu_us tracing-on-3)")

echo "assertion signing ..."
"$bench" assertions --key certs/demo-signing.key --certificate certs/demo-signing.crt --seconds 5 >"$out/assertions.txt"
openssl speed -seconds 5 rsa2048 >"$out/openssl-speed.txt" 2>/dev/null
openssl_sign=$(awk '/^rsa 2048/ {print $6}' "$out/openssl-speed.txt")

echo "cold bursts ..."
python3 - "$mport" "$sport" >"$out/bursts.txt" <<'PY'
import base64, concurrent.futures, json, sys, time, urllib.request
mport, sport = sys.argv[1:]
base = f"http://127.0.0.1:{mport}"
def call(method, path, user, appcid=None):
    headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:bench-password".encode()).decode()}
    if appcid: headers["X-SMP-APPCID"] = appcid
    request = urllib.request.Request(base + path, data=b"{}" if method == "POST" else None, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.status, response.headers.get("X-SMP-APPCID")
def exchanges():
    return json.load(urllib.request.urlopen(f"http://127.0.0.1:{sport}/sandbox/stats", timeout=10))["exchanges"]
register = lambda user: call("POST", "/odata/applications/v1/demo/Connections", user)[1]
with concurrent.futures.ThreadPoolExecutor(32) as pool:
    ids = list(pool.map(lambda i: register(f"user{i}"), range(1, 1001)))
before = exchanges(); start = time.time()
with concurrent.futures.ThreadPoolExecutor(200) as pool:
    ok = sum(1 for status in pool.map(lambda i: call("GET", "/bench/tiny", f"user{i + 1}", ids[i])[0], range(1000)) if status == 200)
print("distinct_users_seconds", round(time.time() - start, 3))
print("distinct_users_ok", ok)
print("distinct_users_exchanges", exchanges() - before)
single = register("user1001")
before = exchanges(); start = time.time()
with concurrent.futures.ThreadPoolExecutor(250) as pool:
    ok = sum(1 for status in pool.map(lambda i: call("GET", "/bench/tiny", "user1001", single)[0], range(1000)) if status == 200)
print("one_user_seconds", round(time.time() - start, 3))
print("one_user_ok", ok)
print("one_user_exchanges", exchanges() - before)
PY
rss_after=$(awk '/VmRSS/ {print $2}' /proc/$midtier/status)
"$bench" token-cache-memory --tokens 100000 >"$out/token-cache-memory.txt"

echo "push notifications ..."
python3 Benchmarks/push_bench.py "$bin" >"$out/push.txt"

burst() { awk -v k="$1" '$1==k {print $2}' "$out/bursts.txt"; }
read -r cache_before cache_after cache_count <"$out/token-cache-memory.txt"
{
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -m), $(swift --version 2>&1 | head -1)"
  echo "nginx $(nginx -v 2>&1 | cut -d/ -f2), caddy $(caddy version | cut -d' ' -f1), wrk 4.1.0; loopback; ${DURATION}s per run"
  echo "upstream: nginx returning a $(wc -c <"$work/www/entity.json")-byte OData entity (entity: Midtier rewrites its 3 URIs) or a 62-byte document (tiny)"
  echo
  # nginx's workers serve the upstream in every run: a proxy's own CPU per request is what the
  # measured processes used less what the upstream alone costs (the direct run).
  for doc in entity tiny; do
    upstream_us=$(cpu_us direct-$doc-64)
    nginx_us=$(echo "$(cpu_us nginx-$doc-64) - $upstream_us" | bc -l)
    caddy_us=$(echo "$(cpu_us caddy-$doc-64) - $upstream_us" | bc -l)
    midtier_us=$(echo "$(cpu_us midtier-$doc-64) - $upstream_us" | bc -l)
    printf "%-6s c=64  direct %s, nginx proxy_pass %s, caddy %s, midtier %s req/s\n" "$doc" "$(rps direct-$doc-64)" "$(rps nginx-$doc-64)" "$(rps caddy-$doc-64)" "$(rps midtier-$doc-64)"
    printf "  midtier / nginx %.2f (target >= 0.5), midtier / caddy %.2f (target >= 2)\n" "$(echo "$(rps midtier-$doc-64) / $(rps nginx-$doc-64)" | bc -l)" "$(echo "$(rps midtier-$doc-64) / $(rps caddy-$doc-64)" | bc -l)"
    printf "  CPU per proxied call: nginx %.1f us, caddy %.1f us, midtier %.1f us; midtier / nginx %.1f (target <= 3)\n" "$nginx_us" "$caddy_us" "$midtier_us" "$(echo "$midtier_us / $nginx_us" | bc -l)"
  done
  printf "floors (small answer, no proxying) c=64: bare SwiftNIO %s req/s, %.1f us per call; bare Hummingbird %s req/s, %.1f us per call\n" \
    "$(rps floor-nio)" "$(cpu_us floor-nio)" "$(rps floor-hummingbird)" "$(cpu_us floor-hummingbird)"
  printf "  Midtier's proxied call (tiny) less the Hummingbird floor: %.1f us\n" "$(echo "$(cpu_us midtier-tiny-64) - $(cpu_us direct-tiny-64) - $(cpu_us floor-hummingbird)" | bc -l)"
  printf "  bare NIO proxy over Midtier's connection pool (tiny, no checks): %s req/s, %.1f us per call (nginx %.1f us)\n" \
    "$(rps floor-nio-proxy)" "$(echo "$(cpu_us floor-nio-proxy) - $(cpu_us direct-tiny-64)" | bc -l)" "$(echo "$(cpu_us nginx-tiny-64) - $(cpu_us direct-tiny-64)" | bc -l)"
  printf "  the same bare proxy as a task per call with Hummingbird's Request and Response (tiny, no checks): %s req/s, %.1f us per call\n" \
    "$(rps floor-task-proxy)" "$(echo "$(cpu_us floor-task-proxy) - $(cpu_us direct-tiny-64)" | bc -l)"
  printf "  midtier / bare NIO proxy CPU per call (tiny) %.2f (target <= 1.3); bare NIO proxy / caddy req/s (tiny) %.2f, task proxy / caddy %.2f\n" \
    "$(echo "($(cpu_us midtier-tiny-64) - $(cpu_us direct-tiny-64)) / ($(cpu_us floor-nio-proxy) - $(cpu_us direct-tiny-64))" | bc -l)" \
    "$(echo "$(rps floor-nio-proxy) / $(rps caddy-tiny-64)" | bc -l)" "$(echo "$(rps floor-task-proxy) / $(rps caddy-tiny-64)" | bc -l)"
  printf "latency p50 c=1 (entity)  direct %s us, nginx %s us, caddy %s us, midtier %s us\n" "$(p50 direct-1)" "$(p50 nginx-1)" "$(p50 caddy-1)" "$(p50 midtier-1)"
  printf "  floors at c=1: bare NIO proxy %s us, task proxy %s us\n" "$(p50 floor-nio-proxy-1)" "$(p50 floor-task-proxy-1)"
  printf "  added over direct: midtier %.0f us (target <= 150), nginx %.0f us, caddy %.0f us, bare NIO proxy %.0f us, task proxy %.0f us\n" \
    "$(echo "$(p50 midtier-1) - $(p50 direct-1)" | bc -l)" "$(echo "$(p50 nginx-1) - $(p50 direct-1)" | bc -l)" "$(echo "$(p50 caddy-1) - $(p50 direct-1)" | bc -l)" \
    "$(echo "$(p50 floor-nio-proxy-1) - $(p50 direct-1)" | bc -l)" "$(echo "$(p50 floor-task-proxy-1) - $(p50 direct-1)" | bc -l)"
  printf "tracing sampled at 1 %% (tiny, c=64, medians of 3 alternating rounds): CPU per call %.1f us against %.1f us with tracing off: %+.1f %% (target <= 5 %%); %s\n" \
    "$tracing_on_us" "$tracing_off_us" "$(echo "($tracing_on_us - $tracing_off_us) * 100 / $tracing_off_us" | bc -l)" "$(cat "$out/otlp-sink.txt" 2>/dev/null || echo "no exports counted")"
  echo "  the traced Midtier stopped on SIGTERM with exit code $traced_exit (0 expected)"
  printf "assertions/s (build+sign, 1 core) %s vs openssl rsa2048 sign/s %s: %.2f (target >= 0.8)\n" "$(cat "$out/assertions.txt")" "$openssl_sign" "$(echo "$(cat "$out/assertions.txt") / $openssl_sign" | bc -l)"
  echo "cold burst, 1000 distinct users: $(burst distinct_users_ok)/1000 ok in $(burst distinct_users_seconds)s, $(burst distinct_users_exchanges) exchanges"
  echo "cold burst, 1000 calls of one user: $(burst one_user_ok)/1000 ok in $(burst one_user_seconds)s, $(burst one_user_exchanges) exchange(s) (target 1)"
  echo "RSS idle $((rss_idle / 1024)) MiB; after the bursts $((rss_after / 1024)) MiB"
  cat "$out/push.txt"
  echo "token cache: 100000 tokens of 256 bytes add $(((cache_after - cache_before) / 1024)) MiB (process $((cache_after / 1024)) MiB; target <= 100 MB)"
} | tee "$out/summary.txt"
echo "raw output: $out"
