"""What the two push stand-ins (apns.py, fcm.py) share: serving a small ASGI app over TLS with
hypercorn, reading a request body, answering JSON, a JSON Lines log that a test can read, and
counters for `GET /_stats`.

The stand-ins are test peers on loopback only. They keep all their state in memory, in one
asyncio event loop, so no locks are needed: a request handler runs to its next `await` alone.
"""
import asyncio
import json
import signal
import sys
import time

# A request body is read up to this many bytes; the rest is read and dropped, so a huge body
# costs no memory. Both services refuse far smaller bodies anyway (APNs: 4 KB).
BODY_CAP = 64 * 1024


class JsonlLog:
    """Appends one JSON object a line to a file and flushes each line at once, so a test that
    has just seen an answer can read the line for it (each line is written before the answer)."""

    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8")

    def write(self, entry):
        self.file.write(json.dumps(entry, separators=(",", ":"), sort_keys=False) + "\n")
        self.file.flush()


class Stats:
    """Counts requests: all of them, the delivered ones (status 200 on a send), by status and
    by reason (APNs' `reason`, FCM's `errorCode`). `extra` holds a stand-in's own counters."""

    def __init__(self, reason_key):
        self.reason_key = reason_key
        self.requests = 0
        self.delivered = 0
        self.by_status = {}
        self.by_reason = {}
        self.extra = {}

    def count(self, status, reason, delivered):
        self.requests += 1
        if delivered:
            self.delivered += 1
        self.by_status[str(status)] = self.by_status.get(str(status), 0) + 1
        if reason:
            self.by_reason[reason] = self.by_reason.get(reason, 0) + 1

    def as_json(self):
        answer = {"requests": self.requests, "delivered": self.delivered,
                  "byStatus": self.by_status, self.reason_key: self.by_reason}
        answer.update(self.extra)
        return answer


class Hold:
    """Answers a test wants later: a request the stand-in holds (its token says so) waits until
    `POST /_release`, which lets every held request go and holds none after it, until `POST
    /_hold` holds again. A held request whose client goes away (a reset stream, a closed
    connection) is let go at once and counted as abandoned; its log line still says what was
    received (a real service would have delivered it). At most LIMIT seconds, so a test that
    forgets to release ends anyway. `held` is how many are held now."""

    LIMIT = 300

    def __init__(self):
        self.holding = True
        self.event = None
        self.held = 0
        self.abandoned = 0

    def release(self):
        self.holding = False
        if self.event is not None:
            self.event.set()
        self.event = None

    def hold(self):
        self.holding = True

    async def wait(self, receive):
        """Holds a request (if holding); True when its client went away meanwhile."""
        if not self.holding:
            return False
        if self.event is None:
            self.event = asyncio.Event()
        released = asyncio.ensure_future(self.event.wait())
        gone = asyncio.ensure_future(disconnected(receive))
        self.held += 1
        try:
            done, _ = await asyncio.wait({released, gone}, timeout=self.LIMIT, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.held -= 1
            released.cancel()
            gone.cancel()
        if gone in done:
            self.abandoned += 1
            return True
        return False

    def as_json(self):
        return {"held": self.held, "abandoned": self.abandoned, "holding": self.holding}


async def disconnected(receive):
    """Returns when the client goes away (the request's body has been read already)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def control(hold, path, method, receive, send):
    """`POST /_release` and `POST /_hold` (no authentication): True if this was one."""
    if method != "POST" or path not in ("/_release", "/_hold"):
        return False
    await read_body(receive)   # to its end: hypercorn stumbles on a body that comes after the answer
    hold.release() if path == "/_release" else hold.hold()
    await answer(send, 200, hold.as_json())
    return True


def now():
    """Seconds since 1970 as a float: the `time` of every log line."""
    return time.time()


def whole_seconds(value):
    """Whether a JWT's iat or exp is a whole number of seconds: JSON has one number type, so
    1700000000 and 1700000000.0 are both taken; true/false and fractions are not."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def header(scope, name):
    """The value of request header `name` (lower case) as text, or None when absent. HTTP/2
    headers arrive in lower case; HTTP/1.1 ones are lowered by hypercorn."""
    wanted = name.encode("ascii")
    for key, value in scope.get("headers", []):
        if key.lower() == wanted:
            return value.decode("latin-1")
    return None


async def read_body(receive):
    """The request body as bytes (at most BODY_CAP of them) and its full length."""
    body = bytearray()
    length = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        length += len(chunk)
        if len(body) < BODY_CAP:
            body += chunk[: BODY_CAP - len(body)]
        if not message.get("more_body", False):
            break
    return bytes(body), length


async def answer(send, status, body, headers=()):
    """Sends `status` with `body` (a dict or list, sent as JSON; None for no body) and the
    extra `headers` (pairs of text)."""
    data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
    raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if body is not None:
        raw_headers.append((b"content-type", b"application/json"))
    raw_headers.append((b"content-length", str(len(data)).encode("ascii")))
    try:
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        await send({"type": "http.response.body", "body": data})
    except Exception:
        pass   # the client went away (a held request it gave up on): nobody to answer


async def lifespan(receive, send):
    """Answers hypercorn's start-up and shut-down messages (the app has nothing to set up)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def serve(app, port, cert, key, name):
    """Serves `app` on 127.0.0.1:`port` over TLS (ALPN offers h2, then http/1.1) until SIGTERM
    or SIGINT, then stops cleanly. Prints `NAME listening on 127.0.0.1:PORT` to stderr once the
    socket is bound (a test should still wait until the port answers)."""
    # Imported here so that `keys.py` and the selftest's helpers import without hypercorn.
    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.certfile = cert
    config.keyfile = key
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = None          # the JSONL log is the record; no access log on stdout
    config.errorlog = "-"            # hypercorn's own errors go to stderr
    config.keep_alive_timeout = 75   # keep idle connections open as a real service does
    # Apple and Google keep a connection for as many requests as it carries; hypercorn's default
    # closes it after 1 000, losing the answers of the streams still open (which a client then
    # cannot tell from undelivered ones).
    config.keep_alive_max_requests = 1_000_000_000
    config.graceful_timeout = 2

    async def main():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        print(f"{name} listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
        await hypercorn_serve(app, config, shutdown_trigger=stop.wait)

    asyncio.run(main())
