# Sourced by run.sh, soak.sh and instances.sh, from the repository root, with $repo and $out
# set: installs the tools, builds Midtier in release mode and starts, on free loopback ports:
# nginx as the upstream ($up: under /odata/v2/ a 1 KB OData entity whose __metadata.uri and
# __deferred.uri are absolute URLs of the upstream, which Midtier rewrites; /tiny a 62-byte
# document), nginx as a plain proxy_pass to it ($proxy), Caddy as reverse_proxy with basicauth
# and an injected bearer header ($caddy, the Go peer), the sandbox ($sport) and Midtier ($mport,
# admin $aport) with a destination `bench` (SAML bearer tokens from the sandbox) to the upstream
# and users user0..user1001 (password `bench-password`).
# Leaves: $midtier and $caddy_pid (pids), $bin, $bench (midtier-bench), $work, $appcid/$auth (user0's registration and
# credentials), $path (the entity), $tiny.
work=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# Tools, when missing: wrk, nginx, caddy and bc from Debian.
for tool in wrk nginx caddy bc; do
  command -v "$tool" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$tool" >/dev/null; }
done
scripts/install-deps.sh
certs/make-demo-keys.sh >/dev/null
swift build -c release --product midtier 2>&1 | tail -1
swift build -c release --product midtier-sandbox 2>&1 | tail -1
swift build -c release --product midtier-bench 2>&1 | tail -1
bin="$repo/.build/release/midtier"
bench="$repo/.build/release/midtier-bench"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_for() { for _ in $(seq 1 200); do curl -s -o /dev/null "$1" && return 0; sleep 0.05; done; echo "not up: $1"; return 1; }
up=$(free_port); proxy=$(free_port); caddy=$(free_port); sport=$(free_port); mport=$(free_port); aport=$(free_port)

# The upstream's entity: a payroll run as SuccessFactors answers it, about 1 KB, with absolute
# URIs of the upstream in __metadata and __deferred (Midtier rewrites them to its own URL).
mkdir -p "$work/www"
python3 - "$up" >"$work/www/entity.json" <<'PY'
import json, sys
base = f"http://127.0.0.1:{sys.argv[1]}/odata/v2/"
key = "EmployeePayrollRunResults(externalCode='PRR-100001-2025-10',mdfSystemEffectiveStartDate=datetime'2025-10-01T00:00:00')"
entity = {"__metadata": {"uri": base + key, "type": "SFOData.EmployeePayrollRunResults"},
          "externalCode": "PRR-100001-2025-10", "mdfSystemEffectiveStartDate": "/Date(1759276800000)/",
          "userId": "100001", "payrollProviderId": "ADP-DE", "payrollId": "DE-2025-10", "payDate": "/Date(1761868800000)/",
          "startDateWhenEarned": "/Date(1759276800000)/", "endDateWhenEarned": "/Date(1761868799000)/",
          "currency": "EUR", "grossAmount": "5250.00", "netAmount": "3412.55", "taxAmount": "1104.20",
          "socialSecurityAmount": "733.25", "lastModifiedDateTime": "/Date(1761955200000)/",
          "employeePayrollRunResultsItems": {"__deferred": {"uri": base + key + "/employeePayrollRunResultsItems"}},
          "userIdNav": {"__deferred": {"uri": base + key + "/userIdNav"}}}
print(json.dumps({"d": entity}, separators=(",", ":")), end="")
PY
tiny_document='{"d":{"results":[{"userId":"100001","amount":"4250.00"}]}}'

# The upstream: nginx answering a small OData-like JSON document from memory; and nginx as a
# plain reverse proxy to it (keep-alive to the upstream, like Midtier's pool).
cat >"$work/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
  upstream backend { server 127.0.0.1:$up; keepalive 64; }
  open_file_cache max=16 inactive=600s; open_file_cache_valid 600s;
  server {
    listen 127.0.0.1:$up;
    location /odata/v2/ { default_type application/json; root $work/www; try_files /entity.json =404; }
    location = /tiny { default_type application/json; return 200 '$tiny_document'; }
  }
  server { listen 127.0.0.1:$proxy; location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
NGINX
nginx -c "$work/nginx.conf" -g 'daemon off;' & pids+=($!)

# Caddy, the Go peer: what Midtier does minus the registration, token and rewriting work —
# basic auth (bcrypt from `caddy hash-password`; Caddy remembers verified credentials, as
# Midtier does) and a fixed bearer token injected toward the same upstream, keep-alive to it.
caddy_hash=$(caddy hash-password --plaintext bench-password 2>/dev/null)
cat >"$work/Caddyfile" <<CADDY
{
  admin off
  auto_https off
}
http://127.0.0.1:$caddy {
  basicauth {
    user0 $caddy_hash
  }
  reverse_proxy 127.0.0.1:$up {
    header_up Authorization "Bearer bench-static-token-0123456789abcdef"
  }
}
CADDY
XDG_DATA_HOME="$work" XDG_CONFIG_HOME="$work" caddy run --config "$work/Caddyfile" --adapter caddyfile >"$out/caddy.log" 2>&1 & caddy_pid=$!; pids+=($caddy_pid)

# Midtier on a copy of the demo configuration, with a destination `bench` to the upstream.
cp -r config "$work/config"
python3 - "$work" "$mport" "$aport" "$sport" "$up" <<'PY'
import json, sys
work, mport, aport, sport, up = sys.argv[1:]
c = f"{work}/config"
s = json.load(open(f"{c}/midtier.json"))
s.update({"listen": f"127.0.0.1:{mport}", "adminListen": f"127.0.0.1:{aport}", "publicURL": f"http://127.0.0.1:{mport}",
          "store": f"sqlite:{work}/midtier.sqlite", "logLevel": "warning",
          "maxConnectionsPerAddress": 1000})  # the cold bursts open 250 connections from 127.0.0.1
json.dump(s, open(f"{c}/midtier.json", "w"))
d = json.load(open(f"{c}/destinations/sf.json"))
d["URL"] = f"http://127.0.0.1:{sport}"; d["tokenServiceURL"] = f"http://127.0.0.1:{sport}/oauth/token"
json.dump(d, open(f"{c}/destinations/sf.json", "w"))
d.update({"Name": "bench", "URL": f"http://127.0.0.1:{up}"})
json.dump(d, open(f"{c}/destinations/bench.json", "w"))
a = json.load(open(f"{c}/apps/demo.json")); a["destinations"] = ["sf", "bench"]
json.dump(a, open(f"{c}/apps/demo.json", "w"))
PY
"$bench" make-users --count 1002 >"$work/config/users.json"
"$(dirname "$bin")/midtier-sandbox" --port "$sport" >/dev/null 2>&1 & pids+=($!)
# (MIDTIER_WRAPPER: a command Midtier runs under, e.g. `env LD_PRELOAD=…` for allocations.sh.)
${MIDTIER_WRAPPER:-} "$bin" serve --config "$work/config" >"$out/midtier.log" 2>&1 & midtier=$!; pids+=($midtier)
wait_for "http://127.0.0.1:$up/tiny"; wait_for "http://127.0.0.1:$proxy/tiny"; wait_for "http://127.0.0.1:$caddy/tiny"; wait_for "http://127.0.0.1:$mport/healthz"; wait_for "http://127.0.0.1:$sport/sandbox/stats"
rss_idle=$(awk '/VmRSS/ {print $2}' /proc/$midtier/status)

appcid=$(curl -s -D - -o /dev/null -u user0:bench-password -X POST "http://127.0.0.1:$mport/odata/applications/v1/demo/Connections" | awk 'tolower($1)=="x-smp-appcid:" {print $2}' | tr -d '\r')
auth="Authorization: Basic $(printf 'user0:bench-password' | base64)"
path="/odata/v2/EmployeePayrollRunResults(externalCode='PRR-100001-2025-10')?\$format=json"
tiny="/tiny"
status=$(curl -s -o /dev/null -w '%{http_code}' -H "$auth" -H "X-SMP-APPCID: $appcid" "http://127.0.0.1:$mport/bench$path")
[ "$status" = 200 ] || { echo "the hot path does not answer 200 ($status)"; exit 1; }
# Midtier must have rewritten the entity's URIs to its own (the work the comparison includes).
curl -s -H "$auth" -H "X-SMP-APPCID: $appcid" "http://127.0.0.1:$mport/bench$path" | grep -q "http://127.0.0.1:$mport/bench/odata/v2/" \
  || { echo "the hot path does not rewrite the entity's URIs"; exit 1; }
status=$(curl -s -o /dev/null -w '%{http_code}' -H "$auth" "http://127.0.0.1:$caddy$path")
[ "$status" = 200 ] || { echo "caddy does not answer 200 ($status)"; exit 1; }
