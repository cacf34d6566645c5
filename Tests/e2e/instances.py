#!/usr/bin/env python3
"""Two `midtier` instances sharing one throwaway PostgreSQL (docs/operations.md), with the
real sandbox as SuccessFactors:

1. A registration made through one instance serves through the other; the admin API of each
   answers the same.
2. A CSRF token fetched through one instance is accepted on a write through the other (a
   stand-in SAP Gateway that binds tokens to its session cookie), also right after the back
   end replaced the session; another user's registration never gets that session.
3. Behind nginx configured exactly as docs/operations.md shows (addresses, port and TLS
   certificate swapped for test ones), with `trustedProxies` naming it: onboarding, CSRF fetches
   and writes through its round robin; each device's own address in the audit trail and in the
   back end's `X-Forwarded-For`; 60 wrong sign-ins from one device address throttle that
   address, not another device's correct sign-in.
4. Block, unblock, lock, unlock, wipe, delete and token purge made on one instance are
   enforced by the other; the time each took is measured (the change is made on A, then B is
   called until it answers the new way) and printed. The one-second target is a benchmark
   figure, not asserted here; the check allows ten seconds (missing the feed never converges).
5. `kill -9` of an instance during a stream of admin writes loses no acknowledged write.
6. PostgreSQL stops: /readyz turns 503, writes answer 503 with an OData error body, a known
   registration keeps being served from memory; PostgreSQL starts again: ready and writing
   again without a restart, and a block made afterwards is enforced across instances.
   6b. PostgreSQL is silent (its processes stopped, SIGSTOP: connections open, nothing
   answers): a write answers 503 rather than hanging (before, it waited for ever), /readyz
   503, known registrations served; once it answers again, the write made again is kept.
7. A dump of the database holds no password, admin token, back-end cookie or page session id.
8. A device that called A with its own registration id before onboarding (A remembers the id
   as unknown) onboards with that id on B and is then served by A (the creation reaches A's
   memory through the change feed).
9. Page sessions live in the store: the console signed in on A (its own admin port) works on
   B, cookie and CSRF token alike, and a notice left on A shows on B; the self-service page
   too; while PostgreSQL is down the pages answer 503; the sessions survive A's restart; a
   sign-out on B ends the session on A.

Usage: instances.py PATH-TO-MIDTIER. Prints `instances: N passed, M failed`; exits 1 on failure.
"""
import base64, hashlib, http.client, json, os, re, shutil, ssl, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.parse, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from harness import Checks, basic, demo_config, free_port, header, kill_all, wait_for, labelled, sandbox_command
from postgres import ThrowawayPostgres

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ADMIN_TOKEN = "instances-admin-" + os.urandom(12).hex()
check = Checks("instances")
processes = []
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(port, method, path, headers=None, body=None, timeout=10):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=labelled(headers, body))
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
        return 0, {}, str(error).encode()


def page(port, method, path, cookies=None, form=None, timeout=20):
    """A page call that does not follow redirects: (status, headers as a list, body text)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {}
    if cookies:
        headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in cookies.items())
    body = None
    if form is not None:
        body = "&".join(f"{name}={urllib.parse.quote(value, safe='')}" for name, value in form.items()).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.getheaders(), response.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as error:
        return 0, [], str(error)
    finally:
        connection.close()


def set_cookie(headers, name):
    """The value a `Set-Cookie` of `headers` gives cookie `name`, or None."""
    for key, value in headers:
        if key.lower() == "set-cookie" and value.startswith(name + "="):
            return value.split(";", 1)[0].split("=", 1)[1]
    return None


def location(headers):
    return next((value for key, value in headers if key.lower() == "location"), None)


def csrf_of(body):
    """The first CSRF token (hidden `csrf` field) of a page."""
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', body)
    return found.group(1) if found else None


def page_sign_in(port, path, fields):
    """Signs in on the pages at `path` (`/console/` or `/mobileservices/me/`) of `port`; returns
    the session cookie's value or None."""
    sign_in_path = "/console/sign-in" if path == "/console/" else path
    cookie_name = "midtier_console" if path == "/console/" else "midtier_me"
    status, headers, body = page(port, "GET", sign_in_path)
    token = csrf_of(body)
    if status != 200 or not token:
        return None
    status, headers, _ = page(port, "POST", ("/console/sign-in" if path == "/console/" else path + "sign-in"),
                              {cookie_name + "_sign_in": token}, dict(fields, csrf=token))
    return set_cookie(headers, cookie_name) if status == 303 else None


def metric(port, name):
    """The sum of a Prometheus counter over its labels, from the admin listener."""
    _, _, body = call(port, "GET", "/metrics")
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


CRASH_USERS = 1000  # users.json users the kill -9 check may block


def until(condition, seconds=5.0, step=0.005):
    """Seconds until `condition()` held (polled every `step`), or None past `seconds`."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if condition():
            return time.monotonic() - started
        time.sleep(step)
    return None


class Gateway(BaseHTTPRequestHandler):
    """SAP Gateway's CSRF protection, as far as a client sees it: a session cookie, a token
    fetched with `X-CSRF-Token: Fetch` bound to that session, writes refused with
    `X-CSRF-Token: Required` unless both match."""
    sessions = {}  # session id -> token
    issued = []    # every session id handed out (none may appear in clear in the database)
    forwarded_for = []  # the X-Forwarded-For of every call
    cookies = []        # the Cookie header of every call
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def session(self):
        Gateway.forwarded_for.append(self.headers.get("X-Forwarded-For"))
        Gateway.cookies.append(self.headers.get("Cookie") or "")
        for part in (self.headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == "SAP_SESSIONID" and value in Gateway.sessions:
                return value, False
        value = "gwsession-" + os.urandom(12).hex()
        Gateway.sessions[value] = None
        Gateway.issued.append(value)
        return value, True

    def answer(self, status, session, new, token=None, body=b"{}"):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if new:
            self.send_header("Set-Cookie", f"SAP_SESSIONID={session}; path=/; HttpOnly")
        if token:
            self.send_header("X-CSRF-Token", token)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with Gateway.lock:
            session, new = self.session()
            token = None
            if (self.headers.get("X-CSRF-Token") or "").lower() == "fetch":
                token = Gateway.sessions[session] = Gateway.sessions[session] or "token-" + os.urandom(8).hex()
        self.answer(200, session, new, token)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with Gateway.lock:
            session, new = self.session()
            valid = not new and Gateway.sessions.get(session) is not None and self.headers.get("X-CSRF-Token") == Gateway.sessions[session]
        if valid:
            self.answer(201, session, False, body=b'{"d":{"created":true}}')
        else:
            self.answer(403, session, new, "Required", b'{"error":"CSRF token validation failed"}')


work = tempfile.mkdtemp(prefix="midtier-instances-")
try:
    with ThrowawayPostgres() as pg:
        sport, gport = free_port(), free_port()
        gateway = ThreadingHTTPServer(("127.0.0.1", gport), Gateway)
        threading.Thread(target=gateway.serve_forever, daemon=True).start()
        hash_ = subprocess.run([BIN, "hash-secret", "--cost", "10"], input=ADMIN_TOKEN + "\n", capture_output=True, text=True, check=True).stdout.strip()
        instances = []
        for name in ["a", "b"]:
            mport, aport = free_port(), free_port()
            folder = os.path.join(work, name)
            os.makedirs(folder)
            config = demo_config(REPO, folder, mport, aport, adminTokenHashes=[hash_], trustedProxies=["127.0.0.1"],
                                 store={"url": f"postgres://{pg.user}@127.0.0.1:{pg.port}/{pg.database}?sslmode=disable"})
            sf_path = os.path.join(config, "destinations", "sf.json")
            sf = json.load(open(sf_path))
            sf.update({"URL": f"http://127.0.0.1:{sport}", "tokenServiceURL": f"http://127.0.0.1:{sport}/oauth/token"})
            json.dump(sf, open(sf_path, "w"))
            json.dump({"Name": "gw", "URL": f"http://127.0.0.1:{gport}/sap/opu/odata/sap/API", "Authentication": "NoAuthentication"},
                      open(os.path.join(config, "destinations", "gw.json"), "w"))
            demo = json.load(open(os.path.join(config, "apps", "demo.json")))
            demo["destinations"] = ["sf", "gw"]
            json.dump(demo, open(os.path.join(config, "apps", "demo.json"), "w"))
            # The kill -9 check blocks crash0, crash1, …: only users.json users can be blocked (docs/admin.md).
            users = json.load(open(os.path.join(config, "users.json")))
            users["users"] += [{"id": f"crash{n}", "passwordHash": hash_} for n in range(CRASH_USERS)]
            json.dump(users, open(os.path.join(config, "users.json"), "w"))
            instances.append({"name": name, "port": mport, "admin": aport, "config": config, "log": os.path.join(folder, "midtier.log")})

        def start(instance):
            log = open(instance["log"], "ab")
            instance["process"] = subprocess.Popen([BIN, "serve", "--config", instance["config"]], cwd=REPO, stdout=log, stderr=log)
            processes.append(instance["process"])
            return wait_for(f"http://127.0.0.1:{instance['port']}/healthz", 30)

        processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(sport)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # Both at once: the schema is created once, the other waits for it.
        starters = [threading.Thread(target=start, args=(instance,)) for instance in instances]
        for thread in starters: thread.start()
        for thread in starters: thread.join()
        A, B = instances
        for instance in instances:
            status, _, body = call(instance["admin"], "GET", "/readyz")
            check(f"instance {instance['name']} starts on PostgreSQL and is ready", status == 200,
                  f"({status} {body[:200]!r} {open(instance['log'], 'rb').read()[-1500:]!r})")
        versions = pg.sql("SELECT string_agg(version::text, ',' ORDER BY version) FROM midtier_schema", database=pg.database).strip()
        applied = sum(open(instance["log"]).read().count("store schema migrated") for instance in instances)
        check("every schema migration was applied once, by one of the two", versions.startswith("1,") and applied == versions.count(",") + 1,
              f"(versions {versions}, {applied} applied)")

        ADMIN = {"Authorization": "Bearer " + ADMIN_TOKEN, "Content-Type": "application/json"}
        ALICE = basic("alice", "alice-demo-password")
        payroll = "/sf/odata/v2/EmployeePayrollRunResults?$format=json&$top=1"

        # --- 1. A registration made through A serves through B. ---
        status, headers, body = call(A["port"], "POST", "/odata/applications/v1/demo/Connections", {"Authorization": ALICE}, b"{}")
        cid = header(headers, "X-SMP-APPCID")
        check("alice registers through A", status == 201 and cid, f"({status} {body[:200]!r})")
        device = {"Authorization": ALICE, "X-SMP-APPCID": cid}
        status, _, body = call(B["port"], "GET", payroll, device)
        check("the registration serves through B", status == 200 and b'"100001"' in body, f"({status} {body[:200]!r})")
        status, _, body = call(A["port"], "GET", payroll, device)
        check("... and through A", status == 200, f"({status})")
        answers = [call(instance["admin"], "GET", f"/admin/v1/registrations/{cid}", ADMIN) for instance in instances]
        same = [json.loads(body) for status, _, body in answers if status == 200]
        check("the admin API of both instances answers the same", len(same) == 2 and same[0] == same[1], f"({answers})")

        # --- 8. A device's own id, unknown to A, onboarded on B, served by A. ---
        own = "own-" + os.urandom(16).hex()
        early = {"Authorization": ALICE, "X-SMP-APPCID": own}
        before = [call(A["port"], "GET", payroll, early)[0] for _ in range(3)]
        check("a call with a registration id nobody has is refused by A (and A remembers the id as unknown)",
              before and all(status in (401, 403) for status in before), f"({before})")
        status, headers, body = call(B["port"], "POST", "/odata/applications/v1/demo/Connections", early, b"{}")
        check("the device onboards on B with that id", status == 201 and header(headers, "X-SMP-APPCID") == own,
              f"({status} {header(headers, 'X-SMP-APPCID')} {body[:200]!r})")
        took = until(lambda: call(A["port"], "GET", payroll, early)[0] == 200, seconds=10, step=0.02)
        check("... and A serves it (the creation made A forget the miss)", took is not None, f"(took {took})")
        print(f"unknown id created on B, served by A after {took if took is None else round(took, 3)} s")

        # --- 2. CSRF fetch on one instance, the write on the other. ---
        items = "/gw/Items"
        status, _, _ = call(B["port"], "GET", items, device)
        check("B starts a back-end session (the gateway sets its cookie)", status == 200 and len(Gateway.issued) == 1, f"({status} {Gateway.issued})")
        status, headers, _ = call(A["port"], "GET", items, dict(device, **{"X-CSRF-Token": "Fetch"}))
        token = header(headers, "X-CSRF-Token")
        check("A fetches a CSRF token in that same session", status == 200 and token and len(Gateway.issued) == 1,
              f"({status} {token} {len(Gateway.issued)} sessions)")
        check("the session cookie does not reach the device", header(headers, "Set-Cookie") is None)
        status, headers, body = call(B["port"], "POST", items, dict(device, **{"X-CSRF-Token": token, "Content-Type": "application/json"}), b"{}")
        check("the write through B with the token fetched through A is accepted", status == 201, f"({status} {body[:200]!r})")
        # The gateway forgets its sessions (a restart); a fetch through A starts a new one, and the
        # write through B at once continues it although B still holds the old one in memory.
        with Gateway.lock:
            Gateway.sessions.clear()
        status, headers, _ = call(A["port"], "GET", items, dict(device, **{"X-CSRF-Token": "Fetch"}))
        token = header(headers, "X-CSRF-Token")
        status, _, body = call(B["port"], "POST", items, dict(device, **{"X-CSRF-Token": token, "Content-Type": "application/json"}), b"{}")
        check("right after the back end replaced the session on A, a write through B continues the new one",
              status == 201 and len(Gateway.issued) == 2, f"({status} {body[:200]!r} {len(Gateway.issued)} sessions)")
        # Again and again: a session the back end starts on B, continued on A at once (A's read
        # of the store and B's notice of the change race; either way A must send B's session).
        fresh = []
        for _ in range(20):
            with Gateway.lock:
                Gateway.sessions.clear()
            issued = len(Gateway.issued)
            call(B["port"], "GET", items, device)
            call(A["port"], "POST", items, dict(device, **{"Content-Type": "application/json"}), b"{}")
            fresh.append(len(Gateway.issued) - issued)
        check("20 times: a session started on B is continued by A's very next call (one session each)", fresh == [1] * 20, f"({fresh})")
        stored = pg.sql("SELECT count(*) FROM midtier_backend_session", database=pg.database).strip()
        check("the session is kept (sealed) in the store", stored == "1", f"({stored})")
        BOB = basic("bob", "bob-demo-password")
        status, headers, body = call(A["port"], "POST", "/odata/applications/v1/demo/Connections", {"Authorization": BOB}, b"{}")
        bob = {"Authorization": BOB, "X-SMP-APPCID": header(headers, "X-SMP-APPCID")}
        alice_sessions = set(Gateway.issued)
        Gateway.cookies.clear()
        status, _, _ = call(B["port"], "POST", items, dict(bob, **{"X-CSRF-Token": token, "Content-Type": "application/json"}), b"{}")
        check("bob's registration does not continue alice's session (the gateway gets none of her cookies; his write is refused)",
              status == 403 and Gateway.cookies and not [c for c in Gateway.cookies if any(s in c for s in alice_sessions)],
              f"({status} {Gateway.cookies})")

        # --- 3. Behind nginx, as docs/operations.md configures it. ---
        doc = open(os.path.join(REPO, "docs", "operations.md")).read()
        block = doc.split("```nginx\n", 1)[1].split("```", 1)[0]
        nginx_dir = os.path.join(work, "nginx")
        os.makedirs(nginx_dir)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                        "-keyout", os.path.join(nginx_dir, "tls.key"), "-out", os.path.join(nginx_dir, "tls.crt")], check=True, capture_output=True)
        nport = free_port()
        swaps = [("10.0.0.11:8080", f"127.0.0.1:{A['port']}"), ("10.0.0.12:8080", f"127.0.0.1:{B['port']}"),
                 ("listen 443 ssl;", f"listen 127.0.0.1:{nport} ssl;"),
                 ("/etc/nginx/tls/mobile.example.com.crt", os.path.join(nginx_dir, "tls.crt")),
                 ("/etc/nginx/tls/mobile.example.com.key", os.path.join(nginx_dir, "tls.key"))]
        check("the nginx block of docs/operations.md has the addresses and paths the test swaps", all(block.count(old) == 1 for old, _ in swaps))
        for old, new in swaps:
            block = block.replace(old, new)
        temp = " ".join(f"{kind}_temp_path {nginx_dir}/{kind};" for kind in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"])
        with open(os.path.join(nginx_dir, "nginx.conf"), "w") as conf:
            conf.write(f"worker_processes 1;\npid {nginx_dir}/nginx.pid;\nerror_log {nginx_dir}/error.log;\nevents {{}}\n"
                       f"http {{\naccess_log off;\n{temp}\n{block}\n}}\n")
        processes.append(subprocess.Popen(["nginx", "-c", os.path.join(nginx_dir, "nginx.conf"), "-g", "daemon off;"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        unverified = ssl.create_default_context()
        unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE

        def via_nginx(method, path, headers, body=None, source="127.0.0.1"):
            """A call through nginx over TLS from the loopback address `source` (a device's own address)."""
            connection = http.client.HTTPSConnection("127.0.0.1", nport, context=unverified, timeout=10, source_address=(source, 0))
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                return response.status, dict(response.getheaders()), response.read()
            except (OSError, http.client.HTTPException) as error:
                return 0, {}, str(error).encode()
            finally:
                connection.close()

        check("nginx starts", until(lambda: via_nginx("GET", "/healthz", {})[0] == 200, seconds=10) is not None,
              f"({open(os.path.join(nginx_dir, 'error.log')).read()[-500:] if os.path.exists(os.path.join(nginx_dir, 'error.log')) else ''})")
        status, headers, _ = via_nginx("POST", "/odata/applications/v1/demo/Connections", {"Authorization": ALICE}, b"{}", source="127.0.0.7")
        phone = {"Authorization": ALICE, "X-SMP-APPCID": header(headers, "X-SMP-APPCID") or ""}
        check("alice onboards through nginx", status == 201, f"({status})")
        served = lambda: [metric(instance["admin"], "midtier_requests_total") for instance in instances]
        before = served()
        Gateway.forwarded_for.clear()
        writes = []
        for _ in range(4):
            status, headers, _ = via_nginx("GET", items, dict(phone, **{"X-CSRF-Token": "Fetch"}), source="127.0.0.7")
            token = header(headers, "X-CSRF-Token")
            status, _, body = via_nginx("POST", items, dict(phone, **{"X-CSRF-Token": token or "", "Content-Type": "application/json"}), b"{}",
                                        source="127.0.0.7")
            writes.append(status)
        after = served()
        check("through nginx's round robin, every CSRF fetch-then-write is accepted", writes == [201] * 4, f"({writes})")
        check("... and both instances served some of those calls", all(a > b for a, b in zip(after, before)), f"({before} -> {after})")
        check("the back end's X-Forwarded-For names the device's address, not nginx's",
              Gateway.forwarded_for and set(Gateway.forwarded_for) == {"127.0.0.7"}, f"({set(Gateway.forwarded_for)})")
        status, _, body = call(A["admin"], "GET", "/admin/v1/audit?limit=10000", ADMIN)
        created = [e for e in json.loads(body).get("entries", []) if e["action"] == "registration.create" and e["target"] == phone["X-SMP-APPCID"]]
        check("the audit trail records the device's address as the source", [e["source"] for e in created] == ["127.0.0.7"], f"({created})")
        throttled = []
        for n in range(60):
            status, _, _ = via_nginx("POST", "/odata/applications/v1/demo/Connections", {"Authorization": basic(f"guess{n}", "wrong")}, b"{}",
                                     source="127.0.0.8")
            throttled.append(status)
        check("60 wrong sign-ins from one device address through nginx: that address is throttled (429)",
              throttled[-1] == 429 and set(throttled) <= {401, 429}, f"({throttled})")
        status, _, _ = via_nginx("POST", "/odata/applications/v1/demo/Connections",
                                 {"Authorization": basic("carol", "carol-demo-password"), "X-Forwarded-For": "127.0.0.8"}, b"{}", source="127.0.0.10")
        check("... while another device signs in through the same nginx, although it claims the throttled address in its own "
              "X-Forwarded-For (carol, never signed in before, at .10 claiming .8)", status == 201, f"({status})")
        direct = http.client.HTTPConnection("127.0.0.1", A["port"], timeout=10, source_address=("127.0.0.11", 0))
        direct.request("GET", items, headers=dict(phone, **{"X-Forwarded-For": "203.0.113.9"}))
        direct.getresponse().read()
        direct.close()
        check("a call that does not come from a trusted proxy keeps its own address, whatever X-Forwarded-For it sends",
              Gateway.forwarded_for[-1] == "127.0.0.11", f"({Gateway.forwarded_for[-1]})")

        # --- 4. Changes made on A are enforced by B, within a second. ---
        figures = []

        def enforced(what, change, expect_on_b):
            """Makes `change` on A; returns the seconds until B's answer satisfied `expect_on_b`."""
            status = change()
            took = until(lambda: expect_on_b(call(B["port"], "GET", payroll, device)), seconds=10)
            figures.append((what, took))
            check(f"{what} on A (admin {status}) is enforced by B", status in (200, 204) and took is not None, f"(took {took})")

        refused = lambda code: (lambda answer: answer[0] == 403 and header(answer[1], "x-message-code") == code)
        served = lambda answer: answer[0] == 200
        enforced("block", lambda: call(A["admin"], "PUT", "/admin/v1/users/alice/block", ADMIN, b'{"type":"traffic"}')[0], refused("TRAFFIC_BLOCKED"))
        enforced("unblock", lambda: call(A["admin"], "DELETE", "/admin/v1/users/alice/block", ADMIN)[0], served)
        enforced("lock", lambda: call(A["admin"], "POST", f"/admin/v1/registrations/{cid}/lock", ADMIN)[0], refused("TRAFFIC_REG_LOCKED"))
        enforced("unlock", lambda: call(A["admin"], "POST", f"/admin/v1/registrations/{cid}/unlock", ADMIN)[0], served)
        # A purge on A drops B's cached token: B's next call makes a new exchange.
        exchanges = metric(B["admin"], "midtier_token_exchanges_total")
        status = call(A["admin"], "DELETE", "/admin/v1/tokens/alice", ADMIN)[0]
        took = until(lambda: call(B["port"], "GET", payroll, device)[0] == 200 and metric(B["admin"], "midtier_token_exchanges_total") > exchanges,
                     seconds=10, step=0.02)
        figures.append(("token purge", took))
        check("a token purge on A makes B exchange a new token", status == 200 and took is not None, f"({status} took {took})")
        # Lock and wipe made through self-service on A.
        status, headers, body = call(A["port"], "POST", "/odata/applications/v1/demo/Connections", {"Authorization": ALICE}, b"{}")
        second = header(headers, "X-SMP-APPCID")
        second_device = {"Authorization": ALICE, "X-SMP-APPCID": second}
        call(B["port"], "GET", payroll, second_device)
        status = call(A["port"], "POST", f"/mobileservices/me/registrations/{second}/wipe", {"Authorization": ALICE})[0]
        took = until(lambda: refused("TRAFFIC_REG_WIPED")(call(B["port"], "GET", payroll, second_device)), seconds=10)
        figures.append(("self-service wipe", took))
        check("a self-service wipe on A is enforced by B", status == 200 and took is not None, f"({status} took {took})")
        status = call(A["admin"], "DELETE", f"/admin/v1/registrations/{cid}", ADMIN)[0]
        took = until(lambda: call(B["port"], "GET", payroll, device)[0] in (401, 403), seconds=10)
        figures.append(("delete", took))
        check("a delete on A is enforced by B", status == 204 and took is not None, f"({status} took {took})")
        print("enforcement across instances (seconds): " + ", ".join(f"{what} {took:.3f}" if took is not None else f"{what} never"
                                                                   for what, took in figures))

        # --- 9. Page sessions, opened on A, used on B. ---
        console = page_sign_in(A["admin"], "/console/", {"token": ADMIN_TOKEN})
        check("an admin signs in to the console on A (its own admin port)", console is not None)
        console = {"midtier_console": console or ""}
        status, _, on_a = page(A["admin"], "GET", "/console/", console)
        status_b, headers_b, on_b = page(B["admin"], "GET", "/console/", console)
        check("the console session opened on A works on B", status == 200 and status_b == 200 and 'id="sign-out"' in on_b,
              f"({status} {status_b} {location(headers_b)})")
        csrf = csrf_of(on_a)
        check("... with the same CSRF token", csrf and csrf_of(on_b) == csrf, f"({csrf} {csrf_of(on_b)})")
        status, headers, _ = page(B["admin"], "POST", "/console/users/block", console,
                                  {"id": "carol", "realm": "", "type": "registration", "reason": "across instances", "csrf": csrf or ""})
        _, _, body = call(B["admin"], "GET", "/admin/v1/users/carol", ADMIN)  # A learns of it within a second (section 4)
        check("a block posted on B with the token of A's page is made", status == 303 and b'"registration"' in body,
              f"({status} {location(headers)} {body[:200]!r})")
        status, headers, _ = page(A["admin"], "POST", "/console/users/unblock", console, {"id": "carol", "realm": "", "csrf": csrf or ""})
        status_b, _, body = page(B["admin"], "GET", "/console/users?id=carol", console)
        check("an unblock posted on A: its notice shows on B's next page", status == 303 and status_b == 200 and "no longer blocked" in body,
              f"({status} {status_b} {re.findall(r'<p class=.notice.*?</p>', body)})")
        status, headers, _ = page(B["admin"], "POST", "/console/users/block", console,
                                  {"id": "carol", "realm": "", "type": "all", "csrf": "0" * 64})
        check("... and a forged token is still refused on B (403)", status == 403, f"({status})")
        me = page_sign_in(A["port"], "/mobileservices/me/", {"user": "alice", "password": "alice-demo-password"})
        check("alice signs in to the self-service page on A", me is not None)
        me = {"midtier_me": me or ""}
        status, _, body = page(B["port"], "GET", "/mobileservices/me/", me)
        check("the self-service session opened on A works on B", status == 200 and 'id="who"' in body, f"({status})")
        try:
            keys = pg.sql("SELECT key FROM midtier_page_session", database=pg.database).split()
        except subprocess.CalledProcessError as error:
            keys = [error.stderr.strip()]
        digests = [hashlib.sha256(value.encode()).hexdigest() for value in [console["midtier_console"], me["midtier_me"]]]
        check("the store holds each page session by the SHA-256 of its cookie, never the cookie itself",
              all(digest in keys for digest in digests) and not set(keys) & {console["midtier_console"], me["midtier_me"]}, f"({keys})")

        # --- 5. kill -9 during a stream of admin writes loses nothing acknowledged. ---
        acknowledged, stop = [], threading.Event()

        def writer():
            n = 0
            while not stop.is_set() and n < CRASH_USERS:
                status = call(A["admin"], "PUT", f"/admin/v1/users/crash{n}/block", ADMIN, b'{"type":"all","reason":"crash test"}', timeout=5)[0]
                if status == 200:
                    acknowledged.append(f"crash{n}")
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        until(lambda: len(acknowledged) >= 30, seconds=20)
        A["process"].kill()
        A["process"].wait()
        stop.set()
        thread.join()
        lost = [user for user in acknowledged if call(B["admin"], "GET", f"/admin/v1/users/{user}", ADMIN)[0] != 200
                or json.loads(call(B["admin"], "GET", f"/admin/v1/users/{user}", ADMIN)[2]).get("block") is None]
        check(f"kill -9 of A after {len(acknowledged)} acknowledged blocks: B has every one", len(acknowledged) >= 30 and not lost, f"(lost {lost})")
        check("A starts again on the same store", start(A))

        # --- 6. The store goes away and comes back. ---
        status, headers, body = call(B["port"], "POST", "/odata/applications/v1/demo/Connections", {"Authorization": ALICE}, b"{}")
        live = {"Authorization": ALICE, "X-SMP-APPCID": header(headers, "X-SMP-APPCID")}
        check("a registration for the outage", status == 201 and call(B["port"], "GET", payroll, live)[0] == 200)
        pg.stop()
        took = until(lambda: call(B["admin"], "GET", "/readyz")[0] == 503, seconds=15, step=0.1)
        check("PostgreSQL stopped: /readyz turns 503", took is not None, f"(took {took})")
        print(f"store down: /readyz 503 after {took if took is None else round(took, 2)} s")
        status, _, body = call(B["admin"], "PUT", "/admin/v1/users/bob/block", ADMIN, b'{"type":"all"}', timeout=20)
        odata = json.loads(body).get("error", {}).get("code") if body.startswith(b"{") else None
        check("a write answers 503 with an OData error body", status == 503 and odata, f"({status} {body[:200]!r})")
        status, _, body = call(B["port"], "GET", payroll, live, timeout=20)
        check("a known registration keeps being served from memory", status == 200, f"({status} {body[:200]!r})")
        status, headers, body = page(B["admin"], "GET", "/console/", console)
        check("a console page answers a 503 page (the store keeps the sessions)",
              status == 503 and "text/html" in dict((k.lower(), v) for k, v in headers).get("content-type", ""), f"({status} {body[:200]!r})")
        status, _, body = page(B["port"], "GET", "/mobileservices/me/", me)
        check("... and so does the self-service page", status == 503 and "<html" in body.lower(), f"({status} {body[:200]!r})")
        pg.start()
        took = until(lambda: call(B["admin"], "GET", "/readyz")[0] == 200 and call(A["admin"], "GET", "/readyz")[0] == 200, seconds=30, step=0.1)
        check("PostgreSQL back: both instances ready again without a restart", took is not None, f"(took {took})")
        status, _, body = call(B["admin"], "PUT", "/admin/v1/users/alice/block", ADMIN, b'{"type":"traffic"}', timeout=20)
        check("writes work again", status == 200, f"({status} {body[:200]!r})")
        took = until(lambda: refused("TRAFFIC_BLOCKED")(call(A["port"], "GET", payroll, live)), seconds=10)
        check("a block made on B after the outage is enforced by A (the change feed reconnected)", took is not None, f"(took {took})")

        # --- 6b. PostgreSQL silent: its processes stopped, connections open, nothing answers. ---
        status, headers, body = call(B["port"], "POST", "/odata/applications/v1/demo/Connections", {"Authorization": BOB}, b"{}")
        bobs = {"Authorization": BOB, "X-SMP-APPCID": header(headers, "X-SMP-APPCID")}
        check("a registration for the silence", status == 201 and call(B["port"], "GET", payroll, bobs)[0] == 200)
        pg.pause()
        try:
            started = time.monotonic()
            status, _, body = call(B["admin"], "PUT", "/admin/v1/users/crash999/block", ADMIN, b'{"type":"all"}', timeout=120)
            silent_write = time.monotonic() - started
            odata = json.loads(body).get("error", {}).get("code") if body.startswith(b"{") else None
            check("PostgreSQL silent: a write answers 503 with an OData error body (it does not hang)", status == 503 and odata,
                  f"({status} {body[:200]!r})")
            started = time.monotonic()
            status, _, _ = call(B["admin"], "GET", "/readyz", timeout=120)
            silent_ready = time.monotonic() - started
            check("... /readyz answers 503", status == 503, f"({status})")
            status, _, body = call(B["port"], "GET", payroll, bobs, timeout=60)
            check("... a known registration keeps being served from memory", status == 200, f"({status} {body[:200]!r})")
            print(f"store silent: the write answered after {silent_write:.1f} s, /readyz after {silent_ready:.1f} s")
        finally:
            pg.resume()
        took = until(lambda: call(B["admin"], "GET", "/readyz")[0] == 200 and call(A["admin"], "GET", "/readyz")[0] == 200, seconds=60, step=0.1)
        check("PostgreSQL answering again: both instances ready", took is not None, f"(took {took})")
        status, _, body = call(B["admin"], "PUT", "/admin/v1/users/crash999/block", ADMIN, b'{"type":"all"}', timeout=20)
        check("... and the write made again is acknowledged", status == 200, f"({status} {body[:200]!r})")
        took = until(lambda: json.loads(call(A["admin"], "GET", "/admin/v1/users/crash999", ADMIN)[2] or b"{}").get("block") is not None,
                     seconds=10)
        check("... and A has it", took is not None, f"(took {took})")

        # --- 9, continued: sessions survived A's restart (section 5); a sign-out on B ends them on A. ---
        status, _, body = page(A["admin"], "GET", "/console/", console)
        check("the console session survived A's restart", status == 200 and 'id="sign-out"' in body, f"({status})")
        status, _, body = page(A["port"], "GET", "/mobileservices/me/", me)
        check("the self-service session survived A's restart", status == 200 and 'id="who"' in body, f"({status})")
        status, _, body = page(B["admin"], "GET", "/console/", console)
        status, headers, _ = page(B["admin"], "POST", "/console/sign-out", console, {"csrf": csrf_of(body) or ""})
        check("sign-out of the console on B", status == 303 and set_cookie(headers, "midtier_console") == "", f"({status})")
        status, headers, _ = page(A["admin"], "GET", "/console/", console)
        check("... and the cookie no longer works on A", status == 303 and location(headers) == "/console/sign-in",
              f"({status} {location(headers)})")
        status, _, body = page(B["port"], "GET", "/mobileservices/me/", me)
        status, headers, _ = page(B["port"], "POST", "/mobileservices/me/sign-out", me, {"csrf": csrf_of(body) or ""})
        status_a, _, body = page(A["port"], "GET", "/mobileservices/me/", me)
        check("sign-out of the self-service page on B ends it on A", status == 303 and status_a == 200 and 'id="who"' not in body,
              f"({status} {status_a})")

        # --- 7. Nothing secret in the database. ---
        dump = subprocess.run(["runuser", "-u", "postgres", "--", "pg_dump", "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", pg.database]
                              if os.geteuid() == 0 else ["pg_dump", "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", pg.database],
                              capture_output=True, text=True)
        secrets = ["alice-demo-password", ADMIN_TOKEN, "Bearer ", "Basic ", "SAP_SESSIONID"] + Gateway.issued
        secrets += [console["midtier_console"], me["midtier_me"]]
        check("a dump of the database holds no password, token, credential or back-end cookie",
              dump.returncode == 0 and "midtier_registration" in dump.stdout and not [s for s in secrets if s in dump.stdout],
              f"({dump.returncode} {[s for s in secrets if s in dump.stdout]} {dump.stderr[-300:]})")
        for instance in instances:
            check(f"instance {instance['name']} is still running", instance["process"].poll() is None,
                  open(instance["log"], "rb").read()[-1000:].decode(errors="replace"))
        kill_all(processes)
        processes.clear()
finally:
    kill_all(processes)
    if os.environ.get("INSTANCES_KEEP"):
        print(f"# kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)

check.finish()
