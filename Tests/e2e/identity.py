#!/usr/bin/env python3
"""Identity and isolation through the real `midtier` binary (docs/identity.md): the real
sandbox as SuccessFactors, a stand-in back end that keeps sessions in cookies, a company IdP
whose JWTs this script signs with `openssl`, and a token service on a closed port.

1. Back-end sessions end with their registration: a deleted id is never handed to another
   user, a re-registration never carries the earlier session, DELETE expires the device's
   X-SMP-APPCID cookie, and a lock ends the registration's back-end session.
2. Realms: basic `alice` (users.json, SuccessFactors user 100001) and JWT `alice` of the IdP
   (claims map her to 100003) on the same destination: each reads her own payroll, the
   self-service of one never lists or wipes the other's registration, and the admin API
   names them apart with `?realm=`.
3. Registrations per user are limited (the documented default, 20): 403 REGISTRATION_LIMIT.
4. A token service that cannot be reached is a 502 in plain words, with nothing of Midtier's
   HTTP client in it; the detail is in the log.
5. A lock or wipe holds for the device (docs/identity.md, "The same device"): alice locks her
   lost phone through self-service; onboarding with its DeviceId again is 403
   TRAFFIC_REG_LOCKED (as the proxy refuses it), so is the SDK's X-SMP-DEVICEID and a PUT or
   PATCH moving a DeviceId onto it or off it; a new phone onboards; after an admin unlock the
   phone onboards again. A wiped tablet: 403 TRAFFIC_REG_WIPED until an admin deletes it.
6. Stored text has no control characters: a DeviceModel with \\u0000 (or a DeviceId with DEL)
   is 400 naming the field; a JWT whose sub has a NUL is 401 naming the claim.
7. A `$metadata` patch setting `Scale` alone loads and serves; whether the Scale fits is
   judged on the patched document: `check-config --metadata` reports one without a fitting
   Precision, and at run time it is a warning in the log.

Usage: identity.py PATH-TO-MIDTIER. Prints `identity: N passed, M failed`; exits 1 on failure.
Standard library and the `openssl` command only; every process is killed at the end.
"""
import base64, http.server, json, os, shutil, socket, socketserver, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.parse, urllib.request
from harness import Checks, b64url, basic, demo_config, free_port, header, idp_key, jwt, kill_all, start_sandbox_and_midtier, wait_for, labelled

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ISSUER = "https://idp.identity.test"
ADMIN_TOKEN = "identity-admin-" + os.urandom(12).hex()
processes = []
check = Checks("identity")


def call(port, method, path, headers=None, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=labelled(headers, body))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


class Sessions:
    """What the cookie back end issued and was sent."""
    lock = threading.Lock()
    issued = {}     # SESSION value -> the request tag it answered
    presented = {}  # request tag -> SESSION value sent (None for none)


class CookieBackend(http.server.BaseHTTPRequestHandler):
    """Starts a session (Set-Cookie: SESSION) for a request that comes without one."""
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        tag = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("tag", [""])[0]
        cookies = dict(part.strip().split("=", 1) for part in (self.headers.get("Cookie") or "").split(";") if "=" in part)
        session = cookies.get("SESSION")
        extra = []
        with Sessions.lock:
            Sessions.presented[tag] = session
            if session is None:
                session = os.urandom(12).hex()
                Sessions.issued[session] = tag
                extra.append(("Set-Cookie", f"SESSION={session}; Path=/; HttpOnly"))
        body = json.dumps({"d": {"session": session}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def port_open(port, seconds=20):
    """Whether something accepts connections on `port` within `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def hash_secret(secret):
    return subprocess.run([BIN, "hash-secret", "--cost", "10"], input=secret + "\n", capture_output=True, text=True, check=True).stdout.strip()


work = tempfile.mkdtemp(prefix="midtier-identity-")
try:
    backend_port, sport, closed_port = free_port(), free_port(), free_port()
    backend = ThreadingServer(("127.0.0.1", backend_port), CookieBackend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()

    mport, aport = free_port(), free_port()
    config = demo_config(REPO, work, mport, aport, adminTokenHashes=[hash_secret(ADMIN_TOKEN)])
    destinations = os.path.join(config, "destinations")
    sf = json.load(open(os.path.join(destinations, "sf.json")))
    sf.update({"URL": f"http://127.0.0.1:{sport}", "tokenServiceURL": f"http://127.0.0.1:{sport}/oauth/token"})
    json.dump(sf, open(os.path.join(destinations, "sf.json"), "w"))
    down = dict(sf, Name="down", tokenServiceURL=f"http://127.0.0.1:{closed_port}/oauth/token")
    json.dump(down, open(os.path.join(destinations, "down.json"), "w"))
    json.dump({"Name": "cookies", "URL": f"http://127.0.0.1:{backend_port}", "Authentication": "NoAuthentication"},
              open(os.path.join(destinations, "cookies.json"), "w"))
    demo = json.load(open(os.path.join(config, "apps", "demo.json")))
    demo["destinations"] = ["sf", "cookies", "down"]
    json.dump(demo, open(os.path.join(config, "apps", "demo.json"), "w"))
    key, jwks = idp_key(work)
    json.dump(jwks, open(os.path.join(work, "jwks.json"), "w"))
    json.dump({"authentication": {"type": "jwt", "issuer": ISSUER, "audience": "midtier", "jwks": {"file": os.path.join(work, "jwks.json")},
                                  "userClaim": "sub"},
               "destinations": ["sf"]}, open(os.path.join(config, "apps", "corp.json"), "w"))

    midtier, log_path = start_sandbox_and_midtier(BIN, REPO, work, config, sport, processes)
    ready = wait_for(f"http://127.0.0.1:{mport}/healthz") and port_open(sport)
    check("midtier and the sandbox start", ready and midtier.poll() is None, open(log_path, "rb").read()[-2000:].decode(errors="replace"))

    ADMIN = {"Authorization": "Bearer " + ADMIN_TOKEN}
    ALICE, BOB, CAROL = basic("alice", "alice-demo-password"), basic("bob", "bob-demo-password"), basic("carol", "carol-demo-password")
    connections = "/odata/applications/v1/demo/Connections"

    def register(auth, app="demo", proposed=None, cookie=None):
        headers = {"Authorization": auth, "Content-Type": "application/json"}
        if proposed:
            headers["X-SMP-APPCID"] = proposed
        if cookie:
            headers["Cookie"] = f"X-SMP-APPCID={cookie}"
        status, headers, body = call(mport, "POST", f"/odata/applications/v1/{app}/Connections", headers, b'{"DeviceType":"iPad"}')
        return status, header(headers, "X-SMP-APPCID"), body

    def session_call(auth, cid, tag):
        status, headers, body = call(mport, "GET", f"/cookies/x?tag={tag}", {"Authorization": auth, "X-SMP-APPCID": cid})
        return status, headers

    # --- 1. Back-end sessions end with their registration. ---
    status, shared, body = register(ALICE, proposed="shared-ipad-7")
    check("alice registers the shared device as shared-ipad-7", status == 201 and shared == "shared-ipad-7", f"({status} {shared} {body[:200]!r})")
    status, headers = session_call(ALICE, shared, "alice-1")
    check("the back end starts a session for alice", status == 200 and Sessions.presented.get("alice-1") is None, f"({status})")
    check("the device never gets the back end's Set-Cookie", header(headers, "Set-Cookie") is None, f"({headers})")
    alice_session = next((value for value, tag in Sessions.issued.items() if tag == "alice-1"), None)
    status, _ = session_call(ALICE, shared, "alice-2")
    check("alice's next call carries her back-end session", status == 200 and Sessions.presented.get("alice-2") == alice_session, f"({Sessions.presented})")
    status, headers, body = call(mport, "DELETE", f"{connections}('{shared}')", {"Authorization": ALICE, "Cookie": f"X-SMP-APPCID={shared}"})
    cookie = header(headers, "Set-Cookie") or ""
    check("alice deletes the registration: 204", status == 204, f"({status} {body[:200]!r})")
    check("the DELETE expires the device's X-SMP-APPCID cookie",
          cookie.startswith("X-SMP-APPCID=;") and ("Max-Age=0" in cookie or "1970" in cookie), f"({cookie!r})")
    # bob onboards on the same device, which still sends the old cookie.
    status, bob_cid, body = register(BOB, cookie=shared)
    check("bob onboards on the shared device", status == 201 and bob_cid, f"({status} {body[:200]!r})")
    check("bob is not handed alice's deleted id", bob_cid != shared, f"({bob_cid})")
    status, _ = session_call(BOB, bob_cid, "bob-1")
    check("bob's call reaches the back end without alice's session", status == 200 and Sessions.presented.get("bob-1") != alice_session,
          f"({status} presented {Sessions.presented.get('bob-1')})")
    status, again, body = register(ALICE, proposed=shared)
    status_call, _ = session_call(ALICE, again, "alice-3") if again else (0, {})
    check("alice registering again never carries the earlier session",
          status == 201 and status_call == 200 and Sessions.presented.get("alice-3") != alice_session, f"({status} {again} {Sessions.presented.get('alice-3')})")
    # A lock ends the registration's back-end session: after unlock it starts a new one.
    status, carol_cid, _ = register(CAROL)
    session_call(CAROL, carol_cid, "carol-1")
    carol_session = next((value for value, tag in Sessions.issued.items() if tag == "carol-1"), None)
    session_call(CAROL, carol_cid, "carol-2")
    check("carol's session is kept between calls", carol_session and Sessions.presented.get("carol-2") == carol_session, f"({Sessions.presented})")
    locked = call(aport, "POST", f"/admin/v1/registrations/{carol_cid}/lock", ADMIN)[0]
    unlocked = call(aport, "POST", f"/admin/v1/registrations/{carol_cid}/unlock", ADMIN)[0]
    status, _ = session_call(CAROL, carol_cid, "carol-3")
    check("after a lock (and unlock) carol's old back-end session is gone",
          (locked, unlocked, status) == (200, 200, 200) and Sessions.presented.get("carol-3") != carol_session,
          f"({locked} {unlocked} {status} presented {Sessions.presented.get('carol-3')})")

    # --- 2. Realms: basic alice and the IdP's alice are different users. ---
    now = int(time.time())
    idp_alice = "Bearer " + jwt(key, {"iss": ISSUER, "aud": "midtier", "sub": "alice", "sfUserId": "100003", "iat": now, "exp": now + 3600})

    def payroll_users(auth, cid):
        status, _, body = call(mport, "GET", "/sf/odata/v2/EmployeePayrollRunResults?$format=json&$top=5", {"Authorization": auth, "X-SMP-APPCID": cid})
        rows = json.loads(body)["d"]["results"] if status == 200 else []
        return status, sorted({row.get("userId") for row in rows}), body

    status, users, body = payroll_users(ALICE, again)
    check("basic alice reads her own payroll (100001)", status == 200 and users == ["100001"], f"({status} {users} {body[:200]!r})")
    status, idp_cid, body = register(idp_alice, app="corp")
    check("the IdP's alice registers on the jwt app", status == 201 and idp_cid, f"({status} {body[:300]!r})")
    status, users, body = payroll_users(idp_alice, idp_cid)
    check("the IdP's alice reads SuccessFactors user 100003's payroll, not basic alice's cached token's",
          status == 200 and users == ["100003"], f"({status} {users} {body[:200]!r})")
    status, users, _ = payroll_users(ALICE, again)
    check("basic alice still reads 100001", status == 200 and users == ["100001"], f"({status} {users})")

    status, _, body = call(mport, "GET", "/mobileservices/me/registrations", {"Authorization": idp_alice})
    listed = [r.get("ApplicationConnectionId") for r in (json.loads(body)["d"]["results"] if status == 200 else [])]
    check("the IdP's alice lists only her own registration", status == 200 and listed == [idp_cid], f"({status} {body[:300]!r})")
    status, _, body = call(mport, "POST", f"/mobileservices/me/registrations/{again}/wipe", {"Authorization": idp_alice})
    check("the IdP's alice cannot wipe basic alice's registration (404)", status == 404, f"({status} {body[:200]!r})")
    status, _, body = call(aport, "GET", f"/admin/v1/registrations/{again}", ADMIN)
    check("basic alice's registration is still active", status == 200 and json.loads(body).get("state") == "active", f"({status} {body[:200]!r})")
    status, _, body = call(aport, "GET", "/admin/v1/users/alice?realm=" + urllib.parse.quote(ISSUER, safe=""), ADMIN)
    answer = json.loads(body) if status == 200 else {}
    check("the admin API names the IdP's alice with ?realm=", status == 200 and answer.get("realm") == ISSUER
          and [r.get("id") for r in answer.get("registrations", [])] == [idp_cid], f"({status} {body[:300]!r})")
    status, _, body = call(aport, "GET", "/admin/v1/users/alice", ADMIN)
    answer = json.loads(body) if status == 200 else {}
    check("the plain id is still the users.json alice", status == 200 and idp_cid not in [r.get("id") for r in answer.get("registrations", [])]
          and again in [r.get("id") for r in answer.get("registrations", [])], f"({status} {body[:300]!r})")

    # --- 3. Registrations per user are limited (default 20). ---
    made = [register(CAROL) for _ in range(19)]  # carol has one already
    check("carol makes 20 registrations", all(status == 201 for status, _, _ in made), f"({[status for status, _, _ in made]})")
    status, extra, body = register(CAROL)
    code = json.loads(body).get("error", {}).get("code") if body.startswith(b"{") else None
    check("the 21st is refused 403 REGISTRATION_LIMIT", status == 403 and code == "REGISTRATION_LIMIT", f"({status} {body[:300]!r})")
    deleted = call(mport, "DELETE", f"{connections}('{made[0][1]}')", {"Authorization": CAROL})[0]
    status, _, _ = register(CAROL)
    check("after deleting one, carol can register again", deleted == 204 and status == 201, f"({deleted} {status})")

    # --- 4. An unreachable token service: plain words for the device, detail in the log. ---
    status, headers, body = call(mport, "GET", "/down/x", {"Authorization": ALICE, "X-SMP-APPCID": again})
    text = body.decode(errors="replace")
    internals = ["HTTPClientError", "NIOConnectionError", "NIOCore", "connectTimeout", "Connection refused", "ECONNREFUSED",
                 "errno", "SingleConnectionFailure", f":{closed_port}", "Error("]
    check("an unreachable token service is 502", status == 502, f"({status} {text[:300]})")
    check("... saying so in plain words", "token service could not be reached" in text, f"({text[:300]})")
    check("... without the HTTP client's internals", not any(word in text for word in internals),
          f"({[word for word in internals if word in text]}: {text[:300]})")
    time.sleep(0.2)
    logged = open(log_path, "rb").read().decode(errors="replace")
    check("the detail is in the log", "token exchange failed" in logged, "")

    # --- 5. A lock or wipe holds for the device: it cannot onboard again for its user. ---
    def onboard(auth, fields):
        status, headers, body = call(mport, "POST", connections, {"Authorization": auth, "Content-Type": "application/json"},
                                     json.dumps(fields).encode())
        return status, headers, body

    def refusal(status, headers, body):
        """(status, x-message-code, the OData error's code) of an answer."""
        try:
            code = json.loads(body).get("error", {}).get("code")
        except ValueError:
            code = None
        return status, header(headers, "x-message-code"), code

    status, headers, body = onboard(ALICE, {"DeviceType": "iPhone", "DeviceId": "alice-lost-phone"})
    lost = header(headers, "X-SMP-APPCID")
    check("alice onboards her phone", status == 201 and lost, f"({status} {body[:200]!r})")
    status, _, body = call(mport, "POST", f"/mobileservices/me/registrations/{lost}/lock", {"Authorization": ALICE})
    check("alice locks her lost phone through self-service", status == 200, f"({status} {body[:200]!r})")
    proxied = refusal(*call(mport, "GET", "/sf/odata/v2/EmployeePayrollRunResults?$format=json&$top=1", {"Authorization": ALICE, "X-SMP-APPCID": lost}))
    check("its calls are refused: 403 TRAFFIC_REG_LOCKED", proxied == (403, "TRAFFIC_REG_LOCKED", "TRAFFIC_REG_LOCKED"), f"({proxied})")
    status, headers, body = onboard(ALICE, {"DeviceId": "alice-lost-phone"})
    escaped = header(headers, "X-SMP-APPCID")
    payroll = payroll_users(ALICE, escaped)[:2] if escaped else None
    check("onboarding the locked phone again is refused as the proxy refuses it: 403 TRAFFIC_REG_LOCKED",
          refusal(status, headers, body) == proxied and not escaped, f"({status} {body[:200]!r}; the new id reads payroll: {payroll})")
    status, headers, body = call(mport, "GET", "/sf/odata/v2/EmployeePayrollRunResults?$format=json&$top=1",
                                 {"Authorization": ALICE, "X-SMP-APPID": "demo", "X-SMP-DEVICEID": "alice-lost-phone"})
    check("the SDK's X-SMP-DEVICEID finds the locked registration: 403 TRAFFIC_REG_LOCKED",
          refusal(status, headers, body) == proxied, f"({status} {body[:200]!r})")
    status, headers, body = onboard(ALICE, {"DeviceType": "iPhone", "DeviceId": "alice-new-phone"})
    new_phone = header(headers, "X-SMP-APPCID")
    check("a new phone (another DeviceId) onboards: 201", status == 201 and new_phone, f"({status} {body[:200]!r})")
    status, users, _ = payroll_users(ALICE, new_phone)
    check("... and reads alice's payroll", status == 200 and users == ["100001"], f"({status} {users})")
    for method in ("PUT", "PATCH"):
        status, headers, body = call(mport, method, f"{connections}('{new_phone}')", {"Authorization": ALICE, "Content-Type": "application/json"},
                                     b'{"DeviceId":"alice-lost-phone"}')
        check(f"{method} cannot give the new registration the locked phone's DeviceId: 403 TRAFFIC_REG_LOCKED",
              refusal(status, headers, body) == proxied, f"({status} {body[:200]!r})")
    status, headers, body = call(mport, "PUT", f"{connections}('{lost}')", {"Authorization": ALICE, "Content-Type": "application/json"},
                                 b'{"DeviceId":"alice-elsewhere"}')
    check("the locked registration cannot change its DeviceId: 403 TRAFFIC_REG_LOCKED", refusal(status, headers, body) == proxied,
          f"({status} {body[:200]!r})")
    status, _, body = call(aport, "POST", f"/admin/v1/registrations/{lost}/unlock", ADMIN)
    check("an admin unlocks the phone", status == 200, f"({status} {body[:200]!r})")
    status, headers, body = onboard(ALICE, {"DeviceId": "alice-lost-phone"})
    check("after the unlock the phone onboards again: 201", status == 201, f"({status} {body[:200]!r})")

    status, headers, body = onboard(ALICE, {"DeviceType": "iPad", "DeviceId": "alice-wiped-tablet"})
    wiped = header(headers, "X-SMP-APPCID")
    status, _, body = call(mport, "POST", f"/mobileservices/me/registrations/{wiped}/wipe", {"Authorization": ALICE})
    check("alice wipes her tablet through self-service", status == 200, f"({status} {body[:200]!r})")
    result = refusal(*onboard(ALICE, {"DeviceId": "alice-wiped-tablet"}))
    check("onboarding the wiped tablet again is refused: 403 TRAFFIC_REG_WIPED", result == (403, "TRAFFIC_REG_WIPED", "TRAFFIC_REG_WIPED"), f"({result})")
    status, _, body = call(aport, "DELETE", f"/admin/v1/registrations/{wiped}", ADMIN)
    check("an admin deletes the wiped registration", status == 204, f"({status} {body[:200]!r})")
    status, _, body = onboard(ALICE, {"DeviceId": "alice-wiped-tablet"})
    check("after the delete the tablet onboards again: 201", status == 201, f"({status} {body[:200]!r})")

    # --- 6. Control characters never reach the store: 400 naming the field, 401 naming the claim. ---
    status, headers, body = onboard(ALICE, {"DeviceType": "iPhone", "DeviceModel": "iPhone\u0000 15"})
    message = json.loads(body).get("error", {}).get("message", {}).get("value", "") if body.startswith(b"{") else ""
    check("a DeviceModel with \\u0000 is refused: 400 naming DeviceModel", status == 400 and "DeviceModel" in message, f"({status} {body[:200]!r})")
    status, headers, body = onboard(ALICE, {"DeviceId": "phone\u007f", "CustomCustom2": "ok"})
    check("a DeviceId with DEL is refused: 400 naming DeviceId", status == 400 and b"DeviceId" in body, f"({status} {body[:200]!r})")
    nul_sub = "Bearer " + jwt(key, {"iss": ISSUER, "aud": "midtier", "sub": "ali\u0000ce", "sfUserId": "100003", "iat": now, "exp": now + 3600})
    status, headers, body = call(mport, "POST", "/odata/applications/v1/corp/Connections", {"Authorization": nul_sub}, b"{}")
    check("a JWT whose sub has a NUL is refused: 401 naming sub", status == 401 and b"sub claim" in body, f"({status} {body[:200]!r})")

    check("midtier is still running", midtier.poll() is None)

    # --- 7. A Scale set alone is judged on the patched document. ---
    scale_config = os.path.join(work, "scale-config")
    shutil.copytree(config, scale_config)
    scale_port, scale_admin = free_port(), free_port()
    settings = json.load(open(os.path.join(scale_config, "midtier.json")))
    settings.update({"listen": f"127.0.0.1:{scale_port}", "adminListen": f"127.0.0.1:{scale_admin}", "store": f"sqlite:{work}/scale.sqlite"})
    json.dump(settings, open(os.path.join(scale_config, "midtier.json"), "w"))
    sf["metadataPatches"] = [{"entityType": "EmployeePayrollRunResultsItems", "property": "amount", "set": {"Scale": "2"}}]
    json.dump(sf, open(os.path.join(scale_config, "destinations", "sf.json"), "w"))
    result = subprocess.run([BIN, "check-config", "--config", scale_config], cwd=REPO, capture_output=True, text=True, timeout=60)
    check("a patch setting Scale alone passes check-config", result.returncode == 0, f"({result.returncode} {result.stdout[-500:]})")
    edmx = ('<?xml version="1.0" encoding="utf-8"?><edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx">'
            '<edmx:DataServices><Schema Namespace="SFOData" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">'
            '<EntityType Name="EmployeePayrollRunResultsItems"><Property Name="amount" Type="Edm.Decimal"{}/></EntityType>'
            '</Schema></edmx:DataServices></edmx:Edmx>')
    fitting, bare = os.path.join(work, "fitting.xml"), os.path.join(work, "bare.xml")
    open(fitting, "w").write(edmx.format(' Precision="15"'))
    open(bare, "w").write(edmx.format(""))
    result = subprocess.run([BIN, "check-config", "--config", scale_config, "--metadata", f"sf={fitting}"], cwd=REPO, capture_output=True, text=True, timeout=60)
    check("... and fits a saved document whose Precision fits it", result.returncode == 0, f"({result.returncode} {result.stdout[-500:]})")
    result = subprocess.run([BIN, "check-config", "--config", scale_config, "--metadata", f"sf={bare}"], cwd=REPO, capture_output=True, text=True, timeout=60)
    check("check-config --metadata reports a Scale without a Precision in the saved document",
          result.returncode == 1 and "property amount of entity type EmployeePayrollRunResultsItems: Scale 2 has no Precision" in result.stdout,
          f"({result.returncode} {result.stdout[-500:]})")
    scale_log_path = os.path.join(work, "scale.log")
    scale_log = open(scale_log_path, "wb")
    scale = subprocess.Popen([BIN, "serve", "--config", scale_config], cwd=REPO, stdout=scale_log, stderr=scale_log)
    processes.append(scale)
    started = wait_for(f"http://127.0.0.1:{scale_port}/healthz") and scale.poll() is None
    check("serve starts with it", started, open(scale_log_path, "rb").read()[-1000:].decode(errors="replace"))
    status, body = 0, b""
    if started:
        _, headers, _ = call(scale_port, "POST", connections, {"Authorization": ALICE}, b"{}")
        status, _, body = call(scale_port, "GET", "/sf/odata/v2/$metadata", {"Authorization": ALICE, "X-SMP-APPCID": header(headers, "X-SMP-APPCID")})
    check("the sandbox's $metadata (amount without Precision) is patched and served",
          status == 200 and b'Scale="2"' in body, f"({status} {body[:200]!r})")
    scale_log.flush()
    time.sleep(0.2)
    check("... with a warning in the log that the Scale has no fitting Precision",
          "metadata patch leaves a Scale without a fitting Precision" in open(scale_log_path, "rb").read().decode(errors="replace"))
finally:
    kill_all(processes)
    backend.shutdown()
    shutil.rmtree(work, ignore_errors=True)

check.finish()
