"""What the two push stand-ins (apns.py, fcm.py) share: serving a small ASGI app over TLS with
hypercorn, reading a request body, answering JSON, a JSON Lines log that a test can read, and
counters for `GET /_stats`.

The stand-ins are test peers on loopback only. They keep all their state in memory, in one
asyncio event loop, so no locks are needed: a request handler runs to its next `await` alone.

ENDING CONNECTIONS. Apple and Google end an HTTP/2 connection when they choose (a server going
down, a connection's age); a client must then carry on over a new one. Both stand-ins take

    --close-after N [--close-how goaway|close]

which ends every HTTP/2 connection once it has carried N requests (HTTP/1.1 connections are
left alone: Midtier speaks HTTP/2 to both services). How (default `goaway`):

  goaway     graceful, as RFC 9113 section 6.8 has it: on the N-th request a GOAWAY frame
             (NO_ERROR, last stream id = that request's stream) goes out at once; the N requests
             are answered; a stream the client opened after the N-th (it had not yet read the
             GOAWAY) is refused with RST_STREAM REFUSED_STREAM, unprocessed and not logged; once
             the N are answered the connection is closed.
  close      abrupt: no GOAWAY. The N requests are answered, then the TCP connection is closed;
             a request that came after the N-th gets no answer (it is not processed or logged),
             so the client sees only the connection end with it still open.

hypercorn's own `keep_alive_max_requests` is not used for this: on the request after the N-th
it sends GOAWAY NO_ERROR naming the newest stream (promising every open stream an answer),
then, h2's state being closed, answers none of them; the app may have processed them (they are
logged), and the connection closes only when the client sends another frame — else the client
waits for its own timeout. No push service does that; the stand-ins keep it at 10^9.

`GET /_stats` then also counts `connections` (HTTP/2 connections accepted), `goaways` (GOAWAY
frames sent by `goaway`), `closed` (connections ended after N requests, either way) and
`refused` (streams opened after the N-th: refused or left unanswered). Each log line names its
connection by the client's port (`clientPort`), so a test can count the requests of each.
"""
import asyncio
import hashlib
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


def digest(secret):
    """A credential as the logs name it: the first 16 hex digits of its SHA-256 (None for none),
    so that a test can tell tokens apart without the log holding one."""
    if not secret:
        return None
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()[:16]


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


CLOSE_HOWS = ("goaway", "close")


def add_connection_options(parser):
    """The command-line options of ENDING CONNECTIONS (see the header)."""
    parser.add_argument("--close-after", type=int, metavar="N",
                        help="end every HTTP/2 connection after N requests (see standin.py)")
    parser.add_argument("--close-how", choices=CLOSE_HOWS, default="goaway",
                        help="goaway (graceful, the default) or close (abrupt)")


def client_port(scope):
    """The client's port: which connection a request came on (None if hypercorn does not say)."""
    client = scope.get("client")
    return client[1] if isinstance(client, (tuple, list)) and len(client) == 2 else None


def ending_h2_protocol(after, how, counters):
    """hypercorn's HTTP/2 protocol, ending each connection after `after` requests as `how`
    says (`goaway` or `close`; see the header). `counters` is a dict it counts in."""
    import h2.errors
    import h2.events
    import hypercorn.protocol
    from hypercorn.events import Closed, RawData
    from hypercorn.protocol.events import StreamClosed
    from hyperframe.frame import GoAwayFrame

    for counter in ("connections", "goaways", "closed", "refused"):
        counters.setdefault(counter, 0)

    class EndingH2Protocol(hypercorn.protocol.H2Protocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            counters["connections"] += 1
            self.taken = 0           # requests given to the app on this connection
            self.ending = False      # the N-th has been given to the app
            self.ended = False       # the close has begun
            self.dropped = set()     # streams opened after the N-th

        async def _handle_events(self, events):
            kept, last = [], None
            for event in events:
                stream_id = getattr(event, "stream_id", None)
                if isinstance(event, h2.events.RequestReceived):
                    if self.taken >= after:
                        self.dropped.add(stream_id)
                        counters["refused"] += 1
                        if how == "goaway":
                            self.connection.reset_stream(stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                        continue
                    self.taken += 1
                    if self.taken == after:
                        last = stream_id
                elif stream_id in self.dropped and isinstance(event, (h2.events.DataReceived, h2.events.StreamEnded)):
                    if isinstance(event, h2.events.DataReceived):
                        self.connection.acknowledge_received_data(event.flow_controlled_length, stream_id)
                    continue
                kept.append(event)
            if last is not None and how == "goaway":
                # Written by hand: h2's close_connection() would close its state machine, and
                # then the streams up to `last` could not be answered (what hypercorn does).
                frame = GoAwayFrame(0)
                frame.last_stream_id, frame.error_code = last, 0
                await self._flush()
                await self.send(RawData(data=frame.serialize()))
                counters["goaways"] += 1
            await super()._handle_events(kept)
            if last is not None:
                self.ending = True
                await self.end_when_answered()

        async def stream_send(self, event):
            await super().stream_send(event)
            if isinstance(event, StreamClosed):
                await self.end_when_answered()

        async def end_when_answered(self):
            """Closes the connection once the N requests are answered and their answers sent."""
            if not self.ending or self.ended or self.streams:
                return
            self.ended = True
            for _ in range(500):      # at most 5 s for the answers to leave
                if not self.stream_buffers or self.closed:
                    break
                await asyncio.sleep(0.01)
            await self._flush()
            counters["closed"] += 1
            await self.send(Closed())

    return EndingH2Protocol


def serve(app, port, cert, key, name, close_after=None, close_how="goaway"):
    """Serves `app` on 127.0.0.1:`port` over TLS (ALPN offers h2, then http/1.1) until SIGTERM
    or SIGINT, then stops cleanly. Prints `NAME listening on 127.0.0.1:PORT` to stderr once the
    socket is bound (a test should still wait until the port answers). With `close_after`, each
    HTTP/2 connection ends after that many requests, as `close_how` says (ENDING CONNECTIONS in
    the header); its counters go to `app.stats.extra`."""
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
    if close_after is not None:
        if close_after < 1:
            raise ValueError("--close-after must be at least 1")
        import hypercorn.protocol
        hypercorn.protocol.H2Protocol = ending_h2_protocol(close_after, close_how, app.stats.extra)

    async def main():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        print(f"{name} listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
        await hypercorn_serve(app, config, shutdown_trigger=stop.wait)

    asyncio.run(main())
