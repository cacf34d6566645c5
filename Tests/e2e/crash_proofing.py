#!/usr/bin/env python3
"""Issue 33 as an outside attacker tries it, against the real `midtier` binary: inputs that
crashed the process or let a device do what it must not, each with what must answer instead.

1. Storage key paths: 16 000 segments once killed the process (SIGSEGV); now 400. More than
   32 segments after the level is 400 naming 32; 32 are fine; keys plus the body's nesting
   stay within 100 levels.
2. Document names and keys: longer than 256 bytes is 400; names count in the user's 1 MiB
   (the admin user view's `storage[].size` is name + text bytes).
3. A zip log whose central directory points past the data once killed the process (SIGILL in
   ZIPFoundation): 400, as zip and as text/plain; 200 seeded single-byte mutations of a valid
   zip: never a 5xx, never a dead process.
4. Upload quotas count what is stored (a 10 KB zip of 99 999 lines is 413 with 1 MiB per
   registration); the stored size is what is reported; `clientUploads.maxStoredBytesPerUser`
   is a setting Midtier starts with.
5. An early answer (401) does not keep a trickled body's connection open.
6. Trace sampling is Midtier's decision: a caller's `traceparent` flagged sampled does not make
   300 requests exported at `samplingRatio` 0.001.
7. A push token never moves to another user silently (409), onboarding or SAP's push path.
8. Cross-site state changes on the device API are refused (Sec-Fetch-Site, Origin: 403);
   bodies a route does not take are 415.
9. A locked device cannot onboard again by respelling its DeviceId (case, spaces, zero-width
   and fullwidth characters).
10. Uploads record the registration's own device id; a far-future log entry is clamped.

Where the process dies (items 1 and 3 before the fix), the death is a failed check naming the
signal (and the fatal error and first frames the Swift runtime logged), and Midtier is started
again on the same store so that the later checks still say something. Lines starting `#` are
notes; those marked "not asserted" show behaviour the contract of issue 33 does not settle. No
assertion is about time: every wait polls with a generous deadline.

Usage: crash_proofing.py PATH-TO-MIDTIER. Prints `crash_proofing: N passed, M failed`; exits 1
on failure. Standard library, `opentelemetry-proto` (as tracing.py) and `cryptography` (as
push.py, for the push keys); loopback only; every process is stopped at the end.
"""
import datetime, http.client, http.server, io, json, os, random, re, shutil, signal, socket, socketserver, sqlite3
import subprocess, sys, tempfile, threading, time, zipfile
from harness import Checks, basic, demo_config, free_port, header, kill_all, wait_for

if len(sys.argv) != 2:
    sys.exit("usage: crash_proofing.py PATH-TO-MIDTIER")
BIN = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "standins"))
ADMIN = {"Authorization": "Bearer midtier-demo-admin-token"}
DEADLINE = 30          # seconds for anything that must happen
MiB = 1024 * 1024
processes = []
check = Checks("crash_proofing")
crashes = []           # (what was being done, exit status) of every death of a Midtier process


def note(text):
    print(f"#    {text}")


def call(port, method, path, headers=None, body=None, timeout=DEADLINE):
    """(status, headers with lower-case names, body) of one call on a fresh connection; status 0
    when there is no answer (the connection was closed or reset, or the process is gone)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    except (OSError, http.client.HTTPException) as error:
        return 0, {}, repr(error).encode()
    finally:
        connection.close()


def short(body, n=200):
    return body[:n] if isinstance(body, bytes) else str(body)[:n]


def message_of(body):
    """The message of an OData or JSON error body, else the body as text."""
    try:
        document = json.loads(body)
        if isinstance(document.get("error"), dict):
            message = document["error"].get("message")
            return message.get("value", "") if isinstance(message, dict) else str(message)
        return str(document.get("message", body.decode(errors="replace")))
    except (ValueError, AttributeError):
        return body.decode(errors="replace") if isinstance(body, bytes) else str(body)


def died(code):
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Midtier:
    """One `midtier serve` on `config`, started again on the same store when it dies."""

    def __init__(self, name, work, config, mport, aport):
        self.name, self.work, self.config, self.mport, self.aport = name, work, config, mport, aport
        self.log_path = os.path.join(work, f"{name}.log")
        self.process = None
        self.starts = 0

    def start(self):
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(f"\n--- start {self.starts} ---\n".encode())
        log.flush()
        self.process = subprocess.Popen([BIN, "serve", "--config", self.config], cwd=REPO, stdout=log, stderr=log)
        processes.append(self.process)
        return wait_for(f"http://127.0.0.1:{self.mport}/healthz", 60) and wait_for(f"http://127.0.0.1:{self.aport}/healthz", 20)

    def log_tail(self, n=600):
        return open(self.log_path, "rb").read()[-n:].decode(errors="replace")

    def crash_evidence(self):
        """What the Swift runtime wrote of the last crash: the fatal error or signal, and the
        crashed thread's first frames in Midtier's code or its packages."""
        text = open(self.log_path, "rb").read().decode(errors="replace").rsplit("--- start", 1)[-1]
        lines = [line.strip() for line in text.splitlines()
                 if "Fatal error" in line or "Program crashed" in line or "Segmentation" in line]
        crashed = text.split("\" crashed:", 1)[1].split("\nThread ", 1)[0] if "\" crashed:" in text else ""
        frames = re.findall(r"0x[0-9a-f]+ (.+?) \+ \d+ in midtier\S* at (/\S+?\.swift:\d+)", crashed)
        lines += [f"{function} at {place.split('/Sources/')[-1]}" for function, place in frames[:3]]
        return " | ".join(lines) or "no crash report in the log (a stack overflow leaves none)"

    def alive(self):
        """Whether the process runs and answers /healthz (polled: a dying process may still be
        exiting when this is asked)."""
        deadline = time.time() + DEADLINE
        while time.time() < deadline:
            if self.process.poll() is not None:
                return False
            if call(self.mport, "GET", "/healthz", timeout=5)[0] == 200:
                return self.process.poll() is None
            time.sleep(0.2)
        return False

    def survived(self, what):
        """Whether Midtier still runs after `what`; when it died, records how and starts it again."""
        if self.alive():
            return True
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        crashes.append((f"{self.name}: {what}", died(code)))
        note(f"midtier ({self.name}) DIED during {what}: {died(code)}; {self.crash_evidence()}")
        if code is None:
            self.process.kill()
            self.process.wait()
        if not self.start():
            note(f"midtier ({self.name}) did not start again: {self.log_tail()}")
        return False

    def stop(self):
        """SIGTERM (which flushes the trace exporter); the exit status."""
        self.process.terminate()
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def onboard(port, user, app="demo", body=None, headers=None, content_type="application/json"):
    """(status, registration id, answer headers, body) of `POST …/Connections` as `user`."""
    sent = {"Authorization": basic(user, f"{user}-demo-password")}
    if content_type:
        sent["Content-Type"] = content_type
    sent.update(headers or {})
    raw = body if isinstance(body, bytes) else json.dumps(body if body is not None else {"DeviceType": "iOS"}).encode()
    status, answer, text = call(port, "POST", f"/odata/applications/v1/{app}/Connections", sent, raw)
    return status, answer.get("x-smp-appcid", ""), answer, text


def as_user(user, cid=None, **more):
    headers = {"Authorization": basic(user, f"{user}-demo-password")}
    if cid:
        headers["X-SMP-APPCID"] = cid
    headers.update(more)
    return headers


def quote(text):
    import urllib.parse
    return urllib.parse.quote(text, safe="")


# ------------------------------------------------------------------------------------------------
# Items 1 and 2: Storage key paths, names and the user's quota.

def storage_items(m, alice_cid):
    root = "/mobileservices/Storage/v1/runtime/application/demo/currentuser"
    alice = as_user("alice", alice_cid, **{"Content-Type": "application/json"})

    # 1. The 16 000-segment key path that killed the process.
    status, _, body = call(m.mport, "PUT", root + "/d" + "/a" * 15999, alice, b"{}", timeout=60)
    note(f"PUT of a 16 000-segment key path answered {status} {short(body, 120)!r}")
    up = m.survived("PUT of a 16 000-segment Storage key path")
    check("1 a Storage PUT with 16 000 key path segments is 400", status == 400, f"({status} {short(body)!r})")
    check("1 and the process still answers /healthz after it (no crash)", up, f"({crashes[-1][1] if not up else ''})")

    # The same path by the other methods that write, and on the device level.
    for method, level in [("POST", "/currentuser"), ("PATCH", "/currentuser"), ("PUT", f"/device/{alice_cid}")]:
        status, _, body = call(m.mport, method, root.rsplit("/", 1)[0] + level + "/d" + "/a" * 15999, alice, b"{}", timeout=60)
        up = m.survived(f"{method} of a 16 000-segment key path on {level[1:].split('/')[0]}")
        check(f"1 a Storage {method} with 16 000 key path segments on {level[1:].split('/')[0]} is 400, and the process lives",
              status == 400 and up, f"({status} {short(body)!r}{'' if up else ', ' + crashes[-1][1]})")

    # 33 segments after the level (the name and 32 keys): 400 naming 32; 32 segments: 200.
    status, _, body = call(m.mport, "PUT", root + "/deep33" + "/k" * 32, alice, b"{}")
    check("1 a key path of 33 segments after currentuser/ is 400 naming 32",
          status == 400 and "32" in message_of(body), f"({status} {short(body)!r})")
    m.survived("PUT of a 33-segment key path")
    status, _, body = call(m.mport, "PUT", root + "/deep32" + "/k" * 31, alice, b"{}")
    check("1 a key path of 32 segments (the name and 31 keys) is 200", status == 200, f"({status} {short(body)!r})")
    status, _, body = call(m.mport, "GET", root + "/deep32" + "/k" * 31, alice)
    check("1 and reads back (200 {})", status == 200 and body.strip() == b"{}", f"({status} {short(body)!r})")

    def nested(depth):
        return ('{"n":' * depth + "1" + "}" * depth).encode()
    status, _, body = call(m.mport, "PUT", root + "/nest111" + "/k" * 31, alice, nested(80))
    check("1 31 keys and a body nested 80 deep (111 levels) is 400", status == 400, f"({status} {short(body)!r})")
    m.survived("PUT of 31 keys and a body nested 80 deep")
    status, _, body = call(m.mport, "GET", root + "/nest111", alice)
    if status >= 500 or status == 0:
        note(f"FINDING: GET of the document stored with 111 levels answers {status} {short(body)!r}")
    m.survived("GET of a document nested 111 levels")
    status, _, body = call(m.mport, "PUT", root + "/nest80" + "/k" * 19, alice, nested(60))
    check("1 20 keys and a body nested 60 deep (80 levels) is 200", status == 200, f"({status} {short(body)!r})")
    # The edge: 100 levels are kept whole; 101 were answered 200 and read back as {} (lost) before.
    status, _, body = call(m.mport, "PUT", root + "/nest100" + "/k" * 31, alice, nested(69))
    status_read, _, read = call(m.mport, "GET", root + "/nest100", alice)
    check("1 31 keys and a body nested 69 deep (100 levels) is 200 and reads back whole",
          status == 200 and status_read == 200 and read.count(b"{") == 100, f"({status} {status_read} {short(read, 80)!r})")
    status, _, body = call(m.mport, "PUT", root + "/nest101" + "/k" * 31, alice, nested(70))
    status_read, _, read = call(m.mport, "GET", root + "/nest101", alice)
    check("1 31 keys and a body nested 70 deep (101 levels) is 400, not a 200 whose document reads back empty",
          status == 400, f"({status}; read back {status_read} {short(read, 80)!r})")

    # 2. Names and keys of more than 256 bytes (UTF-8).
    for what, path in [("a document name of 257 bytes", "/" + "n" * 257),
                       ("a document name of 129 'é' (258 bytes, 129 characters)", "/" + quote("é" * 129)),
                       ("a key of 257 bytes", "/keyed/" + "k" * 257)]:
        status, _, body = call(m.mport, "PUT", root + path, alice, b'{"a":1}')
        check(f"2 {what} is 400", status == 400, f"({status} {short(body)!r})")
    status, _, body = call(m.mport, "PUT", root + "/" + "n" * 256, alice, b'{"a":1}')
    check("2 a document name of 256 bytes is 200", status == 200, f"({status} {short(body)!r})")
    status, _, body = call(m.mport, "PUT", root + "/keyed/" + "k" * 256, alice, b'{"a":1}')
    check("2 a key of 256 bytes is 200", status == 200, f"({status} {short(body)!r})")

    # The admin user view reports name + text bytes.
    status, _, body = call(m.mport, "PUT", root + "/" + "n" * 200, alice, b'{"a":1}')
    check("2 a document named with 200 n holding {\"a\":1} is stored (200)", status == 200, f"({status} {short(body)!r})")
    status, _, body = call(m.aport, "GET", "/admin/v1/users/alice", ADMIN)
    documents = json.loads(body).get("storage", []) if status == 200 else []
    sizes = [d.get("size") for d in documents if d.get("name") == "n" * 200]
    check("2 the admin user view's storage[].size of that document is 207 (200 name + 7 text bytes)", sizes == [207],
          f"({status} sizes {sizes})")

    # 300 PUTs with 70 000-byte names: each 400 (they would hold 21 MB of names).
    connection = None
    codes = {}
    for i in range(300):
        path = root + "/" + f"{i:05d}" + "n" * 69995
        for attempt in range(2):
            try:
                if connection is None:
                    connection = http.client.HTTPConnection("127.0.0.1", m.mport, timeout=DEADLINE)
                connection.request("PUT", path, body=b"{}", headers=alice)
                response = connection.getresponse()
                response.read()
                codes[response.status] = codes.get(response.status, 0) + 1
                if (response.getheader("Connection") or "").lower() == "close":
                    connection.close()
                    connection = None
                break
            except (OSError, http.client.HTTPException):
                if connection:
                    connection.close()
                connection = None
                if attempt == 1:
                    codes[0] = codes.get(0, 0) + 1
    if connection:
        connection.close()
    check("2 300 PUTs with 70 000-byte document names: each 400", codes == {400: 300}, f"({codes})")
    m.survived("300 PUTs with 70 000-byte names")


def quota_item(m):
    """The user's 1 MiB counts names: documents whose texts and names fill 1 MiB less 100 bytes
    leave no room for a 250-byte name (413), though its text alone would fit."""
    cid = onboard(m.mport, "quota", body={"DeviceType": "iOS", "DeviceId": "quota-1"},
                  headers={"Authorization": basic("quota", "alice-demo-password")})[1]
    root = "/mobileservices/Storage/v1/runtime/application/demo/currentuser"
    headers = {"Authorization": basic("quota", "alice-demo-password"), "X-SMP-APPCID": cid, "Content-Type": "application/json"}
    count, room = 17, MiB - 100
    names = [f"f{i:02d}" for i in range(count)]
    texts = room - sum(len(n) for n in names)
    statuses = []
    for i, name in enumerate(names):
        length = texts // count + (texts % count if i == count - 1 else 0)
        document = '{"x":"' + "a" * (length - 8) + '"}'
        assert len(document) == length
        statuses.append(call(m.mport, "PUT", f"{root}/{name}", headers, document.encode())[0])
    check("2 the quota user fills 1 MiB less 100 bytes (names and texts) with 17 documents (200 each)",
          statuses == [200] * count, f"({statuses})")
    status, _, body = call(m.mport, "PUT", f"{root}/{'s' * 50}", headers, b'{"a":1}')
    check("2 a 50-byte name with {\"a\":1} still fits (57 bytes: 200)", status == 200, f"({status} {short(body)!r})")
    status, _, body = call(m.mport, "PUT", f"{root}/{'q' * 250}", headers, b'{"a":1}')
    check("2 a 250-byte name with {\"a\":1} passes 1 MiB by its name (413; its 7 bytes of text alone would fit)",
          status == 413, f"({status} {short(body)!r})")


# ------------------------------------------------------------------------------------------------
# Items 3, 4 and 10: client log uploads.

LOG_LINE = "#2026-11-27T10:00:00.000Z#ERROR##src#loc#boom#\n"
LOGS = "/mobileservices/application/logapp/clientlogs/v1/runtime/log/application/logapp"


def zipped(name, text):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, text)
    return archive.getvalue()


def corrupted(data, field):
    """`data` (a zip of one file) with its central directory entry's `field` pointing past the
    end: `offset` (relative offset of the local header, at +42) or `size` (compressed size, +20)."""
    central = data.rfind(b"PK\x01\x02")
    position = central + (42 if field == "offset" else 20)
    value = len(data) + 4096 if field == "offset" else len(data) * 8
    return data[:position] + value.to_bytes(4, "little") + data[position + 4:]


def upload(m, headers, body, content_type, query=""):
    return call(m.mport, "POST", LOGS + query, dict(headers, **{"Content-Type": content_type}), body, timeout=120)


def zip_items(m, alice_log):
    valid = zipped("client.log", LOG_LINE)
    status, _, body = upload(m, alice_log, valid, "application/zip")
    check("3 a valid zip of one log line is 204", status == 204, f"({status} {short(body)!r})")
    for field, what in [("offset", "relative offset of the local header"), ("size", "compressed size")]:
        bad = corrupted(valid, field)
        for content_type in ("application/zip", "text/plain"):
            status, _, body = upload(m, alice_log, bad, content_type)
            note(f"zip with the {what} past the end, as {content_type}: {status} {short(body, 120)!r}")
            up = m.survived(f"a zip log whose {what} points past the end, as {content_type}")
            if field == "offset":
                check(f"3 a zip whose central directory's {what} points past the end, as {content_type}, is 400",
                      status == 400, f"({status} {short(body)!r})")
            else:
                # The contract names either corruption; this one never crashed (the entry is read by its local
                # header): 400 or 204, the status noted above, never a 5xx.
                check(f"3 a zip whose central directory's {what} points past the end, as {content_type}, is 400 or 204",
                      status in (400, 204), f"({status} {short(body)!r})")
            check(f"3 and the process still answers after it ({what}, {content_type})", up,
                  f"({crashes[-1][1] if not up else ''})")

    boundary = os.urandom(12).hex()
    multipart = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"client.zip\"\r\n"
                 "Content-Type: application/zip\r\n\r\n").encode() + corrupted(valid, "offset") + f"\r\n--{boundary}--\r\n".encode()
    status, _, body = upload(m, alice_log, multipart, f"multipart/form-data; boundary={boundary}")
    up = m.survived("a multipart log upload whose part is that corrupted zip")
    check("3 a multipart upload whose part is that corrupted zip is 400, and the process lives", status == 400 and up,
          f"({status} {short(body)!r}{'' if up else ', ' + crashes[-1][1]})")

    rng = random.Random(33)
    fives, dead, answers = [], [], {}
    for i in range(200):
        position = rng.randrange(len(valid))
        byte = rng.randrange(255)
        byte = byte if byte < valid[position] else byte + 1   # never the byte that is there
        mutant = valid[:position] + bytes([byte]) + valid[position + 1:]
        status, _, body = upload(m, alice_log, mutant, "application/zip")
        answers[status] = answers.get(status, 0) + 1
        if status >= 500:
            fives.append((i, position, byte, status, short(body, 120)))
        if status == 0 or m.process.poll() is not None:
            if not m.survived(f"mutation {i} (byte {position} set to {byte:#04x}) of a valid zip"):
                dead.append((i, position, byte, crashes[-1][1]))
                if len(dead) >= 2:
                    note("two deaths in the mutation loop: the loop stops here")
                    break
    note(f"mutation loop answers: {answers}")
    check("3 200 seeded single-byte mutations of a valid zip: no answer is 5xx", not fives, f"({fives[:5]})")
    check("3 and the process stayed up through the mutations", not dead and m.survived("the mutation loop"),
          f"(deaths at mutation, byte, value: {dead})")


def quota_upload_items(m, alice):
    """Item 4: what is stored counts; the reported size is what is stored."""
    _, big_cid, _, _ = onboard(m.mport, "alice", app="logapp", body={"DeviceType": "iOS", "DeviceId": "alice-quota-log"})
    lines = "".join("#2026-11-27T10:00:00Z#INFO####mmmmmmmmm#\n" for _ in range(99999))
    archive = zipped("big.log", lines)
    note(f"the zip of 99 999 lines: {len(archive)} bytes, {len(lines)} bytes inflated, {9 * 99999} bytes of messages")
    status, _, body = upload(m, as_user("alice", big_cid), archive, "application/zip")
    check("4 a ~10 KB zip of 99 999 log lines is 413 with maxStoredBytesPerRegistration 1 MiB",
          status == 413, f"({status} {short(body)!r})")
    m.survived("the upload of 99 999 lines")

    _, small_cid, _, _ = onboard(m.mport, "alice", app="logapp", body={"DeviceType": "iOS", "DeviceId": "alice-small-log"})
    message = "m" * 40
    small = zipped("small.log", "".join(f"#2026-11-27T10:00:00Z#INFO####{message}#\n" for _ in range(200)))
    status, _, body = upload(m, as_user("alice", small_cid), small, "application/zip")
    check("4 a small zipped upload is 204", status == 204, f"({status} {short(body)!r})")
    status, _, body = call(m.aport, "GET", f"/admin/v1/client-logs?registration={quote(small_cid)}&limit=500", ADMIN)
    entries = json.loads(body).get("entries", []) if status == 200 else []
    check("4 the admin client log listing has its 200 entries", status == 200 and len(entries) == 200, f"({status} {len(entries)})")
    reported = [e.get("upload", {}).get("size") for e in entries if "size" in e.get("upload", {})]
    source = "the admin listing's upload.size"
    if not reported:
        with sqlite3.connect(os.path.join(m.work, "midtier.sqlite")) as db:
            reported = [row[0] for row in db.execute("SELECT size FROM client_uploads WHERE registration_id = ?", (small_cid,))]
        source = "the store's client_uploads.size (the admin API's client-logs entries have no size)"
    note(f"the small upload: zip {len(small)} bytes, {40 * 200} bytes of messages; size reported by {source}: {reported[:1]}")
    check("4 the small upload's recorded size is what is stored: at least its message bytes, more than the zip",
          len(set(reported)) == 1 and reported[0] >= 40 * 200 and reported[0] > len(small), f"({source}: {reported[:3]})")


def device_id_items(m):
    """Item 10: the registration's own device id; a far-future entry clamped."""
    status, cid, _, body = onboard(m.mport, "alice", app="logapp", body={"DeviceType": "iOS"})
    check("10 alice onboards a registration without a DeviceId", status == 201 and cid, f"({status} {short(body)!r})")
    headers = as_user("alice", cid)
    status, _, body = upload(m, headers, b"#2026-11-27T10:00:00Z#ERROR###src#from someone else's device#\n", "text/plain",
                             "?deviceId=someone-else")
    check("10 its upload with ?deviceId=someone-else is accepted (204)", status == 204, f"({status} {short(body)!r})")
    status, _, body = call(m.aport, "GET", f"/admin/v1/client-logs?registration={quote(cid)}", ADMIN)
    entries = json.loads(body).get("entries", []) if status == 200 else []
    devices = [e.get("upload", {}).get("deviceId") for e in entries]
    check("10 the admin listing shows that upload's deviceId as \"\" (the registration's), not someone-else",
          status == 200 and devices == [""], f"({status} {devices})")

    status, _, body = upload(m, headers, b"#9999-12-31T00:00:00Z#ERROR###src#far-future entry#\n", "text/plain")
    check("10 an upload with an entry dated 9999-12-31 is accepted (204)", status == 204, f"({status} {short(body)!r})")
    status, _, body = call(m.aport, "GET", f"/admin/v1/client-logs?registration={quote(cid)}&text=far-future", ADMIN)
    entries = json.loads(body).get("entries", []) if status == 200 else []

    def parsed(text):
        try:
            return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except (ValueError, AttributeError):
            return None
    times = [(parsed(e.get("time")), parsed(e.get("upload", {}).get("receivedAt"))) for e in entries]
    check("10 the far-future entry is stored dated no later than a day after the upload was received",
          len(times) == 1 and None not in times[0] and times[0][0] <= times[0][1] + datetime.timedelta(days=1),
          f"({status} {[(e.get('time'), e.get('upload', {}).get('receivedAt')) for e in entries]})")
    status, _, body = call(m.aport, "GET", "/admin/v1/client-logs?limit=1", ADMIN)
    first = (json.loads(body).get("entries") or [{}])[0] if status == 200 else {}
    latest = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=2)
    when = parsed(first.get("time"))
    check("10 so the newest-first listing does not start with a far-future entry",
          when is not None and when <= latest, f"({status} {first.get('time')} {short(first.get('message'), 60)!r})")


# ------------------------------------------------------------------------------------------------
# Items 7, 8 and 9: onboarding.

def push_items(m):
    token = os.urandom(32).hex()
    connection = lambda user, cid: f"/odata/applications/v1/demo/Connections('{cid}')?$format=json"

    def token_of(user, cid):
        status, _, body = call(m.mport, "GET", connection(user, cid), as_user(user, cid, Accept="application/json"))
        try:
            document = json.loads(body)
            return (document.get("d", document)).get("ApnsDeviceToken")
        except (ValueError, AttributeError):
            return f"<{status} {short(body, 80)!r}>"

    status, alice1, _, body = onboard(m.mport, "alice", body={"DeviceType": "iOS", "DeviceId": "alice-push-1", "ApnsDeviceToken": token})
    check("7 alice onboards with an ApnsDeviceToken (201)", status == 201 and token_of("alice", alice1) == token, f"({status} {short(body)!r})")
    status, bob0, _, body = onboard(m.mport, "bob", body={"DeviceType": "iOS", "DeviceId": "bob-push-0"})
    check("7 bob onboards without a token (201)", status == 201, f"({status} {short(body)!r})")
    status, bob1, _, body = onboard(m.mport, "bob", body={"DeviceType": "iOS", "DeviceId": "bob-push-1", "ApnsDeviceToken": token})
    check("7 bob onboarding with alice's ApnsDeviceToken is 409", status == 409, f"({status} {short(body)!r})")
    held = token_of("alice", alice1)
    check("7 alice's registration keeps its token", held == token, f"({held!r})")
    status, _, body = call(m.mport, "PUT", f"/mobileservices/push/v1/runtime/applications/demo/os/ios/devices/{bob0}",
                           as_user("bob", bob0, **{"Content-Type": "application/json"}), json.dumps({"pushToken": token}).encode())
    check("7 bob setting alice's token through SAP's push path (PUT …/os/ios/devices/{id}) is 409", status == 409,
          f"({status} {short(body)!r})")
    held = token_of("alice", alice1)
    check("7 alice's registration still keeps its token", held == token, f"({held!r})")
    status, _, body = call(m.mport, "PUT", f"/mobileservices/push/v1/runtime/applications/demo/os/ios/devices/{bob0}",
                           as_user("bob", bob0, **{"Content-Type": "application/json"}), json.dumps({"pushToken": os.urandom(32).hex()}).encode())
    check("7 bob setting a token of his own through the push path is 200", status == 200, f"({status} {short(body)!r})")
    status, alice2, _, body = onboard(m.mport, "alice", body={"DeviceType": "iOS", "DeviceId": "alice-push-2", "ApnsDeviceToken": token})
    check("7 alice onboarding a second registration with the same token is 201", status == 201, f"({status} {short(body)!r})")
    check("7 and the token moved to it: the first registration lost it",
          token_of("alice", alice2) == token and token_of("alice", alice1) in ("", None),
          f"({token_of('alice', alice2)!r} {token_of('alice', alice1)!r})")
    status, _, body = call(m.mport, "PUT", f"/odata/applications/v1/demo/Connections('{bob0}')",
                           as_user("bob", bob0, **{"Content-Type": "application/json"}),
                           json.dumps({"DeviceId": "bob-push-0", "ApnsDeviceToken": token}).encode())
    note(f"(not asserted, beyond the contract) bob's PUT of his own Connection with alice's ApnsDeviceToken answers {status}; "
         f"alice's registration then holds {'her token' if token_of('alice', alice2) == token else 'no token'}")


def cross_site_items(m):
    device = lambda n: {"DeviceType": "iOS", "DeviceId": f"carol-x-{n}"}
    for n, (what, headers) in enumerate([("Sec-Fetch-Site: cross-site", {"Sec-Fetch-Site": "cross-site"}),
                                         ("Origin: https://evil.example", {"Origin": "https://evil.example"})]):
        status, _, _, body = onboard(m.mport, "carol", body=device(n), headers=headers)
        check(f"8 onboarding with {what} is 403", status == 403, f"({status} {short(body)!r})")
    cid = ""
    for n, (what, headers) in enumerate([("Sec-Fetch-Site: same-origin", {"Sec-Fetch-Site": "same-origin"}),
                                         ("Sec-Fetch-Site: none", {"Sec-Fetch-Site": "none"}),
                                         ("neither header (a native app)", {})], start=2):
        status, cid, _, body = onboard(m.mport, "carol", body=device(n), headers=headers)
        check(f"8 onboarding with {what} is 201", status == 201, f"({status} {short(body)!r})")
    status, _, _, body = onboard(m.mport, "carol", body=json.dumps(device(5)).encode(), content_type="text/plain")
    check("8 onboarding with Content-Type text/plain (JSON text as body) is 415", status == 415, f"({status} {short(body)!r})")
    atom = ("<?xml version='1.0' encoding='utf-8'?><entry xmlns=\"http://www.w3.org/2005/Atom\" "
            "xmlns:d=\"http://schemas.microsoft.com/ado/2007/08/dataservices\" "
            "xmlns:m=\"http://schemas.microsoft.com/ado/2007/08/dataservices/metadata\">"
            "<content type=\"application/xml\"><m:properties><d:DeviceType>iOS</d:DeviceType>"
            "<d:DeviceId>carol-x-atom</d:DeviceId></m:properties></content></entry>").encode()
    status, _, _, body = onboard(m.mport, "carol", body=atom, content_type="application/atom+xml")
    check("8 onboarding with an Atom entry (application/atom+xml) is still 201", status == 201, f"({status} {short(body)!r})")
    status, _, _, body = onboard(m.mport, "carol", body=json.dumps(device(7)).encode(), content_type=None)
    note(f"(not asserted) onboarding with a JSON body and no Content-Type at all answers {status}")
    status, _, _, body = onboard(m.mport, "carol", body=json.dumps(device(8)).encode(), content_type="application/x-www-form-urlencoded")
    note(f"(not asserted) onboarding with a JSON body as application/x-www-form-urlencoded (what urllib sends by default, "
         f"as hostile.py, identity.py, instances.py and tracing.py onboard) answers {status}")
    status, victim, _, _ = onboard(m.mport, "carol", body=device(9))
    status, _, body = call(m.mport, "POST", f"/mobileservices/me/registrations/{victim}/wipe",
                           as_user("carol", **{"Sec-Fetch-Site": "cross-site"}))
    note(f"(not asserted, beyond the contract) a self-service wipe with Sec-Fetch-Site: cross-site answers {status}")

    root = "/mobileservices/Storage/v1/runtime/application/demo/currentuser"
    carol = as_user("carol", cid, **{"Content-Type": "application/json"})
    for method in ("POST", "PUT"):
        status, _, body = call(m.mport, method, f"{root}/xsite{method}", dict(carol, **{"Sec-Fetch-Site": "cross-site"}), b'{"a":1}')
        check(f"8 a Storage {method} with Sec-Fetch-Site: cross-site is 403", status == 403, f"({status} {short(body)!r})")
    status, _, body = call(m.mport, "PUT", f"{root}/plain", dict(carol, **{"Content-Type": "text/plain"}), b'{"a":1}')
    check("8 a Storage PUT with Content-Type text/plain is 415", status == 415, f"({status} {short(body)!r})")
    status, _, body = call(m.mport, "PUT", f"{root}/native", carol, b'{"a":1}')
    check("8 a Storage PUT as a native app sends it (application/json, no Sec-Fetch-Site) is 200", status == 200,
          f"({status} {short(body)!r})")
    status, _, body = call(m.mport, "GET", f"{root}/xsitePUT", carol)
    check("8 nothing was stored by the cross-site PUT (404)", status == 404, f"({status} {short(body)!r})")


def lock_items(m):
    status, cid, _, body = onboard(m.mport, "bob", body={"DeviceType": "iOS", "DeviceId": "bob-dev-1"})
    check("9 bob onboards bob-dev-1", status == 201 and cid, f"({status} {short(body)!r})")
    status, _, body = call(m.aport, "POST", f"/admin/v1/registrations/{quote(cid)}/lock", ADMIN)
    check("9 the admin locks it (POST /admin/v1/registrations/{id}/lock: 200)", status == 200, f"({status} {short(body)!r})")
    for what, spelling in [("bob-dev-1", "bob-dev-1"), ("BOB-DEV-1", "BOB-DEV-1"), ("'bob-dev-1 ' (trailing space)", "bob-dev-1 "),
                           ("' bob-dev-1' (leading space)", " bob-dev-1"), ("bob-dev-1 + U+200B zero-width space", "bob-dev-1\u200b"),
                           ("fullwidth ｂｏｂ-dev-1", "\uff42\uff4f\uff42-dev-1")]:
        status, _, answer, body = onboard(m.mport, "bob", body={"DeviceType": "iOS", "DeviceId": spelling})
        check(f"9 bob onboarding again as {what} is 403 TRAFFIC_REG_LOCKED",
              status == 403 and answer.get("x-message-code") == "TRAFFIC_REG_LOCKED",
              f"({status} {answer.get('x-message-code')} {short(body)!r})")
    status, other, _, body = onboard(m.mport, "bob", body={"DeviceType": "iOS", "DeviceId": "bob-dev-2"})
    check("9 a genuinely different device bob-dev-2 is 201", status == 201, f"({status} {short(body)!r})")
    status, answer, body = call(m.mport, "PUT", f"/odata/applications/v1/demo/Connections('{other}')",
                                as_user("bob", other, **{"Content-Type": "application/json"}), json.dumps({"DeviceId": "BOB-DEV-1"}).encode())
    note(f"(not asserted, beyond the contract) bob's PUT moving bob-dev-2's registration to DeviceId BOB-DEV-1 answers {status} "
         f"{answer.get('x-message-code') or ''} (docs/identity.md: moving onto a locked DeviceId is 403)")


# ------------------------------------------------------------------------------------------------
# Items 5 and 6: a second Midtier with tracing and a short body timeout.

class Collected:
    lock = threading.Lock()
    spans = []     # (trace id, span kind, route, status)


class Collector(http.server.BaseHTTPRequestHandler):
    """A stand-in OTLP/HTTP collector (as tracing.py's): POST /v1/traces, protobuf."""

    def do_POST(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with Collected.lock:
            for resource_spans in request.resource_spans:
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        attrs = {a.key: (a.value.string_value or a.value.int_value) for a in span.attributes}
                        Collected.spans.append((span.trace_id.hex(), span.kind, attrs.get("http.route"),
                                                attrs.get("http.response.status_code")))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class Backend(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b'{"d":{"ok":true}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(handler):
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def trickled_body(port, result):
    """Item 5: a POST without credentials announcing 1 000 000 bytes, trickled a byte every
    half second: the answer, then whether Midtier closes the connection (polled for DEADLINE)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    s.sendall(b"POST /echo/x HTTP/1.1\r\nHost: localhost\r\nX-SMP-APPID: demo\r\nX-SMP-DEVICEID: trickler\r\n"
              b"Content-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\nx")
    received = b""
    start = time.time()
    try:
        s.settimeout(0.5)
        while time.time() - start < DEADLINE:
            try:
                chunk = s.recv(65536)
                if not chunk:
                    result["closed"] = True
                    break
                received += chunk
                if b"\r\n\r\n" in received and "answered" not in result:
                    result["answered"] = time.time() - start
            except socket.timeout:
                pass
            if result.get("answered") and not result.get("closed") and time.time() - start > 15 and "open_at_15" not in result:
                result["open_at_15"] = True
            try:
                s.sendall(b"x")
                result["sent"] = result.get("sent", 1) + 1
            except OSError:
                result["closed"] = True
                break
    except OSError:
        result["closed"] = True
    finally:
        s.close()
    result["status"] = int(received[9:12]) if received.startswith(b"HTTP/1.1 ") else 0


def tracing_items(work):
    collector = serve(Collector)
    backend = serve(Backend)
    mport, aport = free_port(), free_port()
    tracing = {"endpoint": f"http://127.0.0.1:{collector.server_address[1]}/v1/traces", "samplingRatio": 0.001,
               "serviceName": "crash-proofing"}
    folder = os.path.join(work, "traced")
    os.makedirs(folder)
    config = demo_config(REPO, folder, mport, aport, tracing=tracing, requestBodyTimeoutSeconds=2)
    json.dump({"Name": "be", "URL": f"http://127.0.0.1:{backend.server_address[1]}/base", "Authentication": "NoAuthentication",
               "timeout": 20000}, open(os.path.join(config, "destinations", "be.json"), "w"))
    app_path = os.path.join(config, "apps", "demo.json")
    json.dump(dict(json.load(open(app_path)), destinations=["sf", "be"]), open(app_path, "w"))
    m = Midtier("traced", folder, config, mport, aport)
    started = m.start()
    check("5/6 a Midtier with tracing (samplingRatio 0.001) and requestBodyTimeoutSeconds 2 starts", started, m.log_tail())
    if not started:
        return
    status, cid, _, _ = onboard(mport, "alice", body={"DeviceType": "iOS", "DeviceId": "alice-traced"})

    # 5. In a thread while the traced requests run.
    trickle = {}
    trickler = threading.Thread(target=trickled_body, args=(mport, trickle))
    trickler.start()

    # 6. 300 requests whose traceparent the old rule samples (the trace id's low 8 bytes are 0).
    sent = {"healthz": [], "unauthenticated": [], "authenticated": []}
    answers = {}
    for i in range(300):
        trace = os.urandom(8).hex() + "0" * 16
        kind = ["healthz", "unauthenticated", "authenticated"][i % 3]
        headers = {"traceparent": f"00-{trace}-{os.urandom(8).hex()}-01"}
        if kind == "authenticated":
            headers.update(as_user("alice", cid))
        elif kind == "unauthenticated":
            headers.update({"X-SMP-APPID": "demo", "X-SMP-DEVICEID": "no-credentials"})
        path = "/healthz" if kind == "healthz" else "/be/odata/x?$format=json"
        status = call(mport, "GET", path, headers)[0]
        answers[(kind, status)] = answers.get((kind, status), 0) + 1
        sent[kind].append(trace)
    check("6 the 300 requests answer as usual (healthz 200, without credentials 401, alice 200)",
          answers == {("healthz", 200): 100, ("unauthenticated", 401): 100, ("authenticated", 200): 100}, f"({answers})")

    trickler.join()
    if trickle.get("open_at_15"):
        note("the trickled body's connection was still open 15 s after the 401")
    note(f"trickled body: answered {trickle.get('status')} after {trickle.get('answered')}, closed {trickle.get('closed', False)}, "
         f"{trickle.get('sent')} bytes sent")
    check("5 a POST announcing 1 000 000 bytes without credentials is answered 401 at once", trickle.get("status") == 401,
          f"({trickle})")
    check(f"5 then Midtier closes the connection while the body trickles a byte every 0.5 s (polled {DEADLINE} s)",
          trickle.get("closed", False), f"({trickle})")

    code = m.stop()      # flushes the exporter
    check("6 SIGTERM stops the traced Midtier with exit code 0", code == 0, f"({died(code)}: {m.log_tail()})")
    count, stable_since, deadline = -1, time.time(), time.time() + DEADLINE
    while time.time() < deadline and time.time() - stable_since < 2:
        time.sleep(0.2)
        with Collected.lock:
            now = len(Collected.spans)
        if now != count:
            count, stable_since = now, time.time()
    with Collected.lock:
        spans = list(Collected.spans)
    collector.shutdown()
    backend.shutdown()
    exported = {kind: len({trace for trace, span_kind, _, _ in spans if span_kind == 2 and trace in set(traces)})
                for kind, traces in sent.items()}
    servers = sum(1 for _, kind, _, _ in spans if kind == 2)
    note(f"exported server spans: {servers} in all; of the 300 chosen traces: {exported}")
    check("6 of 300 requests whose traceparent asks for sampling, at most 10 are exported (samplingRatio 0.001)",
          servers <= 10 and sum(exported.values()) <= 10, f"({servers} server spans, by kind {exported})")
    unauthenticated = exported["healthz"] + exported["unauthenticated"]
    check("6 of the 200 unauthenticated ones, none exported by the caller's choice (at most 3: Midtier's own 0.2 expected)",
          unauthenticated <= 3, f"({exported})")


def stored_per_user_item(work):
    """Item 4: `clientUploads.maxStoredBytesPerUser` is accepted: check-config passes and Midtier starts."""
    mport, aport = free_port(), free_port()
    folder = os.path.join(work, "per-user")
    os.makedirs(folder)
    uploads = {"maxUploadBytes": MiB, "maxStoredBytesPerRegistration": MiB, "maxStoredBytesPerUser": 4 * MiB}
    config = demo_config(REPO, folder, mport, aport, clientUploads=uploads)
    result = subprocess.run([BIN, "check-config", "--config", config], cwd=REPO, capture_output=True, text=True, timeout=120)
    check("4 check-config accepts clientUploads.maxStoredBytesPerUser", result.returncode == 0,
          f"({result.returncode}: {(result.stdout + result.stderr).strip()[-300:]})")
    m = Midtier("per-user", folder, config, mport, aport)
    started = m.start()
    check("4 Midtier starts with clientUploads.maxStoredBytesPerUser", started and m.process.poll() is None, f"({m.log_tail(300)})")
    m.stop()


# ------------------------------------------------------------------------------------------------

def main_config(work, mport, aport):
    uploads = {"maxUploadBytes": MiB, "maxStoredBytesPerRegistration": MiB, "maxUploadsPerHour": 100000}
    config = demo_config(REPO, work, mport, aport, clientUploads=uploads)
    apps = os.path.join(config, "apps")
    demo = json.load(open(os.path.join(apps, "demo.json")))
    json.dump(dict(demo, logSettings={"logEnabled": True, "logLevel": "WARN"}), open(os.path.join(apps, "logapp.json"), "w"))
    import keys
    k = keys.generate(os.path.join(work, "keys"))
    demo["push"] = {"apns": {"teamId": k["team"], "keyId": k["apns_key_id"], "key": {"file": k["apns_p8"]},
                             "topic": "com.example.midtier.crash", "environment": "sandbox",
                             "endpoint": f"https://127.0.0.1:{free_port()}", "caFile": k["ca"]}}
    json.dump(demo, open(os.path.join(apps, "demo.json"), "w"))
    users_path = os.path.join(config, "users.json")
    users = json.load(open(users_path))
    alice_hash = next(u["passwordHash"] for u in users["users"] if u["id"] == "alice")
    users["users"].append({"id": "quota", "passwordHash": alice_hash})   # password alice-demo-password
    json.dump(users, open(users_path, "w"))
    return config


def main():
    work = tempfile.mkdtemp(prefix="midtier-crash-")
    try:
        mport, aport = free_port(), free_port()
        m = Midtier("main", work, main_config(work, mport, aport), mport, aport)
        started = m.start()
        check("midtier starts (demo with push, logapp with logs, clientUploads of 1 MiB)", started, m.log_tail())
        if not started:
            return
        status, alice_cid, _, body = onboard(mport, "alice", body={"DeviceType": "iOS", "DeviceId": "alice-storage"})
        check("alice onboards in demo", status == 201 and alice_cid, f"({status} {short(body)!r})")
        storage_items(m, alice_cid)
        quota_item(m)
        lock_items(m)
        push_items(m)
        cross_site_items(m)
        status, log_cid, _, body = onboard(mport, "alice", app="logapp", body={"DeviceType": "iOS", "DeviceId": "alice-log"})
        check("alice onboards in logapp (logEnabled)", status == 201 and log_cid, f"({status} {short(body)!r})")
        zip_items(m, as_user("alice", log_cid))
        device_id_items(m)
        quota_upload_items(m, as_user("alice", log_cid))
        check("the main Midtier is running at the end", m.survived("the end"))
        m.stop()
        stored_per_user_item(work)
        tracing_items(work)
        if crashes:
            note("deaths of Midtier during this run:")
            for what, how in crashes:
                note(f"  {how}: {what}")
        check("Midtier never died during the run", not crashes, f"({len(crashes)} deaths)")
    finally:
        kill_all(processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        kill_all(processes)
    check.finish()
