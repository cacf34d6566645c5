#!/usr/bin/env python3
"""Hostile-input corpus against the real `midtier` binary: malformed and ambiguous HTTP over
raw sockets, path tricks in every encoding, identity spoofing, bad bodies, hostile $metadata
from the back end, and bad configuration files. Each case states its expected answer; the
rule for all of them is a clear 4xx (or the stated answer), never a crash, never a 500 from
Midtier itself, and nothing spoofed or outside the destination ever reaching the back end.

Usage: hostile.py PATH-TO-MIDTIER. Prints `hostile: N passed, M failed`; exits 1 on failure.
"""
import base64, http.server, json, os, shutil, socket, socketserver, subprocess, sys, tempfile, threading, time
import urllib.request
from harness import Checks, basic, demo_config, free_port, header, kill_all, labelled, sandbox_command

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
processes = []
seen = []            # (method, path, headers) that reached the stand-in back end
METADATA = {"body": b""}


check = Checks("hostile", quiet=True)


class Backend(http.server.BaseHTTPRequestHandler):
    """A stand-in back end that records what reaches it."""
    protocol_version = "HTTP/1.1"

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        elif "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            # Read the whole chunked body before answering, as a real server does; a
            # request whose body is aborted gets no answer at all.
            while True:
                size_line = self.rfile.readline()
                if not size_line:
                    return
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                self.rfile.read(size + 2)
                if size == 0:
                    break
        seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
        if "/echo-auth/" in self.path:
            return self.echo_authorization(self.path.rsplit("/", 1)[-1])
        if self.path.endswith("/$metadata"):
            body, content_type = METADATA["body"], "application/xml"
        else:
            body, content_type = b'{"d":{"ok":true}}', "application/json"
        self.send_response(200)
        if self.path.split("?")[0].endswith("/session"):
            self.send_header("Set-Cookie", "JSESSIONID=kept-by-midtier; Path=/")
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def echo_authorization(self, kind):
        """Answers with the Authorization it was sent inside the body, as a debug endpoint
        does: chunked, or 1 MB with a Content-Length, in pieces sent apart so that the
        credential straddles what Midtier reads at a time."""
        pieces = echo_pieces(kind, (self.headers.get("Authorization") or "").encode())
        chunked = kind == "chunked"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain" if chunked else "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(sum(len(piece) for piece in pieces)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for piece in pieces:
            self.wfile.flush()
            time.sleep(0.02)  # apart, so that Midtier most likely reads them apart
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_MERGE = do_PROPFIND = handle_any


def echo_pieces(kind, auth):
    """The body the credential echo sends for `auth`, in its pieces: each copy of the
    credential is cut in two by the end of a piece; the 1 MB one has copies at the start,
    across 64 KiB and at the very end."""
    half = len(auth) // 2
    if kind == "chunked":
        return [b'{"seen":"' + auth[:half], auth[half:] + b'","again":"' + auth[:3], auth[3:] + b'"}']
    pieces = [b""]
    for filler in (0, 65530, 400000, 534000):
        pieces[-1] += b"x" * filler + auth[:half]
        pieces.append(auth[half:])
    return pieces

    def log_message(self, *args):
        pass


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that hang up early are part of the corpus


def raw(port, data, timeout=5):
    """Sends raw bytes; returns the status code of the first answer (0 for none/closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
                if b"\r\n\r\n" in answer and len(answer) > 12:
                    break
        except socket.timeout:
            pass
    if answer.startswith(b"HTTP/1.1 ") or answer.startswith(b"HTTP/1.0 "):
        return int(answer[9:12]), answer
    return 0, answer


def raw_answer(port, data, timeout=5):
    """Sends raw bytes; returns (status, headers as a lower-cased dict, body) of the first
    answer, reading the body by its Content-Length (0 and empty for none)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
            length = int(headers.get("content-length", "0"))
            while len(body) < length:
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
        except socket.timeout:
            return 0, {}, answer
    if not answer.startswith(b"HTTP/1.1 "):
        return 0, {}, answer
    return int(answer[9:12]), headers, body


def call(port, method, path, headers=None, body=None, timeout=10):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=labelled(headers, body))
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


work = tempfile.mkdtemp(prefix="midtier-hostile-")
try:
    backend_port = free_port()
    backend = ThreadingServer(("127.0.0.1", backend_port), Backend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()

    mport, aport, sport = free_port(), free_port(), free_port()
    config = demo_config(REPO, work, mport, aport, maxRequestBodyBytes=65536)
    sf = json.load(open(os.path.join(config, "destinations", "sf.json")))
    sf.update({"URL": f"http://127.0.0.1:{sport}", "tokenServiceURL": f"http://127.0.0.1:{sport}/oauth/token"})
    json.dump(sf, open(os.path.join(config, "destinations", "sf.json"), "w"))
    json.dump({"Name": "be", "URL": f"http://127.0.0.1:{backend_port}/base", "Authentication": "NoAuthentication", "timeout": 2000,
               "metadataPatches": [{"entityType": "E", "property": "amount", "set": {"Precision": "15", "Scale": "2"}}]},
              open(os.path.join(config, "destinations", "be.json"), "w"))
    TECH_PASSWORD = "tech-" + os.urandom(8).hex()
    json.dump({"Name": "fixed", "URL": f"http://127.0.0.1:{backend_port}/base", "Authentication": "NoAuthentication", "timeout": 2000,
               "URL.queries.sap-client": "100", "forwardDeviceCookies": ["allowed"]},
              open(os.path.join(config, "destinations", "fixed.json"), "w"))
    json.dump({"Name": "tech", "URL": f"http://127.0.0.1:{backend_port}/base", "Authentication": "BasicAuthentication", "timeout": 5000,
               "User": "MOBILE_TECH", "Password": TECH_PASSWORD},
              open(os.path.join(config, "destinations", "tech.json"), "w"))
    app = json.load(open(os.path.join(config, "apps", "demo.json")))
    app["destinations"] = ["sf", "be", "fixed", "tech"]
    json.dump(app, open(os.path.join(config, "apps", "demo.json"), "w"))
    # A user whose id has a canonically equivalent spelling (K and KELVIN SIGN), and an admin.
    def hash_secret(secret):
        return subprocess.run([BIN, "hash-secret", "--cost", "10"], input=secret + "\n", capture_output=True, text=True, check=True).stdout.strip()
    users = json.load(open(os.path.join(config, "users.json")))
    users["users"].append({"id": "Kim", "passwordHash": hash_secret("kim-demo-password"), "attributes": {"sfUserId": "100009"}})
    json.dump(users, open(os.path.join(config, "users.json"), "w"))
    ADMIN_TOKEN = "hostile-admin-" + os.urandom(12).hex()
    server_settings = json.load(open(os.path.join(config, "midtier.json")))
    server_settings["adminTokenHashes"] = [hash_secret(ADMIN_TOKEN)]
    json.dump(server_settings, open(os.path.join(config, "midtier.json"), "w"))
    ADMIN = {"Authorization": "Bearer " + ADMIN_TOKEN}
    log = open(os.path.join(work, "midtier.log"), "wb")
    processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(sport)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    midtier = subprocess.Popen([BIN, "serve", "--config", config], cwd=REPO, stdout=log, stderr=log)
    processes.append(midtier)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{mport}/healthz", timeout=1)
            break
        except Exception:
            time.sleep(0.05)

    alice = "Basic " + base64.b64encode(b"alice:alice-demo-password").decode()
    bob = "Basic " + base64.b64encode(b"bob:bob-demo-password").decode()

    settles = [0]

    def settle():
        """A barrier instead of a fixed sleep: a legitimate call through Midtier, done only once
        the back end has recorded it. A forward caused by the hostile bytes is started while
        Midtier reads them, before the barrier's connection is even opened, so it reaches the
        back end ahead of the barrier unless Midtier held it back on purpose."""
        settles[0] += 1
        for _ in range(3):
            status, _, _ = call(mport, "GET", f"/be/__settle{settles[0]}", {"Authorization": alice, "X-SMP-APPCID": appcid})
            if status == 200 and any(entry[1].endswith(f"/__settle{settles[0]}") for entry in seen):
                return
            time.sleep(0.05)
        raise RuntimeError("the barrier call did not reach the back end")

    def unsettled(entries):
        return [entry for entry in entries if "/__settle" not in entry[1]]
    status, headers, _ = call(mport, "POST", "/odata/applications/v1/demo/Connections", {"Authorization": alice}, b"{}")
    appcid = headers["X-SMP-APPCID"]
    status, headers, _ = call(mport, "POST", "/odata/applications/v1/demo/Connections", {"Authorization": bob}, b"{}")
    bob_appcid = headers["X-SMP-APPCID"]
    auth = f"Authorization: {alice}\r\nX-SMP-APPCID: {appcid}\r\n"

    # --- 1. Malformed and ambiguous HTTP, over raw sockets. Expected: 400 (or 431 for size
    #        limits, 413 for body size) and nothing forwarded. ---
    def request(line, extra="", body=b"", host="Host: localhost\r\n"):
        return (line + "\r\n" + host + auth + extra + "\r\n").encode() + body

    http_cases = [
        ("CL and TE together", request("POST /be/x HTTP/1.1", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"), {400}),
        ("two different Content-Length", request("POST /be/x HTTP/1.1", "Content-Length: 4\r\nContent-Length: 5\r\n", b"abcde"), {400}),
        ("Content-Length list", request("POST /be/x HTTP/1.1", "Content-Length: 4, 5\r\n", b"abcde"), {400}),
        ("negative Content-Length", request("POST /be/x HTTP/1.1", "Content-Length: -1\r\n"), {400}),
        ("non-numeric Content-Length", request("POST /be/x HTTP/1.1", "Content-Length: abc\r\n"), {400}),
        ("TE: chunked, identity", request("POST /be/x HTTP/1.1", "Transfer-Encoding: chunked, identity\r\n", b"0\r\n\r\n"), {400, 501}),
        ("TE: xchunked", request("POST /be/x HTTP/1.1", "Transfer-Encoding: xchunked\r\n", b"0\r\n\r\n"), {400, 501}),
        ("bad chunk size", request("POST /be/x HTTP/1.1", "Transfer-Encoding: chunked\r\n", b"zz\r\nab\r\n0\r\n\r\n"), {400}),
        ("obs-fold header", request("GET /be/x HTTP/1.1", "X-Folded: a\r\n  b\r\n"), {400}),
        ("bare LF line ends", b"GET /be/x HTTP/1.1\nHost: localhost\nAuthorization: " + alice.encode() + b"\nX-SMP-APPCID: " + appcid.encode() + b"\n\n", {400}),
        ("bare CR in a header", request("GET /be/x HTTP/1.1", "X-A: a\rb\r\n"), {400}),
        ("NUL in a header value", request("GET /be/x HTTP/1.1", "X-A: a\x00b\r\n"), {400}),
        ("NUL in a header name", request("GET /be/x HTTP/1.1", "X-\x00A: b\r\n"), {400}),
        ("space before colon", request("GET /be/x HTTP/1.1", "X-Forwarded-User : bob\r\n"), {400}),
        ("missing Host", request("GET /be/x HTTP/1.1", host=""), {400}),
        ("two Host headers", request("GET /be/x HTTP/1.1", "Host: evil.example\r\n"), {400}),
        # Absolute-form is read as its path (RFC 9112 §3.2.2); Midtier never routes or builds
        # URLs from an authority the device names, so this is an ordinary call of /be/x.
        ("absolute-form is only its path", request("GET http://evil.example/be/x HTTP/1.1"), {200}),
        ("HTTP/0.9 request", b"GET /be/x\r\n\r\n", {400, 0}),
        ("unknown HTTP version", request("GET /be/x HTTP/9.9"), {400, 505, 0}),
        ("lowercase method", request("get /be/x HTTP/1.1"), {400, 405, 501}),
        # TRACE would have the back end echo the request, with the credential Midtier adds.
        ("TRACE", request("TRACE /be/x HTTP/1.1"), {405}),
        ("TRACK (llhttp knows no TRACK)", request("TRACK /be/x HTTP/1.1"), {405, 400}),
        ("CONNECT", request("CONNECT /be/x HTTP/1.1"), {405, 400}),
        ("CONNECT authority-form", request("CONNECT backend.example:443 HTTP/1.1"), {405, 400}),
        ("PROPFIND (any other method is forwarded, SPEC §4)", request("PROPFIND /be/x HTTP/1.1"), {200}),
        ("made-up method (llhttp knows no BREW)", request("BREW /be/x HTTP/1.1"), {405, 400}),
        ("MERGE (OData v2 partial update)", request("MERGE /be/x HTTP/1.1", "Content-Length: 2\r\n", b"{}"), {200}),
        ("garbage request line", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"A" * 40 + b"\r\n\r\n", {400, 0}),
        ("many headers", request("GET /be/x HTTP/1.1", "".join(f"X-H{i}: v\r\n" for i in range(300))), {431, 400}),
        ("one huge header", request("GET /be/x HTTP/1.1", "X-Huge: " + "a" * 100_000 + "\r\n"), {431, 400}),
        ("huge request line", request("GET /be/" + "a" * 100_000 + " HTTP/1.1"), {414, 431, 400}),
        ("body over the limit by Content-Length", request("POST /be/x HTTP/1.1", "Content-Length: 70000\r\n", b"a" * 100), {413}),
    ]
    for name, data, expected in http_cases:
        before = len(seen)
        try:
            status, answer = raw(mport, data)
        except OSError as error:
            status, answer = 0, str(error).encode()
        check(f"http: {name}", status in expected, f"(got {status}, want {sorted(expected)}: {answer[:120]!r})")
        settle()  # anything the hostile bytes made Midtier forward has arrived by now
        forwarded_is_fine = expected == {200}
        # A streamed body is only found broken once it is under way: the back end may have
        # seen the start of a request that is then aborted, never completed.
        started_is_fine = name == "bad chunk size"
        check(f"http: {name} is not forwarded", forwarded_is_fine or started_is_fine or not unsettled(seen[before:]), f"(back end saw {unsettled(seen[before:])})")

    status, answer = raw(mport, request("TRACE /be/x HTTP/1.1"))
    check("http: TRACE's 405 names the allowed methods", status == 405 and b"\r\nallow: GET, HEAD, POST" in answer.lower().replace(b"get, head, post", b"GET, HEAD, POST"), f"({answer[:200]!r})")

    # A slow-headers client must not hold the server: other calls still answer.
    slow = socket.create_connection(("127.0.0.1", mport))
    slow.sendall(b"GET /be/x HTTP/1.1\r\nHost: localhost\r\n")
    status, _, _ = call(mport, "GET", "/healthz")
    check("http: a slow-headers client does not block others", status == 200)
    slow.close()

    # --- 2. Path tricks: 400, never at the back end outside /base. ---
    tricks = ["/be/../x", "/be/./x", "/be/%2e%2e/x", "/be/%2E%2E/x", "/be/.%2e/x", "/be/%2e./x", "/be/..%2fx", "/be/..%2Fx",
              "/be/%2e%2e%2fx", "/be/a/../../x", "/be/%252e%252e/x", "/be/%25252e%25252e/x", "/be/..;/x", "/be/..;jsessionid=1/x",
              "/be/%2e%2e;x/y", "/be/a%5c..%5cx", "/be/a\\..\\x", "/be/%5c..%5cx", "/be/%c0%ae%c0%ae/x", "/be/%c0%afx",
              "/be/%e0%80%ae%e0%80%ae/x", "/be/%00", "/be/a%00b", "/be/%0d%0aSet-Cookie:x", "/be/%", "/be/%zz", "/be/%2",
              "/be/%u002e%u002e/x", "/be/..%00/x", "/be/..%09/x", "/be/%252f", "/be/x%2f..%2f..%2fy", "/be/...%2f"]
    for trick in tricks:
        before = len(seen)
        status, answer = raw(mport, request(f"GET {trick} HTTP/1.1"))
        check(f"path: {trick}", status == 400, f"(got {status})")
        check(f"path: {trick} never reaches the back end", len(seen) == before, f"({seen[before:]})")
    # Fine ones arrive under /base as sent.
    for fine in ["/be/a%20b", "/be/a..b", "/be/Items('x')", "/be/%24metadata2", "/be/x;y=1"]:
        before = len(seen)
        status, _ = raw(mport, request(f"GET {fine} HTTP/1.1"))
        arrived = seen[before:]
        check(f"path: {fine} is forwarded under the base path", status == 200 and arrived and arrived[0][1].startswith("/base/"), f"({status} {arrived})")

    # --- 3. Identity spoofing: nothing claimed by the device reaches the back end. ---
    spoofs = ["X-Forwarded-User", "X_Forwarded_User", "x-forwarded-user", "X-FORWARDED-USER", "X-Forwarded-For", "X_Forwarded_For",
              "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Email",
              "X-Forwarded-Preferred-Username", "X-Forwarded-Groups", "X-Forwarded-Access-Token", "Forwarded", "X-Real-IP",
              "X-Remote-User", "X_Remote_User", "Remote-User", "REMOTE_USER", "X-User", "X-Auth-User", "X-Authenticated-User",
              "X-Auth-Request-User", "X-Auth-Request-Email", "SAP-User", "sap-userid", "SAP_USER", "X-SAP-User-Name",
              "X-SMP-User", "X-SMP-APPCID-Other", "X-Original-URL", "X-Rewrite-URL", "X-HTTP-Method-Override", "True-Client-IP",
              "X-Client-IP", "X-Cluster-Client-IP"]
    for name in spoofs:
        before = len(seen)
        status, _ = raw(mport, request("GET /be/spoof HTTP/1.1", f"{name}: bob\r\n"))
        arrived = seen[before:]
        leaked = [h for h in (arrived[0][2] if arrived else {}) if h.replace("_", "-") == name.lower().replace("_", "-")
                  and arrived[0][2][h] == "bob"]
        check(f"spoof: {name} is dropped", status == 200 and arrived and not leaked, f"({status} {leaked})")
    # Someone else's registration, a duplicated APPCID, a cookie/header mismatch.
    check("spoof: bob's registration with alice's password", call(mport, "GET", "/be/x", {"Authorization": alice, "X-SMP-APPCID": bob_appcid})[0] == 403)
    status, _ = raw(mport, request("GET /be/x HTTP/1.1", f"X-SMP-APPCID: {bob_appcid}\r\n"))
    check("spoof: two different X-SMP-APPCID headers", status == 400, f"(got {status})")
    check("spoof: bob's id in the cookie, alice's password", call(mport, "GET", "/be/x", {"Authorization": alice, "Cookie": f"X-SMP-APPCID={bob_appcid}"})[0] == 403)
    check("spoof: no credentials", call(mport, "GET", "/be/x", {"X-SMP-APPCID": appcid})[0] == 401)
    check("spoof: X-Forwarded-User instead of credentials", call(mport, "GET", "/be/x", {"X-SMP-APPCID": appcid, "X-Forwarded-User": "alice"})[0] == 401)
    for bad_auth in ["Basic", "Basic !!!!", "Basic " + base64.b64encode(b"alice").decode(), "Bearer x", "basic " + "A" * 10000, "Digest x"]:
        status, _, _ = call(mport, "GET", "/be/x", {"Authorization": bad_auth, "X-SMP-APPCID": appcid})
        check(f"auth: malformed Authorization {bad_auth[:20]!r}", status == 401, f"(got {status})")

    # --- 3b. What only Midtier decides at the back end. A destination's fixed query parameters
    #         replace the device's of the same name, in any spelling a back end may read as it
    #         (percent-encoded, another letter case); the device's own cookies stay with the
    #         device unless the destination lists them (forwardDeviceCookies), the back end's own
    #         session (kept by Midtier) still goes. ---
    for query, expected in [("sap-client=200&x=1", "x=1&sap-client=100"), ("x=1&sap-client=200&sap-client=300", "x=1&sap-client=100"),
                            ("sap%2Dclient=200", "sap-client=100"), ("sap%2dclient=200&%24top=1", "%24top=1&sap-client=100"),
                            ("SAP-CLIENT=200", "sap-client=100"), ("Sap-Client=200", "sap-client=100"), ("sap-client", "sap-client=100"),
                            ("sap+client=1&sap-clientx=2", "sap+client=1&sap-clientx=2&sap-client=100"), ("", "sap-client=100")]:
        before = len(seen)
        status, _ = raw(mport, request(f"GET /fixed/q{'?' + query if query else ''} HTTP/1.1"))
        arrived = [entry[1] for entry in seen[before:]]
        check(f"query: ?{query} reaches the back end as ?{expected}", status == 200 and arrived == [f"/base/q?{expected}"], f"({status} {arrived})")
    status, _ = raw(mport, request("GET /fixed/session HTTP/1.1"))
    check("cookies: the back end starts a session (kept by Midtier)", status == 200, f"({status})")
    device_cookies = "Cookie: MYSAPSSO2=ticket; other=y; allowed=z; SAP_SESSIONID_ABC_100=s; sap-usercontext=sap-client=100; JSESSIONID=forged\r\n"
    for destination, expected in [("fixed", "JSESSIONID=kept-by-midtier; allowed=z"), ("be", None)]:
        before = len(seen)
        status, _ = raw(mport, request(f"GET /{destination}/c HTTP/1.1", device_cookies))
        arrived = [entry[2].get("cookie") for entry in seen[before:]]
        check(f"cookies: the device's SAP ticket and other cookies stay with the device at {destination}; the back end gets {expected}",
              status == 200 and arrived == [expected], f"({status} {arrived})")

    # --- 4. Bad bodies to the registration API: 400 with the field named, never 500. ---
    bodies = [b"{", b"[]", b"null", b"42", b'"x"', b'{"DeviceType": 7}', b'{"DeviceType": ["a"]}', b'{"DeviceType": {}}',
              b'{"DeviceModel": true}', b'{"d": 5}', b'{"ApnsDeviceToken": ' + b"1" * 400 + b"}", b'{"DeviceType": "' + b"a" * 5000 + b'"}',
              b"[" * 10000 + b"]" * 10000, b'{"a":' * 5000 + b"1" + b"}" * 5000, b"\xff\xfe\x00", b'{"DeviceType":"\\ud800"}',
              b'{"DeviceType":"x",}', b"{'DeviceType':'x'}"]
    for body in bodies:
        status, _, answer = call(mport, "POST", "/odata/applications/v1/demo/Connections", {"Authorization": alice, "Content-Type": "application/json"}, body)
        check(f"body: {body[:30]!r}", status in (400, 413), f"(got {status}: {answer[:100]!r})")
    status, _, _ = call(mport, "POST", "/odata/applications/v1/demo/Connections", {"Authorization": alice}, b"a" * 200_000)
    check("body: a registration body over 64 KiB", status == 413, f"(got {status})")
    for path in ["/odata/applications/v1/demo/Connections('')", "/odata/applications/v1/demo/Connections('a", "/odata/applications/v1/demo/Connections(x)",
                 "/odata/applications/v0/demo/Connections", "/odata/applications/v1/../demo/Connections", "/odata/applications/v1/demo/Other"]:
        status, _, _ = call(mport, "GET", path, {"Authorization": alice})
        check(f"body: odd registration path {path}", status in (400, 404, 405), f"(got {status})")

    # --- 5. Hostile $metadata from the back end: refused (502), never a crash or a hang. ---
    lol = b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">' \
          b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]><edmx:Edmx xmlns:edmx="x">&lol3;</edmx:Edmx>'
    hostile_metadata = [
        ("billion laughs", lol),
        ("external DTD", b'<?xml version="1.0"?><!DOCTYPE x SYSTEM "http://127.0.0.1:1/evil.dtd"><x/>'),
        ("external entity", b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'),
        ("not XML", b"this is not xml"),
        ("truncated", b'<edmx:Edmx xmlns:edmx="x"><edmx:DataServices>'),
        ("empty", b""),
    ]
    for name, document in hostile_metadata:
        METADATA["body"] = document
        status, _, answer = call(mport, "GET", "/be/odata/$metadata", {"Authorization": alice, "X-SMP-APPCID": appcid})
        check(f"metadata: {name}", status == 502 and b"root:" not in answer, f"(got {status}: {answer[:80]!r})")
    METADATA["body"] = b'<edmx:Edmx xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"><edmx:DataServices><Schema xmlns="http://schemas.microsoft.com/ado/2008/09/edm" Namespace="N"><EntityType Name="E"><Property Name="amount" Type="Edm.Decimal"/></EntityType></Schema></edmx:DataServices></edmx:Edmx>'
    status, _, answer = call(mport, "GET", "/be/odata/$metadata", {"Authorization": alice, "X-SMP-APPCID": appcid})
    check("metadata: a good document is patched", status == 200 and b'Scale="2"' in answer, f"({status} {answer[:200]!r})")

    # --- 6. Identity (docs/identity.md). ---
    connections = "/odata/applications/v1/demo/Connections"

    # A user id is compared by its bytes: KELVIN SIGN + "im" is not the blocked user Kim, and
    # signing in with it neither registers nor lifts Kim's block.
    kim, kelvin = basic("Kim", "kim-demo-password"), basic("\u212aim", "kim-demo-password")
    status, _, answer = call(aport, "PUT", "/admin/v1/users/Kim/block", {**ADMIN, "Content-Type": "application/json"}, b'{"type":"all","reason":"left"}')
    check("identity: the admin blocks Kim", status == 200, f"({status} {answer[:200]!r})")
    status, _, answer = call(mport, "POST", connections, {"Authorization": kelvin}, b"{}")
    check("identity: \\u212aim (KELVIN SIGN) is not Kim: 401, no registration", status == 401, f"({status} {answer[:200]!r})")
    status, _, answer = call(mport, "POST", connections, {"Authorization": kim}, b"{}")
    check("identity: Kim stays blocked after the KELVIN SIGN sign-in", status == 403, f"({status} {answer[:200]!r})")
    status, _, answer = call(aport, "GET", "/admin/v1/users/Kim", ADMIN)
    kim_state = json.loads(answer) if status == 200 else {}
    check("identity: the admin API still shows Kim's block and no registration",
          (kim_state.get("block") or {}).get("type") == "all" and kim_state.get("registrations") == [], f"({status} {answer[:300]!r})")
    status, _, answer = call(aport, "GET", "/admin/v1/registrations?user=%E2%84%AAim", ADMIN)
    check("identity: no registration exists for the KELVIN SIGN spelling",
          status == 200 and json.loads(answer).get("registrations") == [], f"({status} {answer[:200]!r})")

    # Admin bodies are read strictly: a key given twice is ambiguous (which type of block?) and
    # refused, naming the key; nothing is blocked.
    for body, what in [(b'{"type":"traffic","type":"all"}', "type"), (b'{"type":"all","reason":"a","reason":"b"}', "reason"),
                       (b'{"type":"all",}', "trailing comma"), (b'{"type":"all"} {}', "two documents"), (b"[\"all\"]", "an array")]:
        status, _, answer = call(aport, "PUT", "/admin/v1/users/carol/block", {**ADMIN, "Content-Type": "application/json"}, body)
        named = what not in ("type", "reason") or what.encode() in answer
        check(f"admin: a block body with {what if what not in ('type', 'reason') else what + ' given twice'} is 400 and says so",
              status == 400 and named, f"({status} {answer[:200]!r})")
    status, _, answer = call(aport, "GET", "/admin/v1/users/carol", ADMIN)
    check("admin: carol was not blocked by any of them", status == 200 and json.loads(answer).get("block") is None, f"({status} {answer[:200]!r})")

    # Credentials with NUL or other control characters are refused, not cut at the NUL.
    for name, password in [("NUL after the right password", b"alice-demo-password\x00"), ("NUL and more", b"alice-demo-password\x00anything"),
                           ("a tab after it", b"alice-demo-password\t"), ("DEL after it", b"alice-demo-password\x7f"),
                           ("the right password then 60 more bytes", b"alice-demo-password" + b"x" * 60)]:
        status, _, answer = call(mport, "POST", connections, {"Authorization": basic("alice", password)}, b"{}")
        check(f"identity: {name} is 401", status == 401, f"({status} {answer[:200]!r})")
    status, _, answer = call(mport, "POST", connections, {"Authorization": basic("al\x00ice", "alice-demo-password")}, b"{}")
    check("identity: a NUL in the user name is 401", status == 401, f"({status} {answer[:200]!r})")
    long_secret = "p" * 73
    result = subprocess.run([BIN, "hash-secret", "--cost", "10"], input=long_secret + "\n", capture_output=True, text=True)
    check("identity: hash-secret refuses a secret longer than 72 bytes, saying so",
          result.returncode == 1 and "72" in result.stderr and not result.stdout.strip(), f"({result.returncode} {result.stdout!r} {result.stderr!r})")

    # A locked or wiped registration cannot be deleted by its device, nor its id taken again.
    for action, code in [("lock", "TRAFFIC_REG_LOCKED"), ("wipe", "TRAFFIC_REG_WIPED")]:
        mine = f"hostile-{action}-" + os.urandom(4).hex()
        status, headers, _ = call(mport, "POST", connections, {"Authorization": bob, "X-SMP-APPCID": mine}, b"{}")
        check(f"identity: bob registers {mine}", status == 201 and header(headers, "X-SMP-APPCID") == mine, f"({status} {headers})")
        status, _, _ = call(aport, "POST", f"/admin/v1/registrations/{mine}/{action}", ADMIN)
        check(f"identity: the admin does {action}", status == 200, f"({status})")
        status, headers, answer = call(mport, "DELETE", f"{connections}('{mine}')", {"Authorization": bob})
        check(f"identity: the device cannot delete its {action}ed registration (403 {code})",
              status == 403 and header(headers, "x-message-code") == code, f"({status} {headers.get('x-message-code')} {answer[:200]!r})")
        status, _, answer = call(aport, "GET", f"/admin/v1/registrations/{mine}", ADMIN)
        check(f"identity: the {action}ed registration is still there", status == 200 and json.loads(answer).get("state") in ("locked", "wiped"), f"({status} {answer[:200]!r})")
        status, headers, _ = call(mport, "POST", connections, {"Authorization": bob, "X-SMP-APPCID": mine}, b"{}")
        check(f"identity: registering again does not bring {mine} back", status != 201 or header(headers, "X-SMP-APPCID") != mine, f"({status} {headers})")
        status, _, _ = call(aport, "DELETE", f"/admin/v1/registrations/{mine}", ADMIN)
        status, headers, _ = call(mport, "POST", connections, {"Authorization": bob, "X-SMP-APPCID": mine}, b"{}")
        check(f"identity: after the admin deleted it, {mine} is never active again", status != 201 or header(headers, "X-SMP-APPCID") != mine, f"({status} {headers})")

    # Unauthenticated callers get the same answer for a known and an unknown registration id.
    answers = []
    for cid in [appcid, "no-such-registration-" + os.urandom(4).hex()]:
        status, headers, answer = call(mport, "GET", "/be/x", {"X-SMP-APPCID": cid})
        answers.append((status, header(headers, "x-message-code"), header(headers, "WWW-Authenticate"), answer.replace(cid.encode(), b"ID")))
    check("identity: known and unknown ids look the same without credentials", answers[0] == answers[1] and answers[0][0] == 401, f"({answers})")
    answers = []
    for cid in [appcid, "no-such-registration-" + os.urandom(4).hex()]:
        status, headers, answer = call(mport, "GET", "/be/x", {"X-SMP-APPCID": cid, "Authorization": basic("alice", "wrong-password")})
        answers.append((status, header(headers, "x-message-code"), answer.replace(cid.encode(), b"ID")))
    check("identity: ... and with a wrong password", answers[0] == answers[1] and answers[0][0] == 401, f"({answers})")

    # A broken chunked body on Midtier's own routes is 400 naming the framing, never 413.
    chunk_cases = [("zz", b"zz\r\nab\r\n0\r\n\r\n"), ("-5", b"-5\r\nab\r\n0\r\n\r\n"), ("0x10", b"0x10\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n"),
                   ("an overflowing size", b"ffffffffffffffffffff\r\nab\r\n0\r\n\r\n"), ("a chunk longer than its size", b"2\r\nabcdef\r\n0\r\n\r\n")]
    targets = [("registration", f"POST {connections} HTTP/1.1", f"Authorization: {alice}\r\n"),
               ("admin", "PUT /admin/v1/users/carol/block HTTP/1.1", f"Authorization: {ADMIN['Authorization']}\r\n")]
    for target, line, credentials in targets:
        port = mport if target == "registration" else aport
        for name, body in chunk_cases:
            data = (line + "\r\nHost: localhost\r\n" + credentials + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + body
            status, _, answer = raw_answer(port, data)
            check(f"chunked: {target} body with chunk size {name} is 400, not 413", status == 400 and b"larger than" not in answer,
                  f"({status} {answer[:200]!r})")
    status, _, answer = call(aport, "GET", "/admin/v1/users/carol", ADMIN)
    check("chunked: no block was made from a broken admin body", status == 200 and json.loads(answer).get("block") is None, f"({status} {answer[:200]!r})")

    # The credential Midtier adds never comes back to the device, in an answer streamed in
    # chunks or one of 1 MB, the credential cut across what Midtier reads at a time.
    tech_secrets = [TECH_PASSWORD.encode(), b"MOBILE_TECH:" + TECH_PASSWORD.encode(), basic("MOBILE_TECH", TECH_PASSWORD)[6:].encode()]
    for kind in ["chunked", "large"]:
        status, _, answer = call(mport, "GET", f"/tech/echo-auth/{kind}", {"Authorization": alice, "X-SMP-APPCID": appcid}, timeout=30)
        sent = seen[-1][2].get("authorization") if seen else None
        leaked = [secret for secret in tech_secrets if secret in answer]
        check(f"redaction: a {kind} echo of the technical user's credentials shows the device only [redacted]",
              status == 200 and sent == basic("MOBILE_TECH", TECH_PASSWORD) and not leaked
              and answer == b"".join(echo_pieces(kind, b"Basic [redacted]")), f"({status} {len(answer)} bytes, {len(leaked)} secrets leaked)")

    # --- Admin listener: a name other than its own in Host (a DNS-rebinding page) is refused
    #     before the token is looked at, on every path in every spelling the router reads as
    #     the same (421); only health and metrics at their exact paths answer any name. ---
    def admin_raw(method, path, host, body=b""):
        extra = f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n" if body else ""
        return raw(aport, f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {ADMIN['Authorization']}\r\n{extra}\r\n".encode() + body)
    foreign = f"rebind.attacker.example:{aport}"
    status, _ = admin_raw("GET", "//admin/v1/users/alice", f"127.0.0.1:{aport}")
    check("admin host: the router serves //admin/v1/… (so the check must cover it)", status == 200, f"({status})")
    for path in ["/admin/v1/users/alice", "//admin/v1/users/alice", "///admin/v1/users/alice", "/admin//v1/users/alice",
                 "//admin/v1/registrations", "//console/", "//console", "/console/", "//console/users?id=alice", "//metrics",
                 "/metrics/", "//healthz", "/nothing"]:
        status, answer = admin_raw("GET", path, foreign)
        check(f"admin host: {path} addressed to another name is 421", status == 421, f"({status} {answer[:120]!r})")
    status, _ = admin_raw("PUT", "//admin/v1/users/carol/block", foreign, b'{"type":"all","reason":"rebound"}')
    check("admin host: a block through //admin/… addressed to another name is 421", status == 421, f"({status})")
    status, _, answer = call(aport, "GET", "/admin/v1/users/carol", ADMIN)
    check("admin host: ... and carol is not blocked", status == 200 and json.loads(answer).get("block") is None, f"({status} {answer[:200]!r})")
    for path in ["/healthz", "/readyz", "/metrics"]:
        status, _ = admin_raw("GET", path, "scraper.internal")
        check(f"admin host: {path} answers any name (probes, scrapers)", status == 200, f"({status})")

    # --- 7. Bad configuration files: check-config names file and key, exits 1, never crashes. ---
    bad_configs = {
        "midtier.json": ["", "{", "[]", '{"listen": 8080}', '{"listen": "x:99999"}', '{"store": "mysql://x"}', '{"logLevel": "loud"}',
                         '{"maxRequestBodyBytes": -5}', '{"adminTokenHashes": ["plain"]}', '{"publicURL": "ftp://x"}', '{"a":' * 3000],
        "users.json": ['{"users": "x"}', '{"users": [{"id": ""}]}', '{"users": [{"id": "a", "passwordHash": 5}]}'],
        "apps/demo.json": ['{"authentication": {"type": "kerberos"}, "destinations": []}', '{"authentication": {"type": "jwt"}}',
                           '{"authentication": {"type": "basic"}, "destinations": "sf"}'],
        "destinations/fixed.json": [json.dumps({"Name": "fixed", "URL": "http://x", "Authentication": "NoAuthentication", "forwardDeviceCookies": listed})
                                    for listed in [["MYSAPSSO2"], ["allowed", "SAP_SESSIONID_ABC_100"], ["sap-usercontext"], ["mysapsso2"],
                                                   ["sap_sessionid_x"], ["X-SMP-APPCID"], ["a b"], [""], [5], ["allowed", "allowed"], "allowed"]]
                                   + ['{"Name": "fixed", "URL": "http://x", "Authentication": "NoAuthentication", "URL.queries.sap-client": "1", "URL.queries.SAP-CLIENT": "2"}'],
        "destinations/sf.json": ['{"Name": "sf", "URL": "http://x", "Authentication": "Magic"}', '{"Name": "sf", "URL": "http://x", "Authentication": "OAuth2SAMLBearerAssertion", "tokenServiceURL": "http://x", "clientKey": "k", "companyId": "c", "signingKey": "/etc/passwd", "signingCertificate": "/etc/hostname"}',
                                 '{"Name": "sf", "URL": "http://x", "Authentication": "BasicAuthentication", "User": "u", "Password": {"env": "MIDTIER_NO_SUCH_VAR"}}'],
    }
    for file, contents in bad_configs.items():
        for content in contents:
            broken = os.path.join(work, "broken")
            shutil.rmtree(broken, ignore_errors=True)
            shutil.copytree(config, broken)
            open(os.path.join(broken, file), "w").write(content)
            result = subprocess.run([BIN, "check-config", "--config", broken], cwd=REPO, capture_output=True, text=True, timeout=30)
            named = any(line.startswith(os.path.join(broken, file) + ":") for line in result.stdout.splitlines())
            check(f"config: {file} = {content[:40]!r}", result.returncode == 1 and named, f"(exit {result.returncode}: {result.stdout[:200]!r} {result.stderr[-200:]!r})")

    # --- 8. Failed sign-ins are throttled (last: it closes this address for a while). ---
    # Per user name: after a few failures, carol is refused at once with Retry-After, even with
    # her right password, while alice (already verified) is served as before.
    statuses = []
    for _ in range(8):
        status, headers, _ = call(mport, "POST", connections, {"Authorization": basic("carol", "wrong")}, b"{}")
        statuses.append((status, header(headers, "Retry-After")))
    check("throttle: repeated wrong passwords for one user turn into 429 with Retry-After",
          statuses[0][0] == 401 and statuses[-1][0] == 429 and (statuses[-1][1] or "").isdigit(), f"({statuses})")
    status, _, _ = call(mport, "GET", "/be/x", {"Authorization": alice, "X-SMP-APPCID": appcid})
    check("throttle: a verified user is still served from the same address", status == 200, f"({status})")
    # Many connections of wrong passwords for made-up names: each is answered (401, 429 or 503
    # with Retry-After), and past the address's free failures they are turned away at once.
    results = []
    def spray(n):
        status, headers, _ = call(mport, "POST", connections, {"Authorization": basic(f"spray{n}", "wrong")}, b"{}", timeout=60)
        results.append((status, header(headers, "Retry-After")))
    threads = [threading.Thread(target=spray, args=(n,)) for n in range(64)]
    for thread in threads: thread.start()
    for thread in threads: thread.join()
    turned_away = [r for r in results if r[0] in (429, 503)]
    check("throttle: 64 parallel wrong sign-ins are all answered 401/429/503",
          len(results) == 64 and all(r[0] in (401, 429, 503) for r in results), f"({sorted(set(r[0] for r in results))})")
    check("throttle: most are turned away with Retry-After instead of costing a bcrypt",
          len(turned_away) >= 64 - 21 - 4 and all((r[1] or "").isdigit() for r in turned_away), f"({len(turned_away)} turned away)")
    status, _, _ = call(mport, "GET", "/be/x", {"Authorization": alice, "X-SMP-APPCID": appcid})
    check("throttle: alice is still served while the address is closed", status == 200, f"({status})")
    # Admin tokens are throttled per address too: once the address's free failures (20) are
    # spent, 429. Guessed quickly, they may first meet the bcrypt budget of all clients
    # together (503, which records no failure): the guesser waits a little then, as a client
    # told `Retry-After` would, so the outcome does not depend on how fast this machine is.
    statuses = []
    for n in range(400):
        status = call(aport, "GET", "/admin/v1/destinations", {"Authorization": "Bearer wrong-" + str(n)})[0]
        statuses.append(status)
        if status == 429:
            break
        if status == 503:
            time.sleep(0.25)
    check("throttle: repeated wrong admin tokens are turned away with 429 once the address's free failures are spent",
          statuses[-1] == 429 and set(statuses) <= {401, 429, 503} and 1 <= statuses.count(401) <= 21,
          f"({len(statuses)} calls: {statuses.count(401)} x 401, {statuses.count(503)} x 503, last {statuses[-1]})")
    status, _, _ = call(aport, "GET", "/admin/v1/destinations", ADMIN)
    check("throttle: the verified admin token still works", status == 200, f"({status})")

    # --- Never a 500 from Midtier, never a crash. ---
    check("the server is still running", midtier.poll() is None)
    log.flush()
    text = open(os.path.join(work, "midtier.log"), "rb").read()
    check("no secret reached the log", all(secret not in text for secret in [b"alice-demo-password", b"bob-demo-password", b"kim-demo-password", ADMIN_TOKEN.encode(), TECH_PASSWORD.encode()]))
finally:
    kill_all(processes)
    shutil.rmtree(work, ignore_errors=True)

print()
check.finish()
