#!/usr/bin/env python3
"""Signing in with the back end's own users, through the real `midtier` binary: an app with
`"authentication": {"type": "backend", "destination": …, "path": …}` (SAP Mobile Platform's
HTTP authentication provider) and `UserBasicAuthentication` destinations (its Basic SSO),
against a stand-in SAP system defined here: plain HTTP on 127.0.0.1, a few SAP users (names in
any letter case), 200 to a GET with right Basic credentials and 401 otherwise, every request
and its headers recorded; it can answer 500 to everything, and a second one runs on another
port as another system.

1. `check-config` takes the configuration; it refuses a backend app whose destination does
   not exist and one whose destination is plain http to a remote host, naming the app file and
   `authentication.destination`, and a `UserBasicAuthentication` destination whose URL is
   plain http to a remote host (also one merely starting with `localhost`), naming its URL.
2. alice onboards with her SAP password (201, UserName ALICE); `ALICE` is the same user: her
   Connections list, her registrations and the admin API show one user ALICE in the realm
   `backend:<destination>`.
3. A wrong password and an unknown user are 401; after several failures 429 with Retry-After
   (for every spelling of the name); the back end answering 500, or not listening, is 503 with
   Retry-After, and such answers are not counted as failures.
4. A verified credential is remembered: repeated and concurrent calls cost one check at the
   back end (GETs of the check path); a changed password is checked again.
5. A `UserBasicAuthentication` destination on the checking system gets exactly the caller's
   own Authorization (alice's hers, bob's his, also in 20 concurrent mixed calls).
6. One on another system is 403 and receives nothing; a users.json user calling one is 403
   and no back end receives anything (their Midtier password never leaves); a call naming the
   registration without `X-SMP-APPID` is 401 and reaches no back end.
7. A `NoAuthentication` destination never receives the device's Authorization.
8. After an admin blocks ALICE (`?realm=backend:<destination>`), her calls are 403 and the
   back end sees nothing more of her; bob still gets through. A back-end user who has never
   signed in can be blocked before their first sign-in.
9. The log (debug level) holds no password and no base64 Basic value.

Usage: backend_signin.py PATH-TO-MIDTIER. Prints `backend-signin: N passed, M failed`; exits 1
on failure. Standard library only; every process is killed at the end. BACKEND_SIGNIN_KEEP=1
keeps the temporary directory.
"""
import base64, http.client, http.server, json, os, shutil, signal, socketserver, subprocess, sys, tempfile, threading, time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import Checks, basic, call, demo_config, free_port, hash_secret, kill_all, wait_for, write_json  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
ADMIN_TOKEN = "bs-admin-" + os.urandom(12).hex()
SUFFIX = os.urandom(4).hex()
PASSWORDS = {"ALICE": f"alice-sap-pw-{SUFFIX}", "BOB": f"bob-sap-pw-{SUFFIX}", "CAROL": f"carol-sap-pw-{SUFFIX}",
             "DAVE": f"dave-sap-pw-{SUFFIX}", "ERIN": f"erin-sap-pw-{SUFFIX}"}
ALICE_NEW = f"alice-new-pw-{SUFFIX}"
WRONG = f"wrong-pw-{SUFFIX}"
DEMO_ALICE = "alice-demo-password"              # users.json's alice (config/users.json, the demo configuration)
SAP_BASE = "/sap/opu/odata/sap"                 # the checking destination's URL path
CHECK_PATH = SAP_BASE + "/ZAPP_SRV/"            # what the app's `path` (/ZAPP_SRV/) names under it
APP, DEST, REALM = "sapapp", "zapp", "backend:zapp"
processes, servers = [], []
check = Checks("backend-signin")


# --- The stand-in SAP system ---

def parse_basic(value):
    """(user, password) of an `Authorization: Basic` value, else None."""
    if not value or not value.lower().startswith("basic "):
        return None
    try:
        raw = base64.b64decode(value[6:].strip(), validate=True).decode()
    except Exception:
        return None
    return tuple(raw.split(":", 1)) if ":" in raw else None


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class SapSystem:
    """An SAP system's ICM as far as logon goes: Basic credentials of its users (names in any
    case) get 200, others 401; `/public/…` answers anyone. Every request is recorded."""

    def __init__(self, name, port, users):
        self.name, self.port = name, port
        self.users = dict(users)          # upper-case name -> password
        self.fail = False                 # True: 500 to everything
        self.lock = threading.Lock()
        self.requests = []
        system = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def respond(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                authorizations = self.headers.get_all("Authorization") or []
                credentials = parse_basic(authorizations[0]) if len(authorizations) == 1 else None
                with system.lock:
                    right = credentials is not None and system.users.get(credentials[0].upper()) == credentials[1]
                    if system.fail:
                        status = 500
                    elif self.path.startswith("/public/") or right:
                        status = 200
                    else:
                        status = 401
                    system.requests.append({"method": self.command, "path": self.path, "headers": list(self.headers.items()),
                                            "authorizations": authorizations, "user": credentials[0].upper() if right else None,
                                            "status": status, "time": time.time()})
                body = json.dumps({"system": system.name, "path": self.path, "user": credentials[0].upper() if right else None}
                                  if status == 200 else {"error": {"code": str(status)}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="SAP NetWeaver Application Server [S4H/100]"')
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = respond

        self.server = ThreadingServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return list(self.requests)

    def checks(self, user=None):
        """The sign-in checks received (GETs of the check path), of `user` (any case) if given."""
        return [r for r in self.snapshot() if r["method"] == "GET" and r["path"] == CHECK_PATH
                and (user is None or any((parse_basic(a) or ("",))[0].upper() == user for a in r["authorizations"]))]

    def set_password(self, user, password):
        with self.lock:
            self.users[user] = password


# --- Calls ---

def short(body):
    return body[:300].decode(errors="replace") if isinstance(body, bytes) else str(body)[:300]


work = tempfile.mkdtemp(prefix="midtier-backend-signin-")
started = time.monotonic()
try:
    # --- Stand-ins: the checking system and another system ---
    sport, oport, dead_port, mport, aport = free_port(), free_port(), free_port(), free_port(), free_port()
    sap = SapSystem("S4H", sport, PASSWORDS)
    other = SapSystem("ECC", oport, PASSWORDS)
    servers += [sap, other]
    probe = [call(sport, "GET", CHECK_PATH, [("Authorization", basic("alice", PASSWORDS["ALICE"]))])[0],
             call(sport, "GET", CHECK_PATH, [("Authorization", basic("ALICE", WRONG))])[0],
             call(sport, "GET", CHECK_PATH)[0], call(sport, "GET", "/public/x")[0]]
    check("the stand-in takes alice's SAP password in any case (200), refuses a wrong or no password (401), answers /public/ to anyone",
          probe == [200, 401, 401, 200], f"({probe})")
    with sap.lock:
        sap.requests.clear()

    # --- Configuration ---
    config = demo_config(REPO, work, mport, aport, adminTokenHashes=[hash_secret(BIN, ADMIN_TOKEN)], logLevel="debug",
                         credentialCacheSeconds=300)
    destinations_dir, apps_dir = os.path.join(config, "destinations"), os.path.join(config, "apps")
    sap_url = f"http://127.0.0.1:{sport}{SAP_BASE}"
    destinations = [
        {"Name": DEST, "Type": "HTTP", "URL": sap_url, "Authentication": "UserBasicAuthentication", "timeout": 5000},
        {"Name": "zother", "URL": sap_url + "/ZOTHER_SRV", "Authentication": "UserBasicAuthentication"},
        {"Name": "ecc", "URL": f"http://127.0.0.1:{oport}{SAP_BASE}", "Authentication": "UserBasicAuthentication"},
        {"Name": "open", "URL": f"http://127.0.0.1:{sport}/public", "Authentication": "NoAuthentication"},
        {"Name": "dead", "URL": f"http://127.0.0.1:{dead_port}/sap", "Authentication": "NoAuthentication", "timeout": 3000},
    ]
    for destination in destinations:
        write_json(os.path.join(destinations_dir, destination["Name"] + ".json"), destination)
    write_json(os.path.join(apps_dir, APP + ".json"),
               {"authentication": {"type": "backend", "destination": DEST, "path": "/ZAPP_SRV/"},
                "destinations": [DEST, "zother", "ecc", "open"]})
    write_json(os.path.join(apps_dir, "deadapp.json"), {"authentication": {"type": "backend", "destination": "dead"}, "destinations": ["dead"]})
    demo_file = os.path.join(apps_dir, "demo.json")
    demo = json.load(open(demo_file))
    demo["destinations"] = ["sf", DEST, "open"]
    write_json(demo_file, demo)

    # --- 1. check-config ---
    def check_config(folder):
        result = subprocess.run([BIN, "check-config", "--config", folder], cwd=REPO, capture_output=True, text=True, timeout=60)
        return result.returncode, result.stdout + result.stderr

    status, output = check_config(config)
    check("check-config accepts a backend app, UserBasicAuthentication destinations on 127.0.0.1 and a NoAuthentication one",
          status == 0, f"({status} {output[-800:]})")

    def refused(label, change, file, key):
        """A copy of the configuration changed by `change(folder)`; check-config must name `file` and `key`."""
        variant = os.path.join(work, "config-" + "".join(c if c.isalnum() else "-" for c in label)[:60])
        shutil.copytree(config, variant)
        change(variant)
        status, output = check_config(variant)
        named = [line for line in output.splitlines() if f"{file}: {key}:" in line]
        check(f"check-config refuses {label}, naming {file} and {key}", status == 1 and named, f"({status} {output[-600:]!r})")
        return named

    def edit(folder, name, **values):
        path = os.path.join(folder, name)
        data = json.load(open(path))
        for key, value in values.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key].update(value)
            else:
                data[key] = value
        write_json(path, data)

    refused("a backend app whose destination does not exist",
            lambda f: edit(f, f"apps/{APP}.json", authentication={"destination": "nosuch"}),
            f"apps/{APP}.json", "authentication.destination")

    def remote_checker(folder, url):
        write_json(os.path.join(folder, "destinations", "remote.json"),
                   {"Name": "remote", "URL": url, "Authentication": "UserBasicAuthentication" if url.startswith("https") else "NoAuthentication"})
        edit(folder, f"apps/{APP}.json", authentication={"destination": "remote"})

    named = refused("a backend app whose destination is http://some.remote.host (passwords in clear)",
                    lambda f: remote_checker(f, "http://some.remote.host/sap"), f"apps/{APP}.json", "authentication.destination")
    check("... the message names the destination and says it is not https", any('"remote"' in line and "https" in line for line in named),
          f"({named})")
    refused("a backend app whose destination is http://localhost.example.com (not this host)",
            lambda f: remote_checker(f, "http://localhost.example.com:8000/sap"), f"apps/{APP}.json", "authentication.destination")
    refused("a UserBasicAuthentication destination at http://some.remote.host",
            lambda f: edit(f, f"destinations/{DEST}.json", URL="http://some.remote.host/sap/opu/odata/sap"),
            f"destinations/{DEST}.json", "URL")
    refused("a UserBasicAuthentication destination at http://localhost.example.com (a remote host whose name starts with localhost)",
            lambda f: edit(f, "destinations/zother.json", URL="http://localhost.example.com/sap/opu/odata/sap"),
            "destinations/zother.json", "URL")
    refused("a UserBasicAuthentication destination that sets its own Authorization (URL.headers.Authorization)",
            lambda f: edit(f, "destinations/zother.json", **{"URL.headers.Authorization": "Basic VEVDSDpwdw=="}),
            "destinations/zother.json", "URL.headers.Authorization")

    # --- Midtier ---
    log_path = os.path.join(work, "midtier.log")
    log = open(log_path, "wb")
    midtier = subprocess.Popen([BIN, "serve", "--config", config], cwd=REPO, stdout=log, stderr=log)
    processes.append(midtier)
    ready = wait_for(f"http://127.0.0.1:{mport}/healthz")
    check("midtier starts with the backend app", ready and midtier.poll() is None, open(log_path, "rb").read()[-1500:].decode(errors="replace"))

    AUTH = {"alice": basic("alice", PASSWORDS["ALICE"]), "ALICE": basic("ALICE", PASSWORDS["ALICE"]), "bob": basic("bob", PASSWORDS["BOB"]),
            "demo-alice": basic("alice", DEMO_ALICE)}
    JSON = ("Content-Type", "application/json")
    ADMIN = [("Authorization", "Bearer " + ADMIN_TOKEN), JSON]
    connections = f"/odata/applications/v1/{APP}/Connections"

    def onboard(authorization, device_id, app=APP, source=None):
        status, headers, body = call(mport, "POST", f"/odata/applications/v1/{app}/Connections", [("Authorization", authorization), JSON],
                                     json.dumps({"DeviceType": "iOS", "DeviceId": device_id}).encode(), source=source)
        try:
            entity = json.loads(body)["d"] if status == 201 else {}
        except (ValueError, KeyError):
            entity = {}
        return status, headers, body, entity

    def device(authorization, cid, path, app=APP, source=None, extra=()):
        headers = [("Authorization", authorization), ("X-SMP-APPCID", cid)] + ([("X-SMP-APPID", app)] if app else []) + list(extra)
        status, headers, raw = call(mport, "GET", path, headers, source=source)
        try:
            answer = json.loads(raw) if status == 200 else {}
        except ValueError:
            answer = {}
        return status, headers, raw, answer

    def admin(method, path, body=None):
        status, _, raw = call(aport, method, path, ADMIN, None if body is None else json.dumps(body).encode())
        try:
            return status, json.loads(raw) if raw else {}
        except ValueError:
            return status, {"raw": raw[:300]}

    # --- 2. Onboarding, and ALICE is alice ---
    status, headers, body, entity = onboard(AUTH["alice"], "alice-phone")
    alice_cid = headers.get("x-smp-appcid")
    checks_alice = sap.checks("ALICE")
    check("alice onboards with Basic alice:<her SAP password> on the backend app: 201, UserName ALICE",
          status == 201 and alice_cid and entity.get("UserName") == "ALICE", f"({status} {short(body)})")
    check(f"... after one GET of {CHECK_PATH} (the app's path under the destination's URL) with her credentials",
          len(checks_alice) == 1 and checks_alice[0]["authorizations"] == [AUTH["alice"]] and checks_alice[0]["status"] == 200,
          f"({[(r['path'], r['status']) for r in sap.snapshot()]})")
    status, headers, body, entity = onboard(AUTH["ALICE"], "alice-tablet")
    alice_cid2 = headers.get("x-smp-appcid")
    check("ALICE (other case, same password) onboards: 201, UserName ALICE", status == 201 and alice_cid2 and entity.get("UserName") == "ALICE",
          f"({status} {short(body)})")
    status, _, body = call(mport, "GET", connections, [("Authorization", AUTH["alice"]), ("Accept", "application/json")])
    try:
        listed = json.loads(body)["d"]["results"]
    except (ValueError, KeyError, TypeError):
        listed = []
    check("alice's Connections list holds both registrations (hers and ALICE's), each of UserName ALICE",
          status == 200 and sorted(r.get("ApplicationConnectionId") for r in listed) == sorted([alice_cid, alice_cid2])
          and {r.get("UserName") for r in listed} == {"ALICE"}, f"({status} {short(body)})")
    status, _, body = call(mport, "GET", f"{connections}('{alice_cid}')", [("Authorization", AUTH["ALICE"])])
    check("ALICE reads the registration alice made (the same owner)", status == 200, f"({status} {short(body)})")
    quoted_realm = urllib.parse.quote(REALM, safe="")
    status, record = admin("GET", f"/admin/v1/users/ALICE?realm={quoted_realm}")
    check(f"the admin API shows one user ALICE of realm {REALM} with both registrations",
          status == 200 and record.get("userId") == "ALICE" and record.get("realm") == REALM
          and sorted(r.get("id") for r in record.get("registrations", [])) == sorted([alice_cid, alice_cid2]), f"({status} {record})")
    status_lower, _ = admin("GET", f"/admin/v1/users/alice?realm={quoted_realm}")
    status, listing = admin("GET", f"/admin/v1/registrations?app={APP}")
    owners = {(r.get("userId"), r.get("realm")) for r in listing.get("registrations", [])}
    check("... no user 'alice' in that realm (404), and the app's registrations all belong to (ALICE, backend:zapp)",
          status_lower == 404 and status == 200 and owners == {("ALICE", REALM)}, f"({status_lower}; {status} {owners})")
    status, record = admin("GET", "/admin/v1/users/alice")
    check("users.json's alice is another user: none of ALICE's registrations are hers",
          status == 200 and record.get("realm") == "" and not {r.get("id") for r in record.get("registrations", [])} & {alice_cid, alice_cid2},
          f"({status} {record})")

    # --- 4. Remembered ---
    before = len(sap.checks())
    results = [call(mport, "GET", connections, [("Authorization", AUTH[user])])[0] for user in ("alice", "ALICE") * 3]
    results += [device(AUTH["alice"], alice_cid, f"/open/remembered-{i}")[0] for i in range(3)]
    check("9 more calls of alice and ALICE with the same passwords: all 200, no new check at the back end",
          results == [200] * 9 and len(sap.checks()) == before, f"({results}; {len(sap.checks()) - before} checks)")
    before = len(sap.checks())
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: call(mport, "GET", connections, [("Authorization", AUTH["bob"])])[0], range(8)))
    bob_checks = sap.checks("BOB")
    check("bob's 8 concurrent first calls: all 200, one check at the back end", results == [200] * 8 and len(bob_checks) == 1,
          f"({results}; {len(bob_checks)} checks of BOB)")
    status, headers, body, entity = onboard(AUTH["bob"], "bob-phone")
    bob_cid = headers.get("x-smp-appcid")
    check("bob onboards (201, UserName BOB) without another check", status == 201 and entity.get("UserName") == "BOB"
          and len(sap.checks("BOB")) == 1, f"({status} {short(body)}; {len(sap.checks('BOB'))} checks)")

    # --- 5. UserBasicAuthentication on the checking system ---
    def seen(path):
        return [r for r in sap.snapshot() if r["path"] == path]

    for user, cid in (("alice", alice_cid), ("bob", bob_cid)):
        for name, base in ((DEST, SAP_BASE), ("zother", SAP_BASE + "/ZOTHER_SRV")):
            status, _, body, answer = device(AUTH[user], cid, f"/{name}/ZAPP_SRV/Orders?who={user}")
            records = seen(f"{base}/ZAPP_SRV/Orders?who={user}")
            check(f"{user} through {name} (UserBasicAuthentication, same system): 200 as {user.upper()}, the back end got exactly "
                  f"{user}'s own Authorization", status == 200 and answer.get("user") == user.upper() and len(records) == 1
                  and records[0]["authorizations"] == [AUTH[user]],
                  f"({status} {short(body)}; back end {[(r['status'], len(r['authorizations'])) for r in records]})")
    jobs = [("alice" if i % 2 else "bob", DEST if i % 3 else "zother", i) for i in range(20)]
    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda job: (job, device(AUTH[job[0]], alice_cid if job[0] == "alice" else bob_cid,
                                                         f"/{job[1]}/ZAPP_SRV/Orders?burst={job[2]}&who={job[0]}")), jobs))
    wrong = []
    for (user, name, i), (status, _, _, answer) in results:
        base = SAP_BASE if name == DEST else SAP_BASE + "/ZOTHER_SRV"
        records = seen(f"{base}/ZAPP_SRV/Orders?burst={i}&who={user}")
        if status != 200 or answer.get("user") != user.upper() or [r["authorizations"] for r in records] != [[AUTH[user]]]:
            wrong.append((user, name, i, status, answer.get("user"), [r["user"] for r in records]))
    check("20 concurrent mixed calls of alice and bob: each 200 as the caller, the back end saw each caller's own header and never the other's",
          not wrong, f"({wrong[:4]})")

    # --- 6. Credentials go nowhere else ---
    before_other, before_sap = len(other.snapshot()), len(sap.snapshot())
    status, _, body, _ = device(AUTH["alice"], alice_cid, "/ecc/ZAPP_SRV/Orders?elsewhere=1")
    check("alice through a UserBasicAuthentication destination of another system (port): 403 saying why",
          status == 403 and b"own credentials" in body, f"({status} {short(body)})")
    check("... and the other system (and the checking one) received nothing", len(other.snapshot()) == before_other == 0
          and len(sap.snapshot()) == before_sap, f"({len(other.snapshot())} at the other system, {len(sap.snapshot()) - before_sap} at S4H)")
    status, headers, body, entity = onboard(AUTH["demo-alice"], "demo-phone", app="demo")
    demo_cid = headers.get("x-smp-appcid")
    check("users.json's alice onboards on the basic app demo: 201, UserName alice", status == 201 and entity.get("UserName") == "alice",
          f"({status} {short(body)})")
    before_sap = len(sap.snapshot())
    status, _, body, _ = device(AUTH["demo-alice"], demo_cid, f"/{DEST}/ZAPP_SRV/Orders?basic=1", app="demo")
    check("a users.json user calling a UserBasicAuthentication destination: 403 saying why", status == 403 and b"own credentials" in body,
          f"({status} {short(body)})")
    demo_b64 = AUTH["demo-alice"][6:]
    check("... the back end received nothing, and never her Midtier password",
          len(sap.snapshot()) == before_sap and not any(demo_b64 in json.dumps(r) for r in sap.snapshot() + other.snapshot()),
          f"({len(sap.snapshot()) - before_sap} requests)")
    before_sap = len(sap.snapshot())
    status, _, body, _ = device(AUTH["alice"], alice_cid, f"/{DEST}/ZAPP_SRV/Orders?noappid=1", app=None)
    check("alice naming her registration (X-SMP-APPCID) without X-SMP-APPID: 401, and no back end is asked or called",
          status == 401 and len(sap.snapshot()) == before_sap and len(other.snapshot()) == 0, f"({status} {short(body)}; "
          f"{len(sap.snapshot()) - before_sap} requests at S4H)")
    status, _, body, _ = device(AUTH["alice"], alice_cid, f"/{DEST}/ZAPP_SRV/Orders?wrongapp=1", app="demo")
    check("alice naming another app (X-SMP-APPID demo) than her registration's: refused (401/403), nothing forwarded",
          status in (401, 403) and len(sap.snapshot()) == before_sap, f"({status} {short(body)})")

    # --- 7. NoAuthentication ---
    for user, cid in (("alice", alice_cid), ("bob", bob_cid)):
        status, _, body, answer = device(AUTH[user], cid, f"/open/info?who={user}")
        records = seen(f"/public/info?who={user}")
        check(f"{user} through a NoAuthentication destination: 200, and the back end got no Authorization at all",
              status == 200 and len(records) == 1 and records[0]["authorizations"] == []
              and not any(k.lower() == "authorization" for k, _ in records[0]["headers"]),
              f"({status} {short(body)}; {[r['authorizations'] and 'an Authorization' for r in records]})")
    status, _, body, _ = device(AUTH["demo-alice"], demo_cid, "/open/info?who=demo-alice", app="demo")
    records = seen("/public/info?who=demo-alice")
    check("users.json's alice through the NoAuthentication destination: 200, no Authorization reaches it",
          status == 200 and len(records) == 1 and records[0]["authorizations"] == [], f"({status} {short(body)})")

    # --- 3. Wrong credentials, throttling, the back end unavailable ---
    before = len(sap.checks())
    status, headers, body = call(mport, "GET", connections, [("Authorization", basic("alice", WRONG))])
    check("alice with a wrong password: 401 with a Basic challenge, after one check at the back end (a remembered yes is no yes for "
          "another password)", status == 401 and "basic" in headers.get("www-authenticate", "").lower() and len(sap.checks()) == before + 1,
          f"({status} {headers.get('www-authenticate')} {short(body)}; {len(sap.checks()) - before} checks)")
    status, _, body = call(mport, "GET", connections, [("Authorization", basic("mallory", WRONG))])
    check("an unknown user: 401", status == 401, f"({status} {short(body)})")
    # CAROL's name from its own address (127.0.0.2), so that the address count stays apart.
    results = [call(mport, "GET", connections, [("Authorization", basic("CAROL", f"{WRONG}-{i}"))], source="127.0.0.2")
               for i in range(8)]
    statuses = [s for s, _, _ in results]
    first_429 = next((i for i, s in enumerate(statuses) if s == 429), None)
    check("CAROL's wrong passwords: 401 each, then 429 after several failures", first_429 is not None and 3 <= first_429 <= 7
          and set(statuses[:first_429]) == {401}, f"({statuses})")
    check("... the 429 carries Retry-After", first_429 is not None and results[first_429][1].get("retry-after", "").isdigit(),
          f"({first_429 is not None and results[first_429][1]})")
    before = len(sap.checks("CAROL"))
    status, headers, body = call(mport, "GET", connections, [("Authorization", basic("CAROL", PASSWORDS["CAROL"]))], source="127.0.0.2")
    check("... while closed, even her right password is 429 and the back end is not asked", status == 429 and len(sap.checks("CAROL")) == before,
          f"({status} {short(body)}; {len(sap.checks('CAROL')) - before} checks)")
    status, headers, body = call(mport, "GET", connections, [("Authorization", basic("carol", f"{WRONG}-lower"))], source="127.0.0.4")
    check("... and so is another spelling of the same SAP user (carol, from another address): 429 without asking the back end",
          status == 429 and len(sap.checks("CAROL")) == before, f"({status} {short(body)}; {len(sap.checks('CAROL')) - before} checks)")

    sap.fail = True
    results = [call(mport, "GET", connections, [("Authorization", basic("DAVE", PASSWORDS["DAVE"]))], source="127.0.0.3") for _ in range(8)]
    sap.fail = False
    statuses = [s for s, _, _ in results]
    check("the back end answering 500: 503 with Retry-After, each time (8 calls)",
          statuses == [503] * 8 and all(h.get("retry-after", "").isdigit() for _, h, _ in results), f"({statuses} {short(results[0][2])})")
    check("... each of them asked the back end (a 500 is not remembered)", len(sap.checks("DAVE")) == 8, f"({len(sap.checks('DAVE'))})")
    status, _, body = call(mport, "GET", connections, [("Authorization", basic("DAVE", PASSWORDS["DAVE"]))], source="127.0.0.3")
    check("... and they were not counted as failures: DAVE with the back end up again is 200, not 429", status == 200, f"({status} {short(body)})")
    sap.fail = True
    before = len(sap.snapshot())
    status, _, body = call(mport, "GET", connections, [("Authorization", AUTH["ALICE"])])
    sap.fail = False
    check("with the back end answering 500, a remembered credential still signs in (200) without asking it",
          status == 200 and len(sap.snapshot()) == before, f"({status} {short(body)})")
    status, headers, body = call(mport, "POST", "/odata/applications/v1/deadapp/Connections",
                                 [("Authorization", basic("ALICE", PASSWORDS["ALICE"])), JSON], b"{}")
    check("a backend app whose back end does not listen: 503 with Retry-After", status == 503 and headers.get("retry-after", "").isdigit(),
          f"({status} {headers.get('retry-after')} {short(body)})")

    # --- 4. A changed password ---
    sap.set_password("ALICE", ALICE_NEW)
    AUTH["alice"] = basic("alice", ALICE_NEW)
    before = len(sap.checks("ALICE"))
    status, _, body, answer = device(AUTH["alice"], alice_cid, f"/{DEST}/ZAPP_SRV/Orders?newpw=1")
    check("alice's password changed at the back end: her call with the new one is checked once more and goes through as ALICE",
          status == 200 and answer.get("user") == "ALICE" and len(sap.checks("ALICE")) == before + 1,
          f"({status} {short(body)}; {len(sap.checks('ALICE')) - before} checks)")
    records = seen(f"{SAP_BASE}/ZAPP_SRV/Orders?newpw=1")
    check("... and the back end got her new Authorization", [r["authorizations"] for r in records] == [[AUTH["alice"]]], "")
    results = [device(AUTH["alice"], alice_cid, f"/{DEST}/ZAPP_SRV/Orders?newpw-again={i}")[0] for i in range(3)]
    check("... the new password is remembered in turn (3 calls, no check)", results == [200] * 3 and len(sap.checks("ALICE")) == before + 1,
          f"({results}; {len(sap.checks('ALICE')) - before} checks)")

    # --- 8. Block ---
    status, answer = admin("PUT", f"/admin/v1/users/ALICE/block?realm={quoted_realm}", {"type": "traffic", "reason": "backend sign-in test"})
    check(f"an admin blocks ALICE of realm {REALM}: 200", status == 200, f"({status} {answer})")
    before_sap, before_other = len(sap.snapshot()), len(other.snapshot())
    results = [device(AUTH["alice"], alice_cid, f"/{DEST}/ZAPP_SRV/Orders?blocked=1"),
               device(AUTH["alice"], alice_cid, "/open/info?blocked=1"),
               device(AUTH["ALICE"], alice_cid2, f"/zother/ZAPP_SRV/Orders?blocked=1")]
    check("alice's and ALICE's next calls are refused: 403 TRAFFIC_BLOCKED",
          all(s == 403 and h.get("x-message-code") == "TRAFFIC_BLOCKED" for s, h, _, _ in results),
          f"({[(s, h.get('x-message-code'), short(b)[:120]) for s, h, b, _ in results]})")
    check("... and the back end sees nothing new from her (no check, no forwarded call)",
          len(sap.snapshot()) == before_sap and len(other.snapshot()) == before_other,
          f"({[(r['path'], r['user']) for r in sap.snapshot()[before_sap:]]})")
    status, _, body, answer = device(AUTH["bob"], bob_cid, f"/{DEST}/ZAPP_SRV/Orders?after-block=bob")
    records = seen(f"{SAP_BASE}/ZAPP_SRV/Orders?after-block=bob")
    check("bob still gets through, with his own Authorization", status == 200 and answer.get("user") == "BOB"
          and [r["authorizations"] for r in records] == [[AUTH["bob"]]], f"({status} {short(body)})")
    status, answer = admin("PUT", f"/admin/v1/users/ERIN/block?realm={quoted_realm}", {"type": "all", "reason": "left before signing in"})
    check("a back-end user who never signed in (ERIN) can be blocked before her first sign-in (200, seen false), as an IdP's user can",
          status == 200 and answer.get("seen") is False, f"({status} {answer})")
    if status == 200:
        status, headers, body, _ = onboard(basic("erin", PASSWORDS["ERIN"]), "erin-phone")
        check("... and then her onboarding is refused: 403 TRAFFIC_REG_BLOCKED", status == 403
              and headers.get("x-message-code") == "TRAFFIC_REG_BLOCKED", f"({status} {headers.get('x-message-code')} {short(body)})")
    check("midtier is still running", midtier.poll() is None)

    # --- 9. The log ---
    midtier.send_signal(signal.SIGTERM)
    try:
        midtier.wait(timeout=15)
    except subprocess.TimeoutExpired:
        midtier.kill()
    log.close()
    logged = open(log_path, "rb").read().decode(errors="replace")
    check(f"the log has debug lines ({logged.count(chr(10))} lines)", '"level":"debug"' in logged and "back end answered" in logged, "")
    passwords = list(PASSWORDS.values()) + [ALICE_NEW, WRONG, DEMO_ALICE]
    hits = [p for p in passwords if p in logged]
    check("the log holds none of the passwords (SAP users', wrong ones, users.json's)", not hits, f"({len(hits)} found)")
    sent = {r_auth for system in (sap, other) for r in system.snapshot() for r_auth in r["authorizations"]} | set(AUTH.values())
    sent |= {basic(u, p) for u, p in (("CAROL", PASSWORDS["CAROL"]), ("DAVE", PASSWORDS["DAVE"]), ("erin", PASSWORDS["ERIN"]),
                                      ("alice", WRONG), ("mallory", WRONG), ("ALICE", PASSWORDS["ALICE"]))}
    b64 = sorted({value[6:] for value in sent if value.lower().startswith("basic ")})
    lines = [line[:200] for line in logged.splitlines() if any(v in line for v in b64)]
    check(f"the log holds no base64 Basic value ({len(b64)} sent by devices or to the back ends)", not lines, f"({len(lines)} lines: {lines[:2]})")
    print(f"\n# {len(sap.snapshot())} requests at the checking system ({len(sap.checks())} checks), {len(other.snapshot())} at the other; "
          f"{time.monotonic() - started:.1f} s")
except Exception:
    import traceback
    check("the test ran to the end", False, "\n" + traceback.format_exc())
finally:
    kill_all(processes)
    for system in servers:
        system.server.shutdown()
        system.server.server_close()
    if os.environ.get("BACKEND_SIGNIN_KEEP"):
        print(f"# kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)

check.finish()
