#!/usr/bin/env bash
# End-to-end tests of the real `midtier` binary, as a newcomer uses it: the shipped config/
# (on free ports, in a temporary copy), the sandbox, curl as the device, xmlsec1 as an
# independent verifier. Prints "N passed, M failed" and exits non-zero on any failure.
set -uo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
passed=0; failed=0
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

check() { # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   - $name"
  else failed=$((failed + 1)); echo "FAIL - $name"; fi
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_for() { for _ in $(seq 1 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; return 1; }

# A copy of the shipped configuration on free ports, run from the repository root so that
# its relative paths (certs/, data/) resolve as they do for `make run`.
mport=$(free_port); sport=$(free_port)
cp -r "$repo/config" "$work/config"
sed -i "s/0.0.0.0:8080/127.0.0.1:$mport/; s#http://localhost:8080#http://localhost:$mport#; s#sqlite:data/midtier.sqlite#sqlite:$work/midtier.sqlite#" "$work/config/midtier.json"
# Debug level: the secrets checks below then cover every log line Midtier can write.
sed -i 's/"logLevel": "info"/"logLevel": "debug"/' "$work/config/midtier.json"
sed -i "s#localhost:8081#127.0.0.1:$sport#g" "$work/config/destinations/sf.json"
cd "$repo"

check "check-config accepts the shipped configuration" "$bin" check-config --config "$work/config"

"$(dirname "$bin")/midtier-sandbox" --port "$sport" >"$work/sandbox.log" 2>&1 & pids+=($!)
"$bin" serve --config "$work/config" >"$work/midtier.log" 2>&1 & midtier=$!; pids+=($midtier)
wait_for "http://127.0.0.1:$sport/sandbox/stats"
wait_for "http://127.0.0.1:$mport/healthz"
base="http://127.0.0.1:$mport"

check "healthz answers" test "$(curl -s -o /dev/null -w '%{http_code}' "$base/healthz")" = 200

# Onboard alice's device, as the README shows.
curl -s -D "$work/reg.headers" -o "$work/reg.json" -u alice:alice-demo-password -X POST \
  -H 'Content-Type: application/json' -d '{"DeviceType":"iOS","DeviceModel":"iPhone15,2"}' \
  "$base/odata/applications/v1/demo/Connections"
appcid=$(grep -i '^x-smp-appcid:' "$work/reg.headers" | cut -d' ' -f2 | tr -d '\r')
check "registration answers 201" grep -q '^HTTP/1.1 201' "$work/reg.headers"
check "registration sets the X-SMP-APPCID cookie" grep -qi '^set-cookie: X-SMP-APPCID=' "$work/reg.headers"
check "registration body is SAP's {\"d\":...}" python3 -c "import json,sys; d=json.load(open('$work/reg.json'))['d']; sys.exit(0 if d['ApplicationConnectionId']=='$appcid' and d['UserName']=='alice' else 1)"

# The seed query: alice's payroll through Midtier.
seed() { # seed USER PASSWORD APPCID SFUSER
  curl -s -u "$1:$2" -H "X-SMP-APPCID: $3" -G \
    --data-urlencode "\$filter=userId eq '$4'" \
    --data-urlencode '$expand=employeePayrollRunResultsItems,userIdNav/empInfo/paymentInformationNav/toPaymentInformationDetailV3/bankNav' \
    --data-urlencode '$top=3' --data-urlencode '$orderby=payDate desc' \
    "$base/sf/odata/v2/EmployeePayrollRunResults"
}
seed alice alice-demo-password "$appcid" 100001 >"$work/alice.json"
check "alice reads her own payroll (3 runs, items and bank expanded)" python3 - "$work/alice.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["d"]["results"]
ok = len(runs) == 3 and all(r["userId"] == "100001" for r in runs)
ok = ok and all(r["employeePayrollRunResultsItems"]["results"] for r in runs)
ok = ok and "bankNav" in json.dumps(runs[0]["userIdNav"])
sys.exit(0 if ok else 1)
PY

bobcid=$(curl -s -D - -o /dev/null -u bob:bob-demo-password -X POST "$base/odata/applications/v1/demo/Connections" | grep -i '^x-smp-appcid:' | cut -d' ' -f2 | tr -d '\r')
seed bob bob-demo-password "$bobcid" 100001 >"$work/bob.json"
check "bob asking for alice's payroll gets nothing" python3 -c "import json,sys; sys.exit(0 if json.load(open('$work/bob.json'))['d']['results']==[] else 1)"

status() { curl -s --path-as-is -o "$work/last.json" -w '%{http_code}' "$@"; }
check "no registration: 403 with an OData error" test "$(status -u alice:alice-demo-password "$base/sf/odata/v2/User('100001')")" = 403
check "the 403 has an OData v2 error body" python3 -c "import json; json.load(open('$work/last.json'))['error']['message']['value']"
check "wrong password: 401" test "$(status -u alice:wrong -H "X-SMP-APPCID: $appcid" "$base/sf/odata/v2/User('100001')")" = 401
check "bob's registration with alice's password: 403" test "$(status -u alice:alice-demo-password -H "X-SMP-APPCID: $bobcid" "$base/sf/odata/v2/User('100001')")" = 403
for trick in '/sf/../x' '/sf/%2e%2e/x' '/sf/..%2fx' '/sf/odata/v2/%2e%2e/%2e%2e/oauth/token'; do
  check "path trick $trick: 400" test "$(status -u alice:alice-demo-password -H "X-SMP-APPCID: $appcid" "$base$trick")" = 400
done
check "spoofed X-Forwarded-User changes nothing" python3 - "$(curl -s -u alice:alice-demo-password -H "X-SMP-APPCID: $appcid" -H 'X-Forwarded-User: bob' -H 'X-Remote-User: bob' "$base/sf/odata/v2/EmployeePayrollRunResults?%24top=50")" <<'PY'
import json, sys
runs = json.loads(sys.argv[1])["d"]["results"]
sys.exit(0 if runs and all(r["userId"] == "100001" for r in runs) else 1)
PY

# The assertion Midtier would send verifies with xmlsec1 against the registered certificate.
"$bin" assertion --config "$work/config" --destination sf --user alice >"$work/assertion.xml"
check "midtier assertion verifies with xmlsec1" xmlsec1 --verify --pubkey-cert-pem certs/demo-signing.crt --enabled-key-data key-name \
  --id-attr:ID urn:oasis:names:tc:SAML:2.0:assertion:Assertion "$work/assertion.xml"
check "midtier assertion --verify accepts it" "$bin" assertion --config "$work/config" --destination sf --user alice --verify "$work/assertion.xml"
sed 's/>100001</>100002</' "$work/assertion.xml" >"$work/tampered.xml"
check "midtier assertion --verify refuses a tampered one" bash -c "! '$bin' assertion --config '$work/config' --destination sf --user alice --verify '$work/tampered.xml' >/dev/null"
check "xmlsec1 refuses a tampered one" bash -c "! xmlsec1 --verify --pubkey-cert-pem certs/demo-signing.crt --enabled-key-data key-name --id-attr:ID urn:oasis:names:tc:SAML:2.0:assertion:Assertion '$work/tampered.xml' 2>/dev/null"

# No secret reaches the log.
check "the log never carries passwords" bash -c "! grep -q 'alice-demo-password' '$work/midtier.log'"
check "the log never carries assertions" bash -c "! grep -q 'PHNhbWwy' '$work/midtier.log'"
check "the log has debug lines (the level took effect)" grep -q '"level":"debug"' "$work/midtier.log"
check "the log is JSON lines" python3 -c "import json; [json.loads(l) for l in open('$work/midtier.log') if l.strip()]"

# Bad configuration: every problem named as file: key: what.
mkdir -p "$work/bad/apps" "$work/bad/destinations"
echo '{"listen":"nowhere","colour":"blue"}' >"$work/bad/midtier.json"
echo '{"authentication":{"type":"basic"},"destinations":["missing"]}' >"$work/bad/apps/demo.json"
echo '{"users":[]}' >"$work/bad/users.json"
"$bin" check-config --config "$work/bad" >"$work/bad.out" 2>&1; code=$?
check "check-config exits non-zero on problems" test "$code" -ne 0
check "check-config names file and key (listen)" grep -q "midtier.json: listen: " "$work/bad.out"
check "check-config names file and key (unknown key)" grep -q "midtier.json: colour: " "$work/bad.out"
check "check-config names the missing destination" grep -q "apps/demo.json: destinations\[0\]: " "$work/bad.out"
"$bin" serve --config "$work/bad" >/dev/null 2>&1; code=$?
check "serve refuses to start on a bad configuration" test "$code" -ne 0

# PostgreSQL without backendSessionKeys: CSRF sessions stay per instance. A warning naming the
# key and the docs section, from check-config (which still accepts it) and from serve.
cp -r "$work/config" "$work/pg"
python3 - "$work/pg/midtier.json" "$(free_port)" <<'PY'
import json, sys
settings = json.load(open(sys.argv[1]))
settings["store"] = "postgres://midtier@127.0.0.1:%s/midtier?sslmode=disable" % sys.argv[2]
settings.pop("backendSessionKeys", None)
json.dump(settings, open(sys.argv[1], "w"))
PY
"$bin" check-config --config "$work/pg" >"$work/pg.out" 2>&1; code=$?
check "check-config accepts PostgreSQL without backendSessionKeys" test "$code" -eq 0
check "check-config warns: midtier.json: backendSessionKeys, with the docs section" \
  grep -q "pg/midtier.json: backendSessionKeys: warning: .*docs/configuration.md#backendsessionkeys" "$work/pg.out"
"$bin" serve --config "$work/pg" >"$work/pg-serve.log" 2>&1 & pgserve=$!; pids+=($pgserve)
for _ in $(seq 1 100); do grep -q backendSessionKeys "$work/pg-serve.log" && break; kill -0 "$pgserve" 2>/dev/null || break; sleep 0.1; done
kill "$pgserve" 2>/dev/null
check "serve logs the warning, naming the key and the docs section" \
  grep -q '"level":"warning".*backendSessionKeys.*docs/configuration.md#backendsessionkeys' "$work/pg-serve.log"
check "check-config gives the shipped configuration no warning" bash -c "! '$bin' check-config --config '$work/config' | grep -q warning"
check "admin API matches docs/admin-api.yaml (Tests/e2e/admin_api_contract.py)" python3 "$repo/Tests/e2e/admin_api_contract.py" "$bin"

# SIGTERM: stop accepting, finish, exit 0.
kill -TERM "$midtier"
for _ in $(seq 1 100); do kill -0 "$midtier" 2>/dev/null || break; sleep 0.1; done
wait "$midtier"; code=$?
check "SIGTERM stops the server cleanly (exit 0)" test "$code" -eq 0

echo
echo "e2e: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
