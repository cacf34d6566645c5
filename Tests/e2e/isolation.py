#!/usr/bin/env python3
"""Isolation under load and the secrets scan (issue 6, parts 3 and 4), against the real
`midtier` binary, the real sandbox and a stand-in back end and token service of this script.

1. Isolation: 50 users (distinct `sfUserId`s, five of them with two devices) send 10 000
   interleaved requests in random order from 32 concurrent connections, each with its own
   Basic credentials and registration, to three destinations:
   - `sf`, the sandbox (`--extra-employees 50`, `--page-size 1`): it answers a bearer token
     with that token's own user's payroll runs only, so every row's `userId` must be the
     caller's; a per-request nonce in `$filter` comes back in `__next`;
   - `echo` (OAuth2SAMLBearerAssertion against this script's token service): the back end
     answers the user its token was issued for, and the request's nonce;
   - `tech` (BasicAuthentication, a technical user): the back end answers the nonce.
   A wrong user, a wrong nonce, no rows, or anything but 200 counts. During the load every
   back-end token is revoked once (renewals under load) and one user is blocked.
2. Back-end cookies: the stand-in back end sets `SESSION` and `ROUTE` when a request comes
   without them and records, per request, what it issued and what it was sent. Every
   registration must present only the values issued to it, per destination; the device never
   gets a `Set-Cookie` from a proxied call.
3. Secrets: Midtier runs with `"logLevel": "debug"`. Error paths are provoked (wrong password,
   unknown and foreign registrations, blocked user, back-end 401 and 500, token service 500,
   one echoing the assertion, and garbage). Every log line (Midtier's and the sandbox's) and
   every response header and body the test client received is scanned for every password,
   `Basic` credential, admin token, access token, assertion (and its SignatureValue) and
   cookie value used: 0 hits. The scanner is shown to find planted secrets.

With `--instances 2`, all of it runs against two instances sharing a throwaway PostgreSQL
(Tests/e2e/postgres.py) behind one publicURL: every request goes to either at random, so a
registration's calls, tokens and back-end sessions are served by both; the block is made on
the first and must hold on both within a second of its acknowledgement.

Usage: isolation.py PATH-TO-MIDTIER [--instances 2]. Prints `isolation: N passed, M failed`
(`isolation-2: …` with two instances); exits 1 on failure.
Standard library only; every HTTP call has a timeout and every process is killed at the end.
"""
import base64, hashlib, http.client, http.server, json, os, random, re, shutil, signal, socket, socketserver
import subprocess, sys, tempfile, threading, time, urllib.parse
from concurrent.futures import ThreadPoolExecutor
from harness import Checks, basic, demo_config, free_port, kill_all, wait_for, sandbox_command
from postgres import ThrowawayPostgres

BIN = os.path.abspath(sys.argv[1])
INSTANCES = int(sys.argv[sys.argv.index("--instances") + 1]) if "--instances" in sys.argv else 1
assert INSTANCES in (1, 2), "--instances is 1 or 2"
# With two instances, the other one enforces a block a moment later (within a second by
# design, docs/operations.md; measured by `make bench-instances`). Calls that start within this
# after the acknowledgement may get either answer (never another user's data); the allowance is
# wide because a loaded machine delays the change feed, and timing is for benchmarks.
BLOCK_GRACE = 0.0 if INSTANCES == 1 else 5.0
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
USERS, TWO_DEVICES, REQUESTS, WORKERS = 50, 5, 10_000, 32
ADMIN_TOKEN = "iso-admin-" + os.urandom(16).hex()
TECH_PASSWORD = "iso-tech-" + os.urandom(16).hex()
CLIENT_KEY, COMPANY = "iso-client-key", "ISOCOMPANY"
processes = []
started = time.monotonic()


check = Checks("isolation" if INSTANCES == 1 else f"isolation-{INSTANCES}")


# --- The stand-in back end and token service ------------------------------------------------

class State:
    lock = threading.Lock()
    tokens = {}             # access token -> NameID it was issued for
    revoked = set()
    exchanges = {}          # NameID -> count (successful exchanges)
    new_token_requests = 0
    assertions = []         # (form value as sent, decoded XML)
    issued = {}             # (destination, cookie name, value) -> nonce of the request it answered
    presented = []          # (destination, nonce, {cookie name: value}) per request that reached the back end
    backend_401 = 0


def signature_value(xml):
    match = re.search(r"<(?:\w+:)?SignatureValue[^>]*>([^<]+)<", xml)
    return re.sub(r"\s", "", match.group(1)) if match else None


class Backend(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[0] for k, v in urllib.parse.parse_qs(self.rfile.read(length).decode()).items()}
        if self.path != "/oauth/token":
            return self.answer(404, {"error": "not found"})
        encoded = form.get("assertion", "")
        try:
            xml = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_" if "-" in encoded or "_" in encoded else None).decode()
        except Exception:
            xml = ""
        with State.lock:
            State.assertions.append((encoded, xml))
        name = re.search(r"<(?:\w+:)?NameID[^>]*>([^<]*)<", xml)
        name = name.group(1) if name else None
        if form.get("client_id") != CLIENT_KEY or form.get("company_id") != COMPANY or not name:
            return self.answer(401, {"errorMessage": "Invalid client_id, company_id or assertion"})
        if name == "tokenservice-500":
            return self.answer(500, {"errorMessage": "the token service is down"})
        if name == "tokenservice-echo":
            return self.answer(500, {"errorMessage": "cannot process assertion " + encoded})
        if name == "tokenservice-garbage":
            data = b"<html>login</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return self.wfile.write(data)
        token = os.urandom(20).hex()
        with State.lock:
            State.tokens[token] = name
            State.exchanges[name] = State.exchanges.get(name, 0) + 1
            State.new_token_requests += form.get("new_token") == "true"
        self.answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600})

    def do_GET(self):
        path, _, query = self.path.partition("?")
        nonce = urllib.parse.parse_qs(query).get("n", [""])[0]
        destination = path.split("/")[1]
        authorization = self.headers.get("Authorization", "")
        if path.endswith("/echo-credential"):
            # A back end that echoes what it was sent (a debug endpoint, an error page quoting
            # the request): Midtier must keep the credential it added from the device.
            return self.answer(200, {"received": authorization}, [("X-Received-Authorization", authorization)])
        if destination == "echo":
            with State.lock:
                token = authorization[7:] if authorization.startswith("Bearer ") else None
                user = State.tokens.get(token) if token not in State.revoked else None
            if user is None or path == "/echo/always-401":
                with State.lock:
                    State.backend_401 += 1
                return self.answer(401, {"error": "invalid_token"}, [("WWW-Authenticate", "Bearer")])
            if path == "/echo/fail-500":
                return self.answer(500, {"error": "back end failure"})
            body = {"user": user, "n": nonce}
        elif destination == "tech":
            if authorization != basic("MOBILE_TECH", TECH_PASSWORD):
                return self.answer(401, {"error": "bad technical user"}, [("WWW-Authenticate", "Basic")])
            body = {"n": nonce}
        else:
            return self.answer(404, {"error": "not found"})
        cookies = {}
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name:
                cookies[name] = value
        set_cookies = []
        with State.lock:
            State.presented.append((destination, nonce, cookies))
            for name, attributes in (("SESSION", "Path=/; HttpOnly"), ("ROUTE", f"Path=/{destination}; Max-Age=3600")):
                if name not in cookies:
                    value = os.urandom(16).hex()
                    State.issued[(destination, name, value)] = nonce
                    set_cookies.append(("Set-Cookie", f"{name}={value}; {attributes}"))
        # The answer names the session only by a digest: its value must never reach the device.
        body["session"] = hashlib.sha256(cookies.get("SESSION", "").encode()).hexdigest()[:12] if "SESSION" in cookies else None
        self.answer(200, body, set_cookies)

    def log_message(self, *args):
        pass


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 128


# --- The device side ------------------------------------------------------------------------

received = []               # every (status, header text, body) the test client received
received_lock = threading.Lock()
local = threading.local()


def call(method, port, path, headers=None, body=None, timeout=30):
    """One request on this thread's keep-alive connection; (status, headers list, body)."""
    for attempt in range(2):
        connection = getattr(local, "connections", {}).get(port)
        if connection is None:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            local.__dict__.setdefault("connections", {})[port] = connection
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            data = response.read()
            result = (response.status, response.getheaders(), data)
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                local.connections.pop(port)
            break
        except (http.client.HTTPException, OSError) as error:
            connection.close()
            local.connections.pop(port)
            result = (0, [], repr(error).encode())
            if attempt == 1 or method != "GET":
                break
    with received_lock:
        received.append((result[0], "\n".join(f"{k}: {v}" for k, v in result[1]), result[2]))
    return result


def header(headers, name):
    return next((v for k, v in headers if k.lower() == name.lower()), None)


# --- The secrets scanner ----------------------------------------------------------------------

def cookie_audit(issued, presented, nonce_owner):
    """What the back end's records say about its cookies: the registration each value was issued
    to (the one whose request it answered), the values issued per (registration, destination,
    name), the presentations by another registration than the owner, the requests that came
    without a cookie other than the one it was issued in answer to, and values presented by
    more than one registration."""
    owner_of_value = {key: nonce_owner.get(nonce, (None, None))[0] for key, nonce in issued.items()}
    issued_per = {}
    for (destination, name, value), registration_id in owner_of_value.items():
        issued_per.setdefault((registration_id, destination, name), []).append(value)
    crossed, missing, presenters = [], 0, {}
    for destination, nonce, cookies in presented:
        registration_id = nonce_owner.get(nonce, (None, None))[0]
        for name in ("SESSION", "ROUTE"):
            value = cookies.get(name)
            if value is None:
                first = issued_per.get((registration_id, destination, name), [None])[0]
                if issued.get((destination, name, first)) != nonce:
                    missing += 1
                continue
            presenters.setdefault((destination, name, value), set()).add(registration_id)
            if owner_of_value.get((destination, name, value)) != registration_id:
                crossed.append((registration_id, destination, name))
    shared = [key for key, registrations in presenters.items() if len(registrations) > 1]
    return owner_of_value, issued_per, crossed, missing, shared


TOKEN_CHARS = rb"A-Za-z0-9+/=_.~-"


def needles(secrets):
    """For each secret, the strings whose presence means it leaked: the secret itself and its
    longest alphanumeric runs (what stays the same in base64url, percent-encoded or
    JSON-escaped forms of it). Each is made of TOKEN_CHARS only."""
    result = []
    for label, value in secrets:
        forms = {value} if re.fullmatch(b"[" + TOKEN_CHARS + b"]+", value.encode()) else set()
        runs = sorted(re.findall(r"[A-Za-z0-9]{20,}", value), key=len, reverse=True)
        forms.update(run[:40] for run in runs[:3])
        result.extend((label, form.encode()) for form in forms)
    return result


def scan(haystack, secret_needles):
    """The needles found in the haystack. A needle made of TOKEN_CHARS occurs in a text exactly
    when it occurs in one of the text's maximal runs of TOKEN_CHARS at least as long as it, so
    only those runs (distinct, joined) are searched: the same answer as searching the whole
    text, in a fraction of the time."""
    shortest = min(len(needle) for _, needle in secret_needles)
    runs = b"\n".join(set(re.findall(b"[" + TOKEN_CHARS + b"]{%d,}" % shortest, haystack)))
    return [(label, needle) for label, needle in secret_needles if needle in runs]


work = tempfile.mkdtemp(prefix="midtier-isolation-")
backend = None
database = ThrowawayPostgres() if INSTANCES > 1 else None
try:
    pg = database.__enter__() if database else None
    # --- Users, configuration, processes ---
    rng = random.Random()
    users = [{"id": f"iso{i:02d}", "password": f"iso-pw-{os.urandom(12).hex()}", "sfUserId": str(200001 + i)} for i in range(USERS)]
    extra = [{"id": f"iso-{kind}", "password": f"iso-pw-{os.urandom(12).hex()}", "sfUserId": f"tokenservice-{kind}"}
             for kind in ("500", "echo", "garbage")]

    def hashed(user):
        out = subprocess.run([BIN, "hash-secret", "--cost", "10"], input=user["password"] + "\n", capture_output=True, text=True, check=True).stdout
        return {"id": user["id"], "passwordHash": out.strip(), "attributes": {"sfUserId": user["sfUserId"]}}

    with ThreadPoolExecutor(4) as pool:
        users_file = list(pool.map(hashed, users + extra))
    admin_hash = subprocess.run([BIN, "hash-secret", "--cost", "10"], input=ADMIN_TOKEN + "\n", capture_output=True, text=True, check=True).stdout.strip()

    bport = free_port()
    backend = ThreadingServer(("127.0.0.1", bport), Backend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()

    mport, aport, sport = free_port(), free_port(), free_port()
    config = demo_config(REPO, work, mport, aport, adminTokenHashes=[admin_hash], logLevel="debug")
    json.dump({"users": users_file}, open(os.path.join(config, "users.json"), "w"))
    sf_file = os.path.join(config, "destinations", "sf.json")
    sf = json.load(open(sf_file))
    sf.update({"URL": f"http://127.0.0.1:{sport}", "tokenServiceURL": f"http://127.0.0.1:{sport}/oauth/token"})
    json.dump(sf, open(sf_file, "w"))
    json.dump({"Name": "echo", "URL": f"http://127.0.0.1:{bport}/echo", "Authentication": "OAuth2SAMLBearerAssertion",
               "tokenServiceURL": f"http://127.0.0.1:{bport}/oauth/token", "clientKey": CLIENT_KEY, "companyId": COMPANY,
               "userIdSource": "sfUserId", "timeout": 10000, "signingKey": sf["signingKey"], "signingCertificate": sf["signingCertificate"]},
              open(os.path.join(config, "destinations", "echo.json"), "w"))
    tech_password_file = os.path.join(work, "tech-password")
    open(tech_password_file, "w").write(TECH_PASSWORD + "\n")
    json.dump({"Name": "tech", "URL": f"http://127.0.0.1:{bport}/tech", "Authentication": "BasicAuthentication",
               "User": "MOBILE_TECH", "Password": {"file": tech_password_file}, "timeout": 10000},
              open(os.path.join(config, "destinations", "tech.json"), "w"))
    app_file = os.path.join(config, "apps", "demo.json")
    app = json.load(open(app_file))
    app["destinations"] = ["sf", "echo", "tech"]
    json.dump(app, open(app_file, "w"))

    # Further instances: the same files on their own ports, the same store and publicURL (as
    # behind one load balancer).
    configs, mports, aports = [config], [mport], [aport]
    if pg:
        midtier_file = os.path.join(config, "midtier.json")
        settings = json.load(open(midtier_file))
        settings["store"] = pg.url
        json.dump(settings, open(midtier_file, "w"))
        for n in range(1, INSTANCES):
            other = os.path.join(work, f"config-{n}")
            shutil.copytree(config, other)
            mports.append(free_port())
            aports.append(free_port())
            json.dump(dict(settings, listen=f"127.0.0.1:{mports[-1]}", adminListen=f"127.0.0.1:{aports[-1]}"),
                      open(os.path.join(other, "midtier.json"), "w"))
            configs.append(other)

    midtier_logs = [name for n in range(INSTANCES) for name in (f"midtier-{n}.out", f"midtier-{n}.err")]
    logs = {name: os.path.join(work, name) for name in midtier_logs + ["sandbox.out", "sandbox.err"]}
    files = {name: open(path, "wb") for name, path in logs.items()}
    processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(sport), "--page-size", "1", "--extra-employees", str(USERS)],
                                      cwd=REPO, stdout=files["sandbox.out"], stderr=files["sandbox.err"]))
    midtiers = [subprocess.Popen([BIN, "serve", "--config", c], cwd=REPO, stdout=files[f"midtier-{n}.out"], stderr=files[f"midtier-{n}.err"])
                for n, c in enumerate(configs)]
    processes.extend(midtiers)
    check(f"sandbox and {INSTANCES} midtier instance(s) (logLevel debug) start", wait_for(f"http://127.0.0.1:{sport}/sandbox/stats", 30)
          and all(wait_for(f"http://127.0.0.1:{p}/healthz", 30) for p in mports + aports))
    ADMIN = {"Authorization": "Bearer " + ADMIN_TOKEN}

    # --- Registrations: one device per user, two for the first five; one each for the extra users ---
    def register(user):
        status, headers, body = call("POST", mport, "/odata/applications/v1/demo/Connections",
                                     headers={"Authorization": basic(user["id"], user["password"]), "Content-Type": "application/json"},
                                     body=json.dumps({"DeviceType": "Android"}).encode())
        return {"user": user, "id": header(headers, "X-SMP-APPCID") if status == 201 else None,
                "auth": basic(user["id"], user["password"])}

    with ThreadPoolExecutor(8) as pool:
        registrations = list(pool.map(register, users + users[:TWO_DEVICES]))
        extra_registrations = {r["user"]["sfUserId"]: r for r in pool.map(register, extra)}
    check(f"{len(registrations)} devices of {USERS} users registered", all(r["id"] for r in registrations)
          and len({r["id"] for r in registrations}) == len(registrations))
    check("the extra users' devices registered", all(r["id"] for r in extra_registrations.values()))

    # --- Cookies: each registration's first calls to echo and tech, one at a time per registration ---
    nonce_owner = {}        # nonce -> (registration id, destination)

    def request(registration, destination, cookie=None):
        nonce = os.urandom(8).hex()
        nonce_owner[nonce] = (registration["id"], destination)
        if destination == "sf":
            query = urllib.parse.urlencode({"$top": "2", "$select": "userId,externalCode", "$filter": f"externalName ne '{nonce}'"},
                                           quote_via=urllib.parse.quote)
            path = "/sf/odata/v2/EmployeePayrollRunResults?" + query
        else:
            path = f"/{destination}/data?n={nonce}"
        start = time.monotonic()
        headers = {"Authorization": registration["auth"], "X-SMP-APPCID": registration["id"]}
        if cookie:
            headers["Cookie"] = cookie
        status, headers, body = call("GET", random.choice(mports), path, headers)
        return {"registration": registration, "destination": destination, "nonce": nonce, "start": start, "end": time.monotonic(),
                "status": status, "headers": headers, "body": body}

    def mismatch(result):
        """None when the answer is the caller's own data for this very request, else why not."""
        if result["status"] != 200:
            return f"status {result['status']}"
        if any(k.lower() == "set-cookie" for k, _ in result["headers"]):
            return "a Set-Cookie reached the device"
        try:
            answer = json.loads(result["body"])
        except ValueError:
            return "not JSON"
        sf_user = result["registration"]["user"]["sfUserId"]
        if result["destination"] == "sf":
            rows = answer.get("d", {}).get("results", [])
            if not rows:
                return "no rows"
            if any(row.get("userId") != sf_user or not row.get("externalCode", "").startswith(f"PRR-{sf_user}-") for row in rows):
                return "another user's rows: " + ",".join(sorted({row.get("userId", "?") for row in rows}))
            next_link = answer["d"].get("__next", "")
            if result["nonce"] not in next_link or not next_link.startswith(f"http://localhost:{mport}/sf/odata/v2/"):
                return "the answer of another request (nonce)"
            return None
        if answer.get("n") != result["nonce"]:
            return "the answer of another request (nonce)"
        if result["destination"] == "echo" and answer.get("user") != sf_user:
            return f"another user's answer ({answer.get('user')})"
        if answer.get("session") is None:
            return "the back end got no session cookie"
        return None

    # A registration's very first call is alone: concurrent first calls of one registration would
    # each be given a session, and the last one kept, as in a browser.
    def prime(registration):
        return [request(registration, "echo"), request(registration, "tech")]

    t0 = time.monotonic()
    with ThreadPoolExecutor(WORKERS) as pool:
        primed = [r for pair in pool.map(prime, registrations) for r in pair]
    prime_seconds = time.monotonic() - t0
    check(f"every registration's first echo and tech calls answered its own data ({len(primed)} calls)",
          all(r["status"] == 200 and json.loads(r["body"]).get("n") == r["nonce"] for r in primed),
          str([(r["status"], r["body"][:100]) for r in primed if r["status"] != 200][:3]))

    # --- The load: 10 000 interleaved requests, 32 at a time; revoke at 25 %, block at 50 % ---
    blocked = registrations[USERS - 1]["user"]     # one device only
    plan = [(rng.choice(registrations), rng.choices(["sf", "echo", "tech"], weights=[5, 3, 2])[0]) for _ in range(REQUESTS)]
    done = [0]
    done_lock = threading.Lock()
    events = {}

    # Some calls carry, as the device's own cookies, the back-end cookie values issued to another
    # registration (as if they had leaked): the back end must still get this registration's own.
    issued_to = {(nonce_owner[nonce][0], destination, name): value for (destination, name, value), nonce in State.issued.items()}
    forged = [0]

    def work_item(item):
        registration, destination = item
        cookie = None
        if destination != "sf" and rng.random() < 0.05:
            victim = rng.choice([r for r in registrations if r is not registration])
            values = [(name, issued_to.get((victim["id"], destination, name))) for name in ("SESSION", "ROUTE")]
            cookie = "; ".join(f"{name}={value}" for name, value in values if value) or None
            with done_lock:
                forged[0] += cookie is not None
        result = request(registration, destination, cookie)
        with done_lock:
            done[0] += 1
            count = done[0]
        if count == REQUESTS // 4:
            events["revoke_start"] = time.monotonic()
            status, _, _ = call("POST", sport, "/sandbox/revoke-tokens")
            with State.lock:
                State.revoked.update(State.tokens)
            events["revoked"] = status == 200
            events["revoke_done"] = time.monotonic()
        if count == REQUESTS // 2:
            events["block_start"] = time.monotonic()
            status, _, _ = call("PUT", aport, f"/admin/v1/users/{blocked['id']}/block",
                                headers={**ADMIN, "Content-Type": "application/json"},
                                body=json.dumps({"type": "traffic", "reason": "isolation test"}).encode())
            events["block_acknowledged"] = time.monotonic() if status == 200 else None
        return result

    with State.lock:
        exchanges_before_load = dict(State.exchanges)
    t0 = time.monotonic()
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(work_item, plan))
    load_seconds = time.monotonic() - t0

    acknowledged = events.get("block_acknowledged")
    check("the sandbox and the stand-in token service revoked every token during the load", events.get("revoked") is True)
    check("the block was acknowledged during the load", acknowledged is not None)
    mismatches, non_200, blocked_after, blocked_refused, blocked_data_after = [], [], 0, 0, []
    for result in results:
        user = result["registration"]["user"]
        if user is blocked and acknowledged and result["end"] > events["block_start"]:
            if result["start"] > acknowledged + BLOCK_GRACE:
                blocked_after += 1
                if result["status"] == 403 and header(result["headers"], "x-message-code") == "TRAFFIC_BLOCKED":
                    blocked_refused += 1
                else:
                    blocked_data_after.append((result["status"], result["body"][:120]))
                continue
            if result["status"] == 403:
                continue        # in flight while the block was made (or reached the other instance): either answer is right
        why = mismatch(result)
        if why and why.startswith("status"):
            non_200.append((user["id"], result["destination"], why, result["body"][:160]))
        elif why:
            mismatches.append((user["id"], result["destination"], why))
    # And calls made now, after the grace, on the instances at random: the check does not depend
    # on the load lasting long enough after the block for some of its calls to count.
    if acknowledged:
        time.sleep(max(0.0, acknowledged + BLOCK_GRACE - time.monotonic()) + 0.05)
        blocked_registration = next(r for r in registrations if r["user"] is blocked)
        for destination in ("sf", "echo", "tech") * 4:
            result = request(blocked_registration, destination)
            blocked_after += 1
            if result["status"] == 403 and header(result["headers"], "x-message-code") == "TRAFFIC_BLOCKED":
                blocked_refused += 1
            else:
                blocked_data_after.append((result["status"], result["body"][:120]))
    by_destination = {d: sum(1 for r in results if r["destination"] == d) for d in ("sf", "echo", "tech")}
    check(f"{REQUESTS} interleaved requests ({by_destination}): 0 mismatches", not mismatches, f"({len(mismatches)}: {mismatches[:5]})")
    check("0 answers other than 200 (except the blocked user's after the block)", not non_200, f"({len(non_200)}: {non_200[:5]})")
    check(f"after the block, {blocked['id']} got only 403 TRAFFIC_BLOCKED, never data ({blocked_after} requests)",
          blocked_after > 0 and blocked_refused == blocked_after, str(blocked_data_after[:3]))

    # Exchanges: every user at least once at each SAML destination, none more than a small bound.
    status, _, body = call("GET", sport, "/sandbox/stats")
    stats = json.loads(body)
    sandbox_exchanges = stats.get("exchangesByUser", {})
    sf_users = {r["registration"]["user"]["sfUserId"] for r in results if r["destination"] == "sf" and r["status"] == 200}
    # Each instance exchanges its own tokens: once at first use, once more after the revocation,
    # and a renewal racing another of the same user may cost one more.
    check(f"sandbox: every user exchanged at least once, none more than {3 * INSTANCES} times ({stats.get('exchanges')} exchanges, "
          f"{stats.get('newTokenRequests')} with new_token)",
          set(sandbox_exchanges) == sf_users and all(1 <= n <= 3 * INSTANCES for n in sandbox_exchanges.values()) and stats.get("rejected") == 0,
          str(sorted(sandbox_exchanges.items(), key=lambda kv: -kv[1])[:5]))
    had_token = {r["registration"]["user"]["sfUserId"] for r in results
                 if r["destination"] == "sf" and r["status"] == 200 and r["end"] < events["revoke_start"]}
    called_after = {r["registration"]["user"]["sfUserId"] for r in results if r["destination"] == "sf" and r["start"] > events["revoke_done"]
                    and (r["registration"]["user"] is not blocked or r["end"] < events["block_start"])}
    must_renew = had_token & called_after
    check(f"sandbox: after the revocation every user with a token renewed it once (new_token=true) under load ({len(must_renew)} users)",
          len(must_renew) <= stats.get("newTokenRequests", 0) <= len(sandbox_exchanges) * INSTANCES and len(must_renew) >= USERS // 2,
          f"({stats.get('newTokenRequests')} new-token exchanges)")
    with State.lock:
        echo_exchanges = {k: v for k, v in State.exchanges.items() if not k.startswith("tokenservice-")}
        new_token_requests = State.new_token_requests
    check(f"echo token service: every user exchanged at least once, none more than {3 * INSTANCES} times ({sum(echo_exchanges.values())} exchanges)",
          set(echo_exchanges) == {u["sfUserId"] for u in users} and all(1 <= n <= 3 * INSTANCES for n in echo_exchanges.values()),
          str(sorted(echo_exchanges.items(), key=lambda kv: -kv[1])[:5]))
    check("echo token service: one exchange per user and instance at most before the load (two devices share it)",
          set(exchanges_before_load) == {u["sfUserId"] for u in users} and all(1 <= n <= INSTANCES for n in exchanges_before_load.values())
          and (INSTANCES > 1 or set(exchanges_before_load.values()) == {1}), str(sorted(exchanges_before_load.items())[:5]))
    check(f"echo back end: revoked tokens were answered 401 and renewed ({State.backend_401} 401s, {new_token_requests} new_token exchanges)",
          State.backend_401 > 0 and new_token_requests > 0)

    # --- Cookies never cross registrations ---
    owner_of_value, issued_per, crossed, missing, shared = cookie_audit(State.issued, State.presented, nonce_owner)
    check(f"the back end issued exactly one SESSION and one ROUTE per registration and destination ({len(State.issued)} cookies)",
          len(State.issued) == len(registrations) * 4 and all(len(v) == 1 for v in issued_per.values())
          and len(issued_per) == len(registrations) * 4)
    cookie_checks = sum(len(c) for _, _, c in State.presented)
    check(f"every registration always presented the cookies issued to it first ({len(State.presented)} back-end requests, "
          f"{cookie_checks} cookies checked)", not crossed and missing == 0, f"({len(crossed)} crossed, {missing} missing: {crossed[:3]})")
    check(f"no cookie value was ever presented by two registrations ({forged[0]} calls carried another registration's values "
          "as device cookies)", forged[0] > 0 and not shared)
    two_device_users = [u["id"] for u in users[:TWO_DEVICES]]
    same_user = [{v for (d, n, v), o in owner_of_value.items() if d == destination and n == "SESSION" and o in
                  {r["id"] for r in registrations if r["user"]["id"] == uid}} for uid in two_device_users for destination in ("echo", "tech")]
    check("the two devices of one user have different back-end sessions", all(len(s) == 2 for s in same_user))
    proxied_set_cookies = [r for r in primed + results if any(k.lower() == "set-cookie" for k, _ in r["headers"])]
    check("no proxied answer carried a Set-Cookie to the device", not proxied_set_cookies)

    # The checks can fail: wrong answers made up from real ones are flagged, and so are a cookie
    # presented by the wrong registration and a cookie missing.
    def variant(result, **changes):
        return {**result, **changes}

    sf_result = next(r for r in results if r["destination"] == "sf" and r["status"] == 200)
    echo_result = next(r for r in results if r["destination"] == "echo" and r["status"] == 200)
    tech_result = next(r for r in results if r["destination"] == "tech" and r["status"] == 200)
    own_id = sf_result["registration"]["user"]["sfUserId"]
    stranger = str(int(own_id) % USERS + 200001)     # another user than own_id
    echo_answer = json.loads(echo_result["body"])
    wrong = [
        variant(sf_result, body=sf_result["body"].replace(own_id.encode(), stranger.encode())),
        variant(sf_result, body=json.dumps({"d": {"results": []}}).encode()),
        variant(sf_result, nonce=os.urandom(8).hex()),
        variant(sf_result, status=403),
        variant(echo_result, body=json.dumps({**echo_answer, "user": str(int(echo_answer["user"]) % USERS + 200001)}).encode()),
        variant(echo_result, nonce=os.urandom(8).hex()),
        variant(echo_result, body=json.dumps({**echo_answer, "session": None}).encode()),
        variant(tech_result, headers=tech_result["headers"] + [("Set-Cookie", "SESSION=x")]),
    ]
    flagged = [mismatch(r) is not None for r in wrong]
    victim_nonce = next(n for n, (rid, d) in nonce_owner.items() if rid == registrations[1]["id"] and d == "echo")
    donor_value = issued_per.get((registrations[0]["id"], "echo", "SESSION"), ["?"])[0]
    planted = [("echo", victim_nonce, {"SESSION": donor_value, "ROUTE": issued_per.get((registrations[1]["id"], "echo", "ROUTE"), ["?"])[0]}),
               ("tech", victim_nonce, {})]
    _, _, planted_crossed, planted_missing, planted_shared = cookie_audit(State.issued, State.presented + planted, nonce_owner)
    check(f"the checks flag made-up wrong answers ({sum(flagged)}/{len(wrong)}) and a made-up crossed and missing cookie",
          all(flagged) and mismatch(sf_result) is None and mismatch(echo_result) is None and len(planted_crossed) == len(crossed) + 1
          and planted_missing == missing + 2 and len(planted_shared) == len(shared) + (("echo", "SESSION", donor_value) not in shared),
          f"({flagged}, {len(planted_crossed)}, {planted_missing}, {len(planted_shared)})")

    # --- Error paths, so that error bodies and error logs exist ---
    own = registrations[0]
    other = registrations[1]
    errors = []

    def expect(name, status_wanted, method, port, path, headers=None, body=None, code=None):
        status, headers_got, data = call(method, port, path, headers, body)
        ok = status == status_wanted and (code is None or header(headers_got, "x-message-code") == code)
        errors.append((name, ok, status, data[:200]))
        return ok

    proxied = "/echo/data?n=error-path"
    expect("wrong password", 401, "GET", mport, proxied, {"Authorization": basic(own["user"]["id"], "wrong-" + own["user"]["password"]), "X-SMP-APPCID": own["id"]})
    expect("wrong password at registration", 401, "POST", mport, "/odata/applications/v1/demo/Connections", {"Authorization": basic(own["user"]["id"], own["user"]["password"] + "x")}, b"{}")
    expect("unknown user", 401, "GET", mport, proxied, {"Authorization": basic("nobody", "nobody-password-1"), "X-SMP-APPCID": own["id"]})
    expect("unknown registration", 403, "GET", mport, proxied, {"Authorization": own["auth"], "X-SMP-APPCID": "not-a-registration"})
    expect("no registration", 403, "GET", mport, proxied, {"Authorization": own["auth"]})
    expect("someone else's registration", 403, "GET", mport, proxied, {"Authorization": own["auth"], "X-SMP-APPCID": other["id"]})
    blocked_registration = next(r for r in registrations if r["user"] is blocked)
    expect("blocked user", 403, "GET", mport, "/sf/odata/v2/User('200050')", {"Authorization": blocked_registration["auth"], "X-SMP-APPCID": blocked_registration["id"]}, code="TRAFFIC_BLOCKED")
    with State.lock:
        before = State.new_token_requests
    expect("back end answers 401 to every token (renewed once, then the 401 passes)", 401, "GET", mport, "/echo/always-401",
           {"Authorization": own["auth"], "X-SMP-APPCID": own["id"]})
    with State.lock:
        renewed = State.new_token_requests - before
    errors.append(("a back-end 401 made Midtier renew the token once", renewed == 1, renewed, b""))
    expect("back end answers 500", 500, "GET", mport, "/echo/fail-500", {"Authorization": own["auth"], "X-SMP-APPCID": own["id"]})
    for destination in ("echo", "tech"):
        expect(f"{destination}: a back end that echoes the credential it received", 200, "GET", mport, f"/{destination}/echo-credential",
               {"Authorization": own["auth"], "X-SMP-APPCID": own["id"]})
        echoed = next(data for name, _, _, data in errors if name.startswith(f"{destination}: a back end that echoes"))
        check(f"{destination}: the echoed credential reaches the device redacted", b"[redacted]" in echoed, str(echoed))
    for kind in ("500", "echo", "garbage"):
        r = extra_registrations[f"tokenservice-{kind}"]
        expect(f"token service answers {kind}", 502, "GET", mport, proxied, {"Authorization": r["auth"], "X-SMP-APPCID": r["id"]})
    expect("wrong admin token", 401, "GET", aport, "/admin/v1/destinations", {"Authorization": "Bearer wrong-" + ADMIN_TOKEN})
    expect("admin: destinations (no secrets)", 200, "GET", aport, "/admin/v1/destinations", ADMIN)
    expect("admin: the blocked user", 200, "GET", aport, f"/admin/v1/users/{blocked['id']}", ADMIN)
    expect("admin: the audit trail", 200, "GET", aport, "/admin/v1/audit", ADMIN)
    expect("metrics (admin listener)", 200, "GET", aport, "/metrics")
    expect("sandbox refuses a forged token", 401, "GET", sport, "/odata/v2/User('200001')", {"Authorization": "Bearer " + os.urandom(32).hex()})
    bad = [(name, status, data) for name, ok, status, data in errors if not ok]
    check(f"error paths answered as expected ({len(errors)} cases)", not bad, str(bad[:3]))
    echo_body = next(data for name, _, _, data in errors if name == "token service answers echo")
    check("a token-service error that echoes the assertion is withheld from the device", b"withheld" in echo_body, str(echo_body))

    # --- Stop, then scan every log line and everything the device received ---
    for midtier in midtiers:
        midtier.send_signal(signal.SIGTERM)
    for midtier in midtiers:
        try:
            midtier.wait(timeout=20)
        except subprocess.TimeoutExpired:
            midtier.kill()
    check("midtier stops on SIGTERM", all(m.returncode == 0 for m in midtiers), f"(exit {[m.returncode for m in midtiers]})")
    processes[0].send_signal(signal.SIGTERM)
    try:
        processes[0].wait(timeout=10)
    except subprocess.TimeoutExpired:
        processes[0].kill()
    for f in files.values():
        f.close()

    secrets = [("admin token", ADMIN_TOKEN), ("technical password", TECH_PASSWORD),
               ("technical Basic credential", basic("MOBILE_TECH", TECH_PASSWORD)[6:])]
    for user in users + extra:
        secrets += [(f"password of {user['id']}", user["password"]), (f"Basic credential of {user['id']}", basic(user["id"], user["password"])[6:])]
    with State.lock:
        secrets += [("access token", t) for t in State.tokens]
        assertions = list(State.assertions)
        secrets += [(f"{name} cookie", value) for (_, name, value) in State.issued]
    for encoded, xml in assertions:
        secrets.append(("assertion (as sent)", encoded))
        value = signature_value(xml)
        if value:
            secrets.append(("assertion SignatureValue", value))
            # Where the signature sits in the form value (the rest of an assertion is predictable XML).
            offset = len(xml[:xml.index(value)].encode()) * 4 // 3
            secrets.append(("assertion (as sent)", encoded[offset:offset + len(value)]))
    secret_needles = needles(secrets)

    log_lines = []
    for name, path in logs.items():
        log_lines += open(path, "rb").read().splitlines()
    midtier_lines = [line for name in midtier_logs for line in open(logs[name], "rb").read().splitlines()]
    debug_lines = sum(1 for line in midtier_lines if b'"level":"debug"' in line)
    device = [headers_text.encode() + b"\n\n" + body for _, headers_text, body in received]
    haystack = b"\n".join(log_lines) + b"\n\x00\n" + b"\n\x00\n".join(device)
    t0 = time.monotonic()
    hits = scan(haystack, secret_needles)
    scan_seconds = time.monotonic() - t0
    check(f"secrets scan: {len(log_lines)} log lines ({debug_lines} at debug) and {len(device)} answers (headers and bodies) "
          f"against {len(secrets)} secrets ({len(secret_needles)} patterns): 0 hits", not hits,
          str(sorted({label for label, _ in hits})[:10]))
    check("the scan covered assertions, access tokens, cookies, passwords and the admin token",
          len(assertions) >= len(users) and sum(1 for l, _ in secrets if l == "access token") >= len(users)
          and sum(1 for l, _ in secrets if l.endswith("cookie")) == len(registrations) * 4 and ADMIN_TOKEN in dict(secrets).values())
    check("the Midtier log is JSON lines with debug entries", debug_lines > 0 and all(line.startswith(b"{") for line in midtier_lines if line.strip()))

    # The scanner finds what it must find: each kind of secret planted in a log line or a body.
    plant = random.Random(1)
    planted_ok = []
    for label, value in [plant.choice([s for s in secrets if s[0] == kind]) for kind in
                         ("access token", "assertion SignatureValue", "SESSION cookie", "ROUTE cookie", "admin token", "technical password")] + \
            [(f"password of {users[3]['id']}", users[3]["password"]), (f"Basic credential of {users[3]['id']}", basic(users[3]["id"], users[3]["password"])[6:])]:
        line = b'{"level":"debug","message":"leak ' + value.encode() + b'"}'
        planted_ok.append(any(l == label for l, _ in scan(haystack + b"\n" + line, secret_needles)))
    encoded = assertions[len(assertions) // 2][0]
    percent = urllib.parse.quote(encoded, safe="").encode()
    planted_ok.append(bool(scan(haystack + b"\nform: assertion=" + percent, secret_needles)))
    planted_ok.append(bool(scan(haystack + b"\n" + encoded.replace("+", "-").replace("/", "_").rstrip("=").encode(), secret_needles)))
    check(f"the scanner finds planted secrets ({len(planted_ok)} plants: each kind, percent-encoded and base64url assertions)", all(planted_ok), str(planted_ok))

    # --- Figures ---
    elapsed = time.monotonic() - started
    print()
    print(f"users {USERS}, registrations {len(registrations)} (+{len(extra_registrations)} for error paths), "
          f"requests {REQUESTS} in {load_seconds:.1f} s ({REQUESTS / load_seconds:.0f}/s, {WORKERS} connections) "
          f"+ {len(primed)} priming calls in {prime_seconds:.1f} s")
    print(f"mismatches {len(mismatches)}, non-200 {len(non_200)}, blocked user's refused requests {blocked_refused}/{blocked_after}")
    print(f"exchanges: sandbox {stats.get('exchanges')} ({stats.get('newTokenRequests')} new_token), "
          f"echo {sum(echo_exchanges.values())} ({new_token_requests} new_token); back-end 401s {State.backend_401}")
    print(f"cookies: {len(State.issued)} issued, {cookie_checks} presented and checked, crossed {len(crossed)}")
    print(f"secrets scan: {len(log_lines)} log lines, {len(device)} answers, {len(haystack) // 1024} KiB, {len(secrets)} secrets, "
          f"hits {len(hits)}, {scan_seconds:.1f} s; total {elapsed:.1f} s")
except Exception:
    import traceback
    check("the test ran to the end", False, "\n" + traceback.format_exc())
finally:
    kill_all(processes)
    if backend:
        backend.shutdown()
    if database:
        database.__exit__(None, None, None)
    if os.environ.get("ISOLATION_KEEP"):
        print(f"# kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)

print()
check.finish()
