#!/usr/bin/env python3
"""Slow and idle clients against the real `midtier` binary (docs/operations.md, "Slow and idle
clients"), with small limits so that it stays quick: connections that send half a request head
(two hundred of them, and one trickling a byte at a time), request bodies announced and never
sent, idle keep-alive connections, on both listeners, are closed by Midtier; more connections
than the cap from one address are refused; and meanwhile real clients are served, a proxied
call held by a slow back end is not cut, a large upload the back end reads late and a large
download the device reads late arrive whole. Midtier's open descriptors come back down.

No assertion is about time: every wait polls for what must happen, with a generous deadline.
A half-sent head that Midtier has closed serves as the clock that says "the limits have passed".

Usage: slow_clients.py PATH-TO-MIDTIER. Prints `slow_clients: N passed, M failed`; exits 1 on failure.
"""
import http.client, http.server, json, os, selectors, shutil, socket, socketserver, subprocess, sys, tempfile, threading, time
from harness import Checks, basic, demo_config, free_port, kill_all, wait_for

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CAP = 8                       # maxConnectionsPerAddress
LIMITS = {"requestHeadTimeoutSeconds": 2, "idleTimeoutSeconds": 2, "requestBodyTimeoutSeconds": 2,
          "maxConnectionsPerAddress": CAP}
DEADLINE = 45                 # seconds to wait for anything that must happen
UPLOAD = 32 * 1024 * 1024     # more than every socket buffer between the device and the back end
DOWNLOAD = 32 * 1024 * 1024
SECRET = b"slow-client-secret-cookie"

check = Checks("slow_clients")
processes = []
held = {"count": 0, "release": threading.Event()}
upload = {"arrived": threading.Event(), "release": threading.Event(), "read": 0}
download = {"written": 0}


class Backend(http.server.BaseHTTPRequestHandler):
    """A stand-in back end: `/base/hold` answers once released, `/base/upload` starts reading its
    body once released, `/base/big` answers DOWNLOAD bytes."""
    protocol_version = "HTTP/1.1"

    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/base/hold"):
            held["count"] += 1
            held["release"].wait(DEADLINE * 3)
            self.answer(b'{"held":true}')
        elif self.path.startswith("/base/big"):
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(DOWNLOAD))
            self.end_headers()
            piece = b"d" * 65536
            for _ in range(DOWNLOAD // len(piece)):
                self.wfile.write(piece)
                download["written"] += len(piece)
        else:
            self.answer(b'{"ok":true}')

    def do_POST(self):
        upload["arrived"].set()
        upload["release"].wait(DEADLINE * 3)
        remaining = int(self.headers.get("Content-Length") or 0)
        while remaining:
            chunk = self.rfile.read(min(remaining, 65536))
            if not chunk:
                break
            upload["read"] += len(chunk)
            remaining -= len(chunk)
        self.answer(json.dumps({"bytes": upload["read"]}).encode())

    def log_message(self, *args):
        pass


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def server_bind(self):
        # Small buffers, so that a back end that does not read stops the upload early.
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        super().server_bind()

    def handle_error(self, request, client_address):
        pass


def connect(port, source):
    """A TCP connection to Midtier from the loopback address `source` (all of 127/8 is loopback,
    so each source is another client address)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def watch(sockets, seconds=DEADLINE):
    """Reads every socket until Midtier closes it (end of stream or reset) or `seconds` pass;
    returns {socket: (closed, bytes received)}."""
    received = {s: b"" for s in sockets}
    closed = set()
    selector = selectors.DefaultSelector()
    for s in sockets:
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ)
    deadline = time.time() + seconds
    while len(closed) < len(sockets) and time.time() < deadline:
        for key, _ in selector.select(timeout=0.5):
            s = key.fileobj
            try:
                data = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                received[s] += data
            else:
                closed.add(s)
                selector.unregister(s)
    selector.close()
    return {s: (s in closed, received[s]) for s in sockets}


def half_head(port, source, path="/healthz"):
    s = connect(port, source)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nCookie: ".encode() + SECRET)
    return s


def clock(port):
    """Waits until Midtier closes a connection that sent half a head: the head limit has
    passed since this was called. Whether it did."""
    s = half_head(port, "127.0.0.99")
    closed = watch([s])[s][0]
    s.close()
    return closed


def get(port, path, headers=None, source="127.0.0.1", method="GET", body=None):
    """(status, body) of one call over a fresh connection; (0, error) when there is none."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE, source_address=(source, 0))
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as error:
        return 0, repr(error).encode()
    finally:
        connection.close()


def answer_of(s, seconds=DEADLINE):
    """(status, body length) of the one answer on blocking socket `s`, read whole."""
    s.setblocking(True)
    s.settimeout(seconds)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return 0, 0
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(fields.get("content-length", "0"))
        received = len(body)
        while received < length:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            received += len(chunk)
        return int(lines[0][9:12]), received
    except (OSError, ValueError):
        return 0, 0


def descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


work = tempfile.mkdtemp(prefix="midtier-slow-")
try:
    backend_port = free_port()
    backend = ThreadingServer(("127.0.0.1", backend_port), Backend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()

    mport, aport = free_port(), free_port()
    config = demo_config(REPO, work, mport, aport, logLevel="debug", maxRequestBodyBytes=2 * UPLOAD, **LIMITS)
    json.dump({"Name": "be", "URL": f"http://127.0.0.1:{backend_port}/base", "Authentication": "NoAuthentication",
               "timeout": DEADLINE * 3000}, open(os.path.join(config, "destinations", "be.json"), "w"))
    app = json.load(open(os.path.join(config, "apps", "demo.json")))
    app["destinations"] = ["sf", "be"]
    json.dump(app, open(os.path.join(config, "apps", "demo.json"), "w"))
    log_path = os.path.join(work, "midtier.log")
    log = open(log_path, "wb")
    midtier = subprocess.Popen([BIN, "serve", "--config", config], cwd=REPO, stdout=log, stderr=log)
    processes.append(midtier)
    if not (wait_for(f"http://127.0.0.1:{mport}/healthz", 60) and wait_for(f"http://127.0.0.1:{aport}/healthz", 10)):
        log.flush()
        print("midtier did not start:", open(log_path, "rb").read().decode(errors="replace")[-2000:])
        check("midtier starts with the connection limits configured", False)
        kill_all(processes)
        check.finish()
    alice = basic("alice", "alice-demo-password")
    # Onboard first: the store opens its files on first use, which is not what is counted below.
    connection = http.client.HTTPConnection("127.0.0.1", mport, timeout=DEADLINE)
    connection.request("POST", "/odata/applications/v1/demo/Connections", body=b"{}",
                       headers={"Authorization": alice, "Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    appcid = response.getheader("X-SMP-APPCID")
    connection.close()
    call = f"Authorization: {alice}\r\nX-SMP-APPCID: {appcid}\r\n"
    status, _ = get(mport, "/be/x", {"Authorization": alice, "X-SMP-APPCID": appcid})
    check("alice onboards and calls the back end", status == 200, f"({status})")

    # --- 1. No credentials: half heads, a trickled head, bodies never sent, idle keep-alive,
    #        on both listeners; a real client is served meanwhile. ---
    before = descriptors(midtier.pid)
    heads = [half_head(mport, f"127.0.0.{10 + n // CAP}") for n in range(200)]        # CAP per address
    admin_heads = [half_head(aport, "127.0.0.40", "/admin/v1/destinations") for _ in range(CAP)]
    bodies = []
    for port, path, sent in [(mport, "/odata/applications/v1/demo/Connections", b""),
                             (mport, "/odata/applications/v1/demo/Connections", b'{"DeviceType":"iOS",'),
                             (aport, "/admin/v1/reload", b"")]:
        s = connect(port, "127.0.0.41")
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  f"Content-Length: 16000\r\n\r\n".encode() + sent)
        bodies.append(s)
    idle = []
    for port in (mport, aport):
        s = connect(port, "127.0.0.42")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        idle.append(s)
    trickled = {"closed": False, "bytes": 0}

    def trickle():
        """One byte of a head that never ends every half second, until Midtier closes."""
        s = half_head(mport, "127.0.0.43")
        end = time.time() + DEADLINE
        try:
            while time.time() < end:
                s.sendall(b"a")
                trickled["bytes"] += 1
                s.settimeout(0.5)
                try:
                    if s.recv(65536) == b"":
                        trickled["closed"] = True
                        return
                except socket.timeout:
                    pass
        except OSError:
            trickled["closed"] = True
        finally:
            s.close()
    trickler = threading.Thread(target=trickle)
    trickler.start()

    status, _ = get(mport, "/healthz")
    check("meanwhile a real client is served: GET /healthz", status == 200, f"({status})")
    status, _ = get(mport, "/odata/applications/v1/demo/Connections", {"Authorization": alice, "Content-Type": "application/json"},
                    method="POST", body=b"{}")
    check("meanwhile a real client is served: alice onboards", status == 201, f"({status})")
    status, _ = get(aport, "/healthz")
    check("meanwhile the admin listener serves a real client", status == 200, f"({status})")
    during = descriptors(midtier.pid)

    seen = watch(heads + admin_heads + bodies + idle)
    trickler.join()
    check("200 connections that sent half a head are closed by Midtier",
          all(seen[s][0] for s in heads), f"({sum(seen[s][0] for s in heads)} of 200 closed)")
    check("the half heads got no answer", all(seen[s][1] == b"" for s in heads))
    check("on the admin listener too", all(seen[s][0] for s in admin_heads), f"({sum(seen[s][0] for s in admin_heads)} of {CAP} closed)")
    check("a head trickled a byte at a time is closed", trickled["closed"], f"({trickled['bytes']} bytes sent)")
    for s, name in zip(bodies, ["a sign-in POST announcing 16000 bytes and sending none",
                                "a sign-in POST announcing 16000 bytes and sending 20",
                                "an admin POST announcing 16000 bytes and sending none"]):
        check(f"{name} is closed", seen[s][0])
    for s, name in zip(idle, ["listen", "adminListen"]):
        check(f"an idle keep-alive connection on {name} is answered, then closed",
              seen[s][0] and seen[s][1].startswith(b"HTTP/1.1 200"), f"({seen[s][0]}, {seen[s][1][:12]!r})")
    # Still open on this side: only Midtier can have closed them.
    end = time.time() + DEADLINE
    while descriptors(midtier.pid) > before + 3 and time.time() < end:
        time.sleep(0.2)
    after = descriptors(midtier.pid)
    for s in heads + admin_heads + bodies + idle:
        s.close()
    print(f"#    midtier's open descriptors: {before} before, {during} with the slow clients, {after} after")
    # A little slack: the store may open another reader under the load of this test.
    check("Midtier's open descriptors come back down", after <= before + 3, f"({before} before, {after} after)")

    # --- 2. The cap per address; a proxied call held by a slow back end is not cut. ---
    holding = []
    for _ in range(CAP):
        s = connect(mport, "127.0.0.60")
        s.sendall(f"GET /be/hold HTTP/1.1\r\nHost: localhost\r\n{call}\r\n".encode())
        holding.append(s)
    end = time.time() + DEADLINE
    while held["count"] < CAP and time.time() < end:
        time.sleep(0.05)
    check(f"{CAP} calls from one address wait at a slow back end", held["count"] == CAP, f"({held['count']})")
    check("the head limit passes while they wait", clock(mport))
    over = connect(mport, "127.0.0.60")
    try:
        over.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    except OSError:
        pass
    result = watch([over])[over]
    over.close()
    check(f"connection {CAP + 1} from that address is closed without an answer", result == (True, b""), f"({result[0]}, {result[1][:12]!r})")
    status, _ = get(mport, "/healthz", source="127.0.0.61")
    check("another address is served meanwhile", status == 200, f"({status})")
    held["release"].set()
    answers = [answer_of(s) for s in holding]
    check("the held calls are answered 200 once the back end answers, none cut",
          all(status == 200 for status, _ in answers), f"({[status for status, _ in answers]})")
    for s in holding:
        s.close()
    end = time.time() + DEADLINE
    status = 0
    while status != 200 and time.time() < end:
        status, _ = get(mport, "/healthz", source="127.0.0.60")
        if status != 200:
            time.sleep(0.2)
    check("once its connections are closed, the address is served again", status == 200, f"({status})")

    # --- 3. Streamed bodies: an upload the back end reads late, a download the device reads late. ---
    sent = {"bytes": 0, "error": None}
    uploader = connect(mport, "127.0.0.70")

    def send_upload():
        try:
            uploader.sendall(f"POST /be/upload HTTP/1.1\r\nHost: localhost\r\n{call}Content-Type: application/octet-stream\r\n"
                             f"Content-Length: {UPLOAD}\r\n\r\n".encode())
            piece = b"u" * 65536
            for _ in range(UPLOAD // len(piece)):
                uploader.sendall(piece)
                sent["bytes"] += len(piece)
        except OSError as error:
            sent["error"] = repr(error)
    sender = threading.Thread(target=send_upload)
    sender.start()
    check("the upload reaches the back end", upload["arrived"].wait(DEADLINE))
    check("the head limit passes while the back end does not read", clock(mport))
    stalled = sent["bytes"] < UPLOAD
    check("the upload was held up by the back end (else this case proves nothing)", stalled, f"({sent['bytes']} of {UPLOAD} sent)")
    upload["release"].set()
    sender.join(DEADLINE * 2)
    status, _ = answer_of(uploader)
    uploader.close()
    check("a large upload the back end reads late arrives whole", status == 200 and upload["read"] == UPLOAD and sent["error"] is None,
          f"({status}, {upload['read']} of {UPLOAD} read, {sent['error']})")

    downloader = connect(mport, "127.0.0.71")
    downloader.sendall(f"GET /be/big HTTP/1.1\r\nHost: localhost\r\n{call}\r\n".encode())
    check("the head limit passes while the device does not read its download", clock(mport))
    check("the download was held up by the device (else this case proves nothing)", download["written"] < DOWNLOAD,
          f"({download['written']} of {DOWNLOAD} written)")
    status, length = answer_of(downloader)
    downloader.close()
    check("a large download the device reads late arrives whole", status == 200 and length == DOWNLOAD, f"({status}, {length})")

    check("the server is still running", midtier.poll() is None)
    log.flush()
    text = open(log_path, "rb").read()
    check("closed slow connections are logged", b"closed a slow client's connection" in text)
    check("no header value of a slow client reached the log", SECRET not in text and b"alice-demo-password" not in text)
finally:
    kill_all(processes)
    shutil.rmtree(work, ignore_errors=True)

print()
check.finish()
