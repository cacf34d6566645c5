"""Checks the push stand-ins themselves: starts apns.py and fcm.py on free loopback ports with
fresh keys, plays Midtier's part with httpx over HTTP/2, and prints `N passed, M failed`
(exit 1 on any failure). Both servers are stopped in every case.

    python3 Tests/e2e/standins/selftest.py

Each check can fail: break a rule in a stand-in (skip its JWT check, say) and a check here fails.
"""
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import httpx
import jwt  # PyJWT
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))    # Tests/e2e, for harness.py
import harness  # noqa: E402
import keys     # noqa: E402

TOPIC = "com.example.midtier.push"
FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
STARTUP_SECONDS = 30     # the longest a stand-in may take to answer after it is started
APS = {"aps": {"alert": {"title": "Hello", "body": "from the selftest"}, "badge": 1}}


def start(script, arguments, folder):
    """Starts a stand-in with its output in `folder/<script>.out`."""
    out = open(os.path.join(folder, script + ".out"), "wb")
    return subprocess.Popen([sys.executable, os.path.join(HERE, script)] + arguments,
                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def wait_until_answering(process, client, url):
    """Whether `process` answers GET `url` within STARTUP_SECONDS (False at once if it exits)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if client.get(url, timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


def stop(process):
    """Stops a stand-in: SIGTERM, then SIGKILL if it has not ended within 10 seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def read_log(path):
    """The log's lines as dicts (none when the stand-in has written none yet)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def last_line(path):
    lines = read_log(path)
    return lines[-1] if lines else {}


# --- APNs ----------------------------------------------------------------------------------------

def apns_checks(check, client, base, k, log_path):
    p8 = open(k["apns_p8"], "rb").read()

    def provider_token(key=p8, kid=k["apns_key_id"], iss=k["team"], iat=None, alg="ES256"):
        return jwt.encode({"iss": iss, "iat": int(time.time()) if iat is None else iat}, key,
                          algorithm=alg, headers={"kid": kid})

    good = provider_token()

    def push(token, jwt_text=good, topic=TOPIC, body=None, extra=None):
        headers = {"apns-topic": topic} if topic is not None else {}
        if jwt_text is not None:
            headers["authorization"] = "bearer " + jwt_text
        headers.update(extra or {})
        content = json.dumps(APS).encode() if body is None else body
        return client.post(f"{base}/3/device/{token}", headers=headers, content=content)

    def reason(response):
        try:
            return response.json().get("reason")
        except ValueError:
            return None

    normal = "a1" * 32
    r = push(normal, extra={"apns-priority": "10", "apns-expiration": "0", "apns-push-type": "alert",
                            "apns-collapse-id": "greeting"})
    check("apns: a valid push is accepted over HTTP/2 with an apns-id",
          r.status_code == 200 and r.http_version == "HTTP/2" and r.headers.get("apns-id"),
          f"{r.status_code} {r.http_version} {r.text}")
    entry = last_line(log_path)
    check("apns: the log line holds the token, topic, headers and payload",
          entry.get("token") == normal and entry.get("status") == 200 and entry.get("topic") == TOPIC
          and entry.get("payload") == APS and entry.get("apns-priority") == "10" and entry.get("apns-expiration") == "0"
          and entry.get("apns-push-type") == "alert" and entry.get("apns-collapse-id") == "greeting"
          and entry.get("apns-id") == r.headers.get("apns-id"), entry)

    r = push("0410" + "b2" * 30)
    check("apns: a 0410 token is Unregistered with a timestamp",
          r.status_code == 410 and reason(r) == "Unregistered" and isinstance(r.json().get("timestamp"), int),
          f"{r.status_code} {r.text}")
    r = push("0400" + "c3" * 30)
    check("apns: a 0400 token is a BadDeviceToken", r.status_code == 400 and reason(r) == "BadDeviceToken",
          f"{r.status_code} {r.text}")

    busy = "0429" + "d4" * 30
    answers = [push(busy) for _ in range(3)]
    check("apns: a 0429 token is refused twice with retry-after 1",
          all(a.status_code == 429 and reason(a) == "TooManyRequests" and a.headers.get("retry-after") == "1"
              for a in answers[:2]), [(a.status_code, a.headers.get("retry-after")) for a in answers[:2]])
    check("apns: then the third attempt is delivered", answers[2].status_code == 200, answers[2].status_code)
    failing = "0500" + "e5" * 30
    answers = [push(failing) for _ in range(2)]
    check("apns: a 0500 token fails once with 500, then is delivered",
          [a.status_code for a in answers] == [500, 200] and reason(answers[0]) == "InternalServerError",
          [a.status_code for a in answers])

    # The provider token, every way it can be wrong.
    other_key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    cases = [("no authorization header", None, "MissingProviderToken"),
             ("a JWT signed by another key", provider_token(key=other_key), "InvalidProviderToken"),
             ("a JWT naming another key id", provider_token(kid="WRONGKEYID"), "InvalidProviderToken"),
             ("a JWT from another team", provider_token(iss="OTHERTEAM1"), "InvalidProviderToken"),
             ("a JWT signed with HS256", provider_token(key="s" * 32, alg="HS256"), "InvalidProviderToken"),
             ("a JWT with its signature cut off", good.rsplit(".", 1)[0] + ".", "InvalidProviderToken"),
             ("not a JWT", "not-a-jwt", "InvalidProviderToken"),
             ("a JWT issued two hours ago", provider_token(iat=int(time.time()) - 7200), "ExpiredProviderToken")]
    for name, text, expected in cases:
        r = push(normal, jwt_text=text)
        check(f"apns: {name} is refused with 403 {expected}", r.status_code == 403 and reason(r) == expected,
              f"{r.status_code} {r.text}")

    r = push(normal, topic="com.example.other")
    check("apns: another topic is TopicDisallowed", r.status_code == 400 and reason(r) == "TopicDisallowed",
          f"{r.status_code} {r.text}")
    r = push(normal, topic=None)
    check("apns: no topic is MissingTopic", r.status_code == 400 and reason(r) == "MissingTopic",
          f"{r.status_code} {r.text}")
    big = json.dumps({"aps": {"alert": "x" * 5000}}).encode()
    r = push(normal, body=big)
    check("apns: a 5000-byte payload is PayloadTooLarge", r.status_code == 413 and reason(r) == "PayloadTooLarge",
          f"{r.status_code} {r.text}")
    r = push(normal, body=json.dumps({"alert": "no aps"}).encode())
    check("apns: a payload without aps is refused", r.status_code == 400 and reason(r) == "PayloadEmpty",
          f"{r.status_code} {r.text}")
    r = push(normal, body=b"")
    check("apns: an empty payload is refused", r.status_code == 400 and reason(r) == "PayloadEmpty",
          f"{r.status_code} {r.text}")
    r = push("not-hex")
    check("apns: a token that is not hex is a BadDeviceToken", r.status_code == 400 and reason(r) == "BadDeviceToken",
          f"{r.status_code} {r.text}")
    r = push(normal, extra={"apns-priority": "7"})
    check("apns: priority 7 is BadPriority", r.status_code == 400 and reason(r) == "BadPriority",
          f"{r.status_code} {r.text}")
    with httpx.Client(http2=False, verify=client_context(k), trust_env=False) as http1:
        r = http1.post(f"{base}/3/device/{normal}", content=json.dumps(APS).encode(),
                       headers={"authorization": "bearer " + good, "apns-topic": TOPIC})
    check("apns: HTTP/1.1 is refused", r.status_code == 505, f"{r.status_code} {r.text}")

    stats = client.get(f"{base}/_stats").json()
    log = read_log(log_path)
    check("apns: /_stats counts every request and the 3 delivered (normal, 0429 and 0500 at last)",
          stats["requests"] == len(log) and stats["delivered"] == 3 and stats["byStatus"].get("200") == 3
          and stats["attemptsByToken"].get(busy) == 3, stats)
    check("apns: every request is in the log", len(log) == 24, len(log))
    held = "0777" + "ab" * 30
    hold_checks(check, client, base, k, log_path, f"/3/device/{held}", json.dumps(APS).encode(),
                {"authorization": "bearer " + good, "apns-topic": TOPIC}, held, "apns")


def hold_checks(check, client, base, k, log_path, path, body, headers, held_token, name):
    """A held request gets no answer and no log line until `POST /_release`; then it is
    answered 200 and logged, and later ones are not held."""
    answers = []

    def send():
        with httpx.Client(http2=True, verify=client_context(k), trust_env=False, timeout=60) as own:
            answers.append(own.post(f"{base}{path}", headers=headers, content=body).status_code)

    thread = threading.Thread(target=send)
    thread.start()
    deadline = time.monotonic() + 30
    while client.get(f"{base}/_stats").json().get("held") != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    check(f"{name}: a held request is held (/_stats held == 1), unanswered", client.get(f"{base}/_stats").json().get("held") == 1
          and not answers)
    check(f"{name}: ... and not yet in the log", not [e for e in read_log(log_path) if e.get("token") == held_token])
    r = client.post(f"{base}/_release")
    thread.join(30)
    check(f"{name}: POST /_release answers it 200", r.status_code == 200 and answers == [200], f"{r.status_code} {answers}")
    logged = [e for e in read_log(log_path) if e.get("token") == held_token]
    check(f"{name}: ... logged once, not abandoned", len(logged) == 1 and logged[0].get("abandoned") is False, logged)
    r = client.post(f"{base}{path}", headers=headers, content=body)
    check(f"{name}: after the release the same token is answered at once", r.status_code == 200, r.status_code)

    # A client that gives up on a held request: it is let go and logged as abandoned.
    client.post(f"{base}/_hold")
    with httpx.Client(http2=True, verify=client_context(k), trust_env=False, timeout=0.5) as impatient:
        try:
            impatient.post(f"{base}{path}", headers=headers, content=body)
        except httpx.TimeoutException:
            pass
    deadline = time.monotonic() + 30
    while client.get(f"{base}/_stats").json().get("abandoned") != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = client.get(f"{base}/_stats").json()
    logged = [e for e in read_log(log_path) if e.get("token") == held_token]
    check(f"{name}: a held request whose client went away is let go, logged as abandoned (what was received)",
          stats.get("abandoned") == 1 and stats.get("held") == 0 and len(logged) == 3 and logged[-1].get("abandoned") is True
          and logged[-1].get("status") == 200, (stats, logged[-1:]))
    client.post(f"{base}/_release")


# --- FCM -----------------------------------------------------------------------------------------

def fcm_checks(check, client, base, k, log_path):
    account = json.load(open(k["service_account"]))
    send_url = f"{base}/v1/projects/{k['project']}/messages:send"

    def assertion(key=account["private_key"], iss=account["client_email"], aud=account["token_uri"],
                  scope=FCM_SCOPE, lifetime=3600, alg="RS256"):
        now = int(time.time())
        claims = {"iss": iss, "aud": aud, "iat": now, "exp": now + lifetime}
        if scope is not None:
            claims["scope"] = scope
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": account["private_key_id"]})

    def get_token(text, grant_type="urn:ietf:params:oauth:grant-type:jwt-bearer"):
        return client.post(f"{base}/token", data={"grant_type": grant_type, "assertion": text})

    def send(token, bearer, message=None):
        body = {"message": message if message is not None else
                {"token": token, "notification": {"title": "Hello", "body": "from the selftest"},
                 "data": {"k": "v"}, "android": {"priority": "high", "ttl": "3600s"}}}
        headers = {"authorization": "Bearer " + bearer} if bearer is not None else {}
        return client.post(send_url, json=body, headers=headers)

    def error(response):
        try:
            e = response.json()["error"]
            codes = [d.get("errorCode") for d in e.get("details", [])]
            return e.get("status"), (codes[0] if codes else None)
        except (ValueError, KeyError, TypeError):
            return None, None

    r = get_token(assertion())
    answer = r.json() if r.status_code == 200 else {}
    check("fcm: a signed assertion gets an access token",
          r.status_code == 200 and str(answer.get("access_token", "")).startswith("ya29.")
          and answer.get("expires_in") == 3599 and answer.get("token_type") == "Bearer", f"{r.status_code} {r.text}")
    bearer = answer.get("access_token", "none")

    r = send("device-1", bearer)
    check("fcm: a valid send is delivered with its name",
          r.status_code == 200 and r.json().get("name", "").startswith(f"projects/{k['project']}/messages/"),
          f"{r.status_code} {r.text}")
    entry = last_line(log_path)
    check("fcm: the log line holds the token and the message",
          entry.get("kind") == "send" and entry.get("token") == "device-1" and entry.get("status") == 200
          and entry.get("message", {}).get("notification", {}).get("title") == "Hello", entry)
    r = send("gone-device", bearer)
    check("fcm: a gone- token is NOT_FOUND / UNREGISTERED",
          r.status_code == 404 and error(r) == ("NOT_FOUND", "UNREGISTERED"), f"{r.status_code} {r.text}")
    answers = [send("busy-device", bearer) for _ in range(3)]
    check("fcm: a busy- token is refused twice with 429 and retry-after 1",
          all(a.status_code == 429 and error(a)[0] == "RESOURCE_EXHAUSTED" and a.headers.get("retry-after") == "1"
              for a in answers[:2]), [(a.status_code, a.headers.get("retry-after")) for a in answers[:2]])
    check("fcm: then the third attempt is delivered", answers[2].status_code == 200, answers[2].status_code)
    answers = [send("fail-device", bearer) for _ in range(2)]
    check("fcm: a fail- token fails once with 503 UNAVAILABLE, then is delivered",
          [a.status_code for a in answers] == [503, 200] and error(answers[0])[0] == "UNAVAILABLE",
          [a.status_code for a in answers])

    # The assertion, every way it can be wrong.
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    cases = [("an assertion signed by another key", assertion(key=other_key)),
             ("an assertion from another account", assertion(iss="someone@else.iam.gserviceaccount.com")),
             ("an assertion for another audience", assertion(aud="https://oauth2.googleapis.com/token")),
             ("an assertion without the messaging scope", assertion(scope="https://www.googleapis.com/auth/cloud-platform")),
             ("an assertion living two hours", assertion(lifetime=7200)),
             ("an assertion signed with HS256", assertion(key="s" * 32, alg="HS256")),
             ("not a JWT", "not-a-jwt")]
    for name, text in cases:
        r = get_token(text)
        check(f"fcm: {name} is refused with 400",
              r.status_code == 400 and r.json().get("error") in ("invalid_grant", "invalid_scope"),
              f"{r.status_code} {r.text}")
    r = get_token(assertion(), grant_type="client_credentials")
    check("fcm: another grant type is refused", r.status_code == 400 and r.json().get("error") == "unsupported_grant_type",
          f"{r.status_code} {r.text}")

    for name, text in [("an access token it never issued", "ya29.forged"), ("no access token", None)]:
        r = send("device-1", text)
        check(f"fcm: a send with {name} is 401 UNAUTHENTICATED",
              r.status_code == 401 and error(r)[0] == "UNAUTHENTICATED", f"{r.status_code} {r.text}")
    r = send("device-1", bearer, message={"notification": {"title": "no token"}})
    check("fcm: a message without a token is INVALID_ARGUMENT",
          r.status_code == 400 and error(r)[0] == "INVALID_ARGUMENT", f"{r.status_code} {r.text}")
    r = send("device-1", bearer, message={"token": "device-1", "data": {"count": 3}})
    check("fcm: a data value that is not a string is INVALID_ARGUMENT",
          r.status_code == 400 and error(r)[0] == "INVALID_ARGUMENT", f"{r.status_code} {r.text}")
    r = client.post(f"{base}/v1/projects/another-project/messages:send", json={"message": {"token": "device-1"}},
                    headers={"authorization": "Bearer " + bearer})
    check("fcm: another project is PERMISSION_DENIED, blaming no device token",
          r.status_code == 403 and error(r) == ("PERMISSION_DENIED", None), f"{r.status_code} {r.text}")

    stats = client.get(f"{base}/_stats").json()
    log = read_log(log_path)
    check("fcm: /_stats counts one access token issued and the 3 delivered",
          stats["tokensIssued"] == 1 and stats["delivered"] == 3 and stats["requests"] == len(log), stats)
    check("fcm: every request is in the log", len(log) == 21, len(log))
    issued = [e for e in log if e.get("kind") == "oauth" and e.get("status") == 200]
    sent = [e for e in log if e.get("kind") == "send" and e.get("token") == "device-1" and e.get("status") == 200]
    check("fcm: the log names the issued access token and a send's bearer by the same hash, never by the token",
          issued and sent and issued[0].get("issued") == sent[0].get("accessToken") and len(sent[0].get("accessToken") or "") == 16
          and bearer not in open(log_path).read(), (issued[:1], [e.get("accessToken") for e in sent[:1]]))
    check("fcm: /_stats counts the live access tokens", stats.get("liveAccessTokens") == 1, stats.get("liveAccessTokens"))
    held = "hold-" + "x" * 20
    hold_checks(check, client, base, k, log_path, f"/v1/projects/{k['project']}/messages:send",
                json.dumps({"message": {"token": held, "data": {"k": "v"}}}).encode(),
                {"authorization": "Bearer " + bearer, "content-type": "application/json"}, held, "fcm")
    r = client.post(f"{base}/_expire-tokens")
    after = send("device-1", bearer)
    check("fcm: after POST /_expire-tokens the access token is refused (401 UNAUTHENTICATED), none is live",
          r.status_code == 200 and after.status_code == 401 and client.get(f"{base}/_stats").json().get("liveAccessTokens") == 0,
          f"{r.status_code} {after.status_code}")


def h2_burst(port, k, requests):
    """Sends `requests` (each (path, headers, body)) at once on one new HTTP/2 connection and
    reads until the server closes it (or 10 quiet seconds): {"answers": {stream: status},
    "resets": {stream: error code}, "goaway": (last stream id, error code) or None, "closed":
    whether the server closed the connection}. Raw h2, because httpx (python-h2 underneath)
    stops reading at a GOAWAY, while RFC 9113 6.8 has the streams up to its last stream id
    still answered."""
    import socket
    import h2.config
    import h2.connection
    import h2.events
    context = client_context(k)
    context.set_alpn_protocols(["h2"])
    sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    for path, headers, body in requests:
        stream = connection.get_next_available_stream_id()
        connection.send_headers(stream, [(":method", "POST"), (":path", path), (":scheme", "https"),
                                         (":authority", f"127.0.0.1:{port}")] + list(headers))
        connection.send_data(stream, body, end_stream=True)
    sock.sendall(connection.data_to_send())
    seen = {"answers": {}, "resets": {}, "goaway": None, "closed": False}
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                seen["closed"] = True
                break
            for event in connection.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    seen["answers"][event.stream_id] = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.StreamReset):
                    seen["resets"][event.stream_id] = int(event.error_code)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    seen["goaway"] = (event.last_stream_id, int(event.error_code))
                    # python-h2 closes its side at a GOAWAY; keep reading the answers still due.
                    connection.state_machine.state = h2.connection.ConnectionState.CLIENT_OPEN
            sock.sendall(connection.data_to_send())
    except (socket.timeout, ssl.SSLError, ConnectionError):
        pass
    finally:
        sock.close()
    return seen


def ending_checks(check, k, folder):
    """--close-after 3 with each --close-how, and --provider-token-lifetime, on apns.py
    stand-ins of their own: six pushes at once on one connection."""
    p8 = open(k["apns_p8"], "rb").read()

    def push(iat=None):
        token = jwt.encode({"iss": k["team"], "iat": int(time.time()) if iat is None else iat}, p8,
                           algorithm="ES256", headers={"kid": k["apns_key_id"]})
        return ("/3/device/" + "a1" * 32, [("authorization", "bearer " + token), ("apns-topic", TOPIC)],
                json.dumps(APS).encode())

    for how in ("goaway", "close"):
        port, log = harness.free_port(), os.path.join(folder, f"apns-{how}.jsonl")
        process = start("apns.py", [
            "--port", str(port), "--cert", k["cert"], "--key", k["key"], "--auth-key-pub", k["apns_pub"],
            "--team", k["team"], "--key-id", k["apns_key_id"], "--topic", TOPIC, "--log", log,
            "--close-after", "3", "--close-how", how, "--provider-token-lifetime", "30"], folder)
        try:
            with httpx.Client(http2=False, verify=client_context(k), trust_env=False, timeout=10) as client:
                base = f"https://127.0.0.1:{port}"
                if not wait_until_answering(process, client, base + "/_stats"):
                    check(f"{how}: the stand-in with --close-after answers", False)
                    continue
                seen = h2_burst(port, k, [push() for _ in range(6)])
                stats = client.get(base + "/_stats").json()
            lines = read_log(log)
            if how == "goaway":
                check("goaway: GOAWAY NO_ERROR naming the 3rd stream (5), streams 1, 3 and 5 answered 200, 7, 9 and 11 "
                      "refused (RST_STREAM REFUSED_STREAM), then the connection is closed",
                      seen["goaway"] == (5, 0) and seen["answers"] == {1: 200, 3: 200, 5: 200}
                      and seen["resets"] == {7: 7, 9: 7, 11: 7} and seen["closed"], seen)
            else:
                check("close: streams 1, 3 and 5 answered 200, then the connection closed without a GOAWAY or a "
                      "reset, 7, 9 and 11 unanswered", seen["goaway"] is None and seen["answers"] == {1: 200, 3: 200, 5: 200}
                      and not seen["resets"] and seen["closed"], seen)
            check(f"{how}: only the 3 answered are logged (the others were not processed), each naming its connection",
                  len(lines) == 3 and all(e.get("status") == 200 for e in lines) and len({e.get("clientPort") for e in lines}) == 1
                  and lines[0].get("clientPort"), [(e.get("status"), e.get("clientPort")) for e in lines])
            check(f"{how}: /_stats counts the connection ended and its 3 refused streams",
                  stats.get("closed") == 1 and stats.get("refused") == 3 and stats.get("goaways") == (1 if how == "goaway" else 0),
                  {key: stats.get(key) for key in ("connections", "goaways", "closed", "refused")})
            if how == "close":
                old_iat = int(time.time()) - 31
                old = h2_burst(port, k, [push(iat=old_iat)])
                check("--provider-token-lifetime 30: a provider token 31 s old is refused (403 ExpiredProviderToken)",
                      old["answers"] == {1: 403} and read_log(log)[-1].get("reason") == "ExpiredProviderToken", old)
                entry = read_log(log)[-1].get("providerToken") or {}
                check("... and logged by a 16-digit hash of it and its iat",
                      isinstance(entry.get("hash"), str) and len(entry["hash"]) == 16 and entry.get("iat") == old_iat, entry)
        finally:
            stop(process)


def client_context(k):
    """TLS that trusts only the test CA, as Midtier does with `caFile`."""
    return ssl.create_default_context(cafile=k["ca"])


def main():
    check = harness.Checks("push stand-ins")
    folder = tempfile.mkdtemp(prefix="push-standins-")
    processes = []
    try:
        apns_port, fcm_port = harness.free_port(), harness.free_port()
        k = keys.generate(os.path.join(folder, "keys"), token_uri=f"https://127.0.0.1:{fcm_port}/token")
        apns_log, fcm_log = os.path.join(folder, "apns.jsonl"), os.path.join(folder, "fcm.jsonl")
        processes.append(start("apns.py", [
            "--port", str(apns_port), "--cert", k["cert"], "--key", k["key"], "--auth-key-pub", k["apns_pub"],
            "--team", k["team"], "--key-id", k["apns_key_id"], "--topic", TOPIC, "--log", apns_log], folder))
        processes.append(start("fcm.py", [
            "--port", str(fcm_port), "--cert", k["cert"], "--key", k["key"],
            "--service-account-pub", k["sa_pub"], "--client-email", k["client_email"],
            "--project", k["project"], "--log", fcm_log], folder))

        with httpx.Client(http2=True, verify=client_context(k), trust_env=False, timeout=10) as client:
            apns_base, fcm_base = f"https://127.0.0.1:{apns_port}", f"https://127.0.0.1:{fcm_port}"
            ready = [wait_until_answering(processes[0], client, apns_base + "/_stats"),
                     wait_until_answering(processes[1], client, fcm_base + "/_stats")]
            check("both stand-ins answer over TLS", all(ready), ready)
            if all(ready):
                apns_checks(check, client, apns_base, k, apns_log)
                fcm_checks(check, client, fcm_base, k, fcm_log)
                ending_checks(check, k, folder)
    except Exception as e:   # a crash is a failure, and the servers are still stopped
        check("the selftest runs to its end", False, repr(e))
    finally:
        for process in processes:
            stop(process)
        if check.failed:
            for name in ("apns.py.out", "fcm.py.out"):   # (the ending checks' stand-ins append to apns.py.out)
                path = os.path.join(folder, name)
                if os.path.exists(path):
                    print(f"--- {name}\n" + open(path, errors="replace").read()[-3000:])
        shutil.rmtree(folder, ignore_errors=True)
    check.finish()


if __name__ == "__main__":
    main()
