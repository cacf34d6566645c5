#!/usr/bin/env python3
"""Push notifications end to end (docs/push.md): the real `midtier` binary, the stand-in APNs and
FCM of Tests/e2e/standins/ (HTTP/2 over TLS, checking Midtier's JWTs), devices registering
their tokens, back ends sending as senders of config/push-senders.json.

1. Sender authentication: no or a wrong password → 401, a device user's password → 401, a
   sender not allowed the app → 403, an unknown app → 403/404.
2. One user, two devices (iOS through SAP's push registration path, Android through the
   Connections body's AndroidGcmRegistrationId): a notification to the user reaches both
   stand-ins; the status says SENT with both delivered. A new token replaces the old one.
3. A locked registration and a blocked user get nothing: at the send, and when the lock or
   block comes between the send and the delivery (the APNs stand-in is down meanwhile).
4. APNs 410 and FCM UNREGISTERED: the delivery fails and the token is cleared from the
   registration (read back through GET Connections).
5. APNs 429 with Retry-After, FCM 429 and 503: retried and delivered (3 and 2 attempts).
6. Durability: the APNs stand-in stopped, notifications accepted, Midtier SIGKILLed; the stand-in
   and Midtier started again on the same store → every notification delivered exactly once.
7. Two instances on one throwaway PostgreSQL, 40 notifications sent alternately → each
   delivered exactly once.
8. Hostile input: unknown member, oversized alert, bad JSON, `users` not a list, 1001 users,
   another sender's status, an unknown os, a push token with a space, control characters in
   the alert → 400/404 naming it.
9. The FCM access token is fetched once for many messages.
10. A data-only notification goes to iOS as a background push with content-available: 1.
11. The APNs stand-in holds every request to one token while 70 are queued for it: FCM's
    notifications are SENT while APNs still holds its 64 (each app's service has its own
    places); once released, each of the 70 reached APNs exactly once.
12. SIGTERM while APNs holds 20: Midtier waits for them, writes their outcomes, exits 0; after
    a restart none is sent again.
14. APNs and FCM end every HTTP/2 connection after 7 requests (standin.py, ENDING
    CONNECTIONS), with a graceful GOAWAY, then with an abrupt close. 5 notifications to 6
    users with an iPhone and an Android each (60 deliveries) each time: all delivered, each
    (notification, token) reached its service once, none needed a second attempt (a request
    the connection's end left unanswered is sent again at once, over a new connection).
15. Tokens of the push services with lifetimes of seconds (the stand-ins' --provider-token-lifetime
    and --access-token-lifetime): a fresh Midtier's burst uses one provider token; APNs'
    ExpiredProviderToken gets one new token and the deliveries through; one FCM access token
    serves until it is about to expire, a new one is fetched before it does, and one after a 401.
Also: Midtier's logs never hold a device token, a password, a key or an access token.

Usage: push.py PATH-TO-MIDTIER. Prints `push: N passed, M failed`; exits 1 on failure. Every
process it starts is stopped in every case. Outcomes are awaited by polling with a bounded
deadline (DEADLINE seconds), never by timing.
"""
import asyncio, json, os, secrets, shutil, signal, ssl, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.parse, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "standins"))
import keys  # noqa: E402  (Tests/e2e/standins/keys.py)
from harness import Checks, basic, demo_config, free_port, header, idp_key, jwt, kill_all, wait_for  # noqa: E402
from postgres import ThrowawayPostgres  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DEADLINE = 60            # seconds any awaited outcome may take before the check fails
# A delivery is leased for 90 seconds while it is being sent (PushDeliveryWorker.leaseMilliseconds).
# While the APNs stand-in is down an attempt waits out the 10-second connect timeout, so the
# SIGKILL almost always hits one in flight: after the restart it waits out that lease.
LEASE = 90
TOPIC = "com.example.midtier.push"
ADMIN_TOKEN = "push-admin-" + secrets.token_hex(12)
SENDER_PASSWORD = "sender-" + secrets.token_hex(10)
SENDER_API_KEY = "key-" + secrets.token_hex(24)   # SAP's X-API-Key
SENDER_ISSUER = "https://idp.push.test"          # the OAuth sender's identity provider
SENDER_CLIENT = "hr-events"                      # ... and its client there
DEVICE_PASSWORD = "device-" + secrets.token_hex(10)
USERS = ["crashed", "capable", "incapable", "ana", "victim", "grouped", "ungrouped", "lee", "bo", "gina", "rita", "fay", "dura", "latelock",
         "lateblock", "multi", "mallory", "silent", "slowios", "quickdroid", "term", "waitlock", "waitswap", "cnlock", "cnblock",
         "cndelete", "cnswap"] + [f"conn{n}" for n in range(6)]

check = Checks("push")
processes = []
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(method, url, body=None, headers=None, timeout=30):
    """(status, headers, body bytes); `body` a dict/list is sent as JSON, bytes as they are."""
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None and not request.has_header("Content-type"):
        request.add_header("Content-Type", "application/json")
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
        return 0, {}, str(error).encode()


def as_json(body):
    try:
        return json.loads(body)
    except (ValueError, TypeError):
        return None


def short(body, n=300):
    return body[:n] if isinstance(body, bytes) else str(body)[:n]


def until(condition, seconds=DEADLINE, step=0.2):
    """The first true value of `condition()` within `seconds`, else None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return None


def ios_token(prefix="a1"):
    """A 64-digit hex APNs token; `prefix` chooses the stand-in's behaviour (0410, 0429, …)."""
    return (prefix + secrets.token_hex(32))[:64]


# --- The stand-ins --------------------------------------------------------------------------------

class StandIn:
    def __init__(self, script, port, arguments, log, ca, work):
        self.script, self.port, self.arguments, self.log, self.work = script, port, arguments, log, work
        self.tls = ssl.create_default_context(cafile=ca)
        self.process = None
        self.extra = []   # more arguments, such as --close-after (restart)

    def start(self):
        out = open(os.path.join(self.work, self.script + ".out"), "ab")
        self.process = subprocess.Popen([sys.executable, os.path.join(HERE, "standins", self.script), "--port", str(self.port)]
                                        + self.arguments + self.extra + ["--log", self.log],
                                        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        processes.append(self.process)
        return until(lambda: self.process.poll() is None and self.stats() is not None, seconds=30, step=0.1) is not None

    def stop(self):
        kill_all([self.process])

    def restart(self, extra):
        """Stopped and started again on the same port and log with `extra` arguments."""
        self.stop()
        self.extra = list(extra)
        return self.start()

    def control(self, path):
        """POST /_hold or /_release (standin.Hold)."""
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", data=b"", method="POST")
        with urllib.request.urlopen(request, context=self.tls, timeout=10) as response:
            return json.loads(response.read())

    def stats(self):
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/_stats", context=self.tls, timeout=2) as response:
                return json.loads(response.read())
        except Exception:
            return None

    def lines(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


def apns_lines_for(apns, notification_id):
    return [e for e in apns.lines() if isinstance(e.get("payload"), dict) and e["payload"].get("notificationId") == notification_id]


def fcm_lines_for(fcm, notification_id):
    return [e for e in fcm.lines() if e.get("kind") == "send" and isinstance(e.get("message"), dict)
            and (e["message"].get("data") or {}).get("notificationId") == notification_id]


def lines_with_token(standin, token):
    return [e for e in standin.lines() if e.get("token") == token]


# --- One Midtier ----------------------------------------------------------------------------------

class Midtier:
    def __init__(self, name, config, port, admin, log):
        self.name, self.config, self.port, self.admin, self.log = name, config, port, admin, log
        self.base, self.admin_base = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin}"
        self.process = None

    def start(self):
        out = open(self.log, "ab")
        self.process = subprocess.Popen([BIN, "serve", "--config", self.config], cwd=REPO, stdout=out, stderr=out)
        processes.append(self.process)
        return wait_for(self.base + "/healthz", DEADLINE) and wait_for(self.admin_base + "/healthz", DEADLINE)

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def log_text(self):
        return open(self.log, encoding="utf-8", errors="replace").read() if os.path.exists(self.log) else ""

    # Devices.
    def onboard(self, user, fields):
        status, headers, body = call("POST", f"{self.base}/odata/applications/v1/demo/Connections", fields,
                                     {"Authorization": basic(user, DEVICE_PASSWORD), "Accept": "application/json"})
        return status, header(headers, "X-SMP-APPCID"), body

    def push_path(self, os_name, device):
        return f"{self.base}/mobileservices/push/v1/runtime/applications/demo/os/{os_name}/devices/{urllib.parse.quote(device, safe='')}"

    def set_token(self, user, cid, os_name, token, method="POST", body=None):
        return call(method, self.push_path(os_name, cid), {"pushToken": token} if body is None else body,
                    {"Authorization": basic(user, DEVICE_PASSWORD), "X-SMP-APPCID": cid})

    def connection(self, user, cid):
        status, _, body = call("GET", f"{self.base}/odata/applications/v1/demo/Connections('{cid}')?$format=json",
                               headers={"Authorization": basic(user, DEVICE_PASSWORD), "X-SMP-APPCID": cid, "Accept": "application/json"})
        document = as_json(body) if status == 200 else None
        return (document or {}).get("d") if isinstance(document, dict) else None

    # Admin.
    def admin_call(self, method, path, body=None):
        return call(method, self.admin_base + path, body, {"Authorization": "Bearer " + ADMIN_TOKEN})

    # Senders.
    def send(self, path, body, sender="wf", password=SENDER_PASSWORD, version="v1"):
        headers = {} if sender is None else {"Authorization": basic(sender, password)}
        url = f"{self.base}/mobileservices/push/{version}/backend/applications/{path}"
        return call("POST", url, body, headers)

    def send_to_users(self, users, notification, **kwargs):
        status, _, body = self.send("demo/notifications/users", {"users": users, "notification": notification}, **kwargs)
        document = as_json(body)
        return status, (document or {}).get("notificationId") if isinstance(document, dict) else None, body

    def status_of(self, notification_id, sender="wf", password=SENDER_PASSWORD):
        status, _, body = call("GET", f"{self.base}/mobileservices/push/v1/backend/notifications/{notification_id}/status",
                               headers={"Authorization": basic(sender, password)})
        return status, as_json(body) if status == 200 else None, body

    def final_status(self, notification_id, seconds=DEADLINE):
        """The status once no delivery is pending (None if it never gets there); also the last seen."""
        seen = {}

        def done():
            _, document, body = self.status_of(notification_id)
            seen["last"] = document or short(body)
            if document and document.get("statusDetails", {}).get("status") != "QUEUED":
                return document
            return None
        return until(done, seconds), seen.get("last")

    def final_statuses(self, ids, seconds=DEADLINE):
        """{id: final status or None} for many notifications, awaited under one deadline."""
        finals = {nid: None for nid in ids}

        def done():
            for nid in [nid for nid, document in finals.items() if document is None]:
                _, document, _ = self.status_of(nid)
                if document and document.get("statusDetails", {}).get("status") != "QUEUED":
                    finals[nid] = document
            return all(document is not None for document in finals.values())
        until(done, seconds, step=0.5)
        return finals


def deliveries(document):
    return {d["registration"]: d for d in (document or {}).get("deliveries", [])}


def overall(document):
    return (document or {}).get("statusDetails", {}).get("status")


# --- Configuration --------------------------------------------------------------------------------

def hash_secret(secret):
    return subprocess.run([BIN, "hash-secret", "--cost", "10"], input=secret + "\n", capture_output=True, text=True,
                          check=True).stdout.strip()


def make_config(folder, k, apns_port, fcm_port, hashes, **settings):
    """The demo configuration with push for app `demo`, a second app without push, three senders
    and the test's device users; returns (config folder, device port, admin port)."""
    mport, aport = free_port(), free_port()
    config = demo_config(REPO, folder, mport, aport, adminTokenHashes=[hashes["admin"]], **settings)
    demo_path = os.path.join(config, "apps", "demo.json")
    demo = json.load(open(demo_path))
    json.dump(demo, open(os.path.join(config, "apps", "second.json"), "w"))   # the same app, without push
    demo["push"] = {
        "apns": {"teamId": k["team"], "keyId": k["apns_key_id"], "key": {"file": k["apns_p8"]}, "topic": TOPIC,
                 "environment": "sandbox", "endpoint": f"https://127.0.0.1:{apns_port}", "caFile": k["ca"]},
        "fcm": {"projectId": k["project"], "serviceAccount": {"file": k["service_account"]},
                "tokenURI": f"https://127.0.0.1:{fcm_port}/token", "endpoint": f"https://127.0.0.1:{fcm_port}", "caFile": k["ca"]}}
    json.dump(demo, open(demo_path, "w"))
    # The same app for users of an identity provider: another realm (for the capability push).
    idp_app = dict(demo, authentication={"type": "jwt", "issuer": "https://idp.devices.test", "audience": "midtier",
                                         "jwks": {"file": k["sender_jwks"]}})
    json.dump(idp_app, open(os.path.join(config, "apps", "idpapp.json"), "w"))
    json.dump({"senders": [{"name": "wf", "passwordHash": hashes["sender"], "apps": ["demo"]},
                           {"name": "tworealms", "passwordHash": hashes["sender"], "apps": ["demo", "idpapp"]},
                           {"name": "other", "passwordHash": hashes["sender"], "apps": ["demo"]},
                           {"name": "outsider", "passwordHash": hashes["sender"], "apps": ["second"]},
                           {"name": "keyed", "apiKeyHash": hashes["api key"], "apps": ["demo"]},
                           {"name": "tokened", "apps": ["demo"],
                            "oauth": {"issuer": SENDER_ISSUER, "audience": "midtier-push", "jwks": {"file": k["sender_jwks"]},
                                      "clientId": SENDER_CLIENT}}]},
              open(os.path.join(config, "push-senders.json"), "w"))
    users_path = os.path.join(config, "users.json")
    users = json.load(open(users_path))
    users["users"] += [{"id": user, "passwordHash": hashes["device"]} for user in USERS]
    json.dump(users, open(users_path, "w"))
    return config, mport, aport


def secrets_in_logs(paths, secret_values):
    """The names of the secrets found in any of the files."""
    found = []
    for path in paths:
        if not os.path.exists(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        found += [name for name, value in secret_values.items() if value and value in text]
    return sorted(set(found))


# --- The scenarios --------------------------------------------------------------------------------

def scenario_auth(m):
    url_body = {"alert": "hello"}
    status, _, body = m.send("demo/notifications", url_body, sender=None)
    check("1 no credentials: 401", status == 401, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", url_body, password="wrong-password")
    check("1 a wrong password: 401", status == 401, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", url_body, sender="ana", password=DEVICE_PASSWORD)
    check("1 a device user's credentials are not a sender's: 401", status == 401, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", url_body, sender="outsider")
    check("1 a sender not allowed the app: 403", status == 403, f"({status} {short(body)})")
    status, _, body = m.send("second/notifications", url_body)
    check("1 a sender sending to an app it is not allowed: 403", status == 403, f"({status} {short(body)})")
    status, _, body = m.send("nope/notifications", url_body)
    check("1 an unknown app: 403 or 404", status in (403, 404), f"({status} {short(body)})")
    status, _, body = m.status_of("00000000-0000-0000-0000-000000000000", password="wrong-password")
    check("1 the status with a wrong password: 401", status == 401, f"({status} {short(body)})")
    # SAP's other way for a sender: its API key in X-API-Key (SAP's Java library sends it so).
    unknown = f"{m.base}/mobileservices/push/v2/backend/notifications/00000000-0000-0000-0000-000000000000/status"
    status, _, body = call("GET", unknown, headers={"X-API-Key": SENDER_API_KEY})
    check("1 X-API-Key signs a sender in (an unknown notification: 404)", status == 404, f"({status} {short(body)})")
    status, _, body = call("GET", unknown, headers={"X-API-Key": SENDER_API_KEY[:-1] + ("0" if SENDER_API_KEY[-1] != "0" else "1")})
    check("1 a wrong X-API-Key: 401", status == 401, f"({status} {short(body)})")
    status, _, body = call("GET", unknown, headers={"X-API-Key": SENDER_API_KEY, "Authorization": basic("wf", SENDER_PASSWORD)})
    check("1 X-API-Key and Authorization together: 400", status == 400, f"({status} {short(body)})")
    status, _, body = call("POST", f"{m.base}/mobileservices/push/v2/backend/applications/second/notifications",
                           {"notification": {"alert": "hello"}}, {"X-API-Key": SENDER_API_KEY})
    check("1 a keyed sender sending to an app it is not allowed: 403", status == 403, f"({status} {short(body)})")


def scenario_oauth_sender(m, k):
    """SAP's third way for a sender (help.sap.com, "Sending Push Notifications"): an OAuth access
    token of its identity provider, got with client credentials, as `Authorization: Bearer`."""
    now = int(time.time())
    def token(**changes):
        claims = {"iss": SENDER_ISSUER, "aud": "midtier-push", "client_id": SENDER_CLIENT, "sub": SENDER_CLIENT,
                  "iat": now, "exp": now + 600}
        claims.update(changes)
        return jwt(k["sender_idp_key"], {name: value for name, value in claims.items() if value is not None})
    unknown = f"{m.base}/mobileservices/push/v2/backend/notifications/00000000-0000-0000-0000-000000000000/status"
    status, _, body = call("GET", unknown, headers={"Authorization": "Bearer " + token()})
    check("1b an OAuth access token signs the sender in (an unknown notification: 404)", status == 404, f"({status} {short(body)})")
    status, _, body = call("POST", f"{m.base}/mobileservices/push/v2/backend/applications/second/notifications",
                           {"notification": {"alert": "hello"}}, {"Authorization": "Bearer " + token()})
    check("1b ... as the sender it names, which may not send to another app: 403", status == 403, f"({status} {short(body)})")
    refused = [("another client", token(client_id="someone-else")), ("no client_id", token(client_id=None)),
               ("another audience", token(aud="elsewhere")), ("expired", token(iat=now - 7200, exp=now - 3600)),
               ("another issuer", token(iss="https://idp.other.test"))]
    other_key, _ = idp_key(os.path.join(os.path.dirname(k["sender_jwks"]), "keys"))
    refused.append(("signed by another key", jwt(other_key, {"iss": SENDER_ISSUER, "aud": "midtier-push", "client_id": SENDER_CLIENT,
                                                             "exp": now + 600})))
    for name, bad in refused:
        status, headers, body = call("GET", unknown, headers={"Authorization": "Bearer " + bad})
        check(f"1b a token of {name}: 401 with a Bearer challenge", status == 401 and "bearer" in (header(headers, "WWW-Authenticate") or "").lower(),
              f"({status} {header(headers, 'WWW-Authenticate')} {short(body)})")
    status, _, body = call("GET", unknown, headers={"Authorization": "Bearer " + token(), "X-API-Key": SENDER_API_KEY})
    check("1b a token and an X-API-Key together: 400", status == 400, f"({status} {short(body)})")


def scenario_two_devices(m, apns, fcm):
    ios = ios_token()
    android = "fcm-" + secrets.token_urlsafe(24)
    status, ios_cid, body = m.onboard("ana", {"DeviceType": "iOS", "DeviceModel": "iPhone15,2"})
    check("2 ana's iPhone onboards", status == 201 and ios_cid, f"({status} {short(body)})")
    status, _, body = m.set_token("ana", ios_cid, "ios", ios)
    check("2 its APNs token is stored through SAP's push registration path: 201", status == 201, f"({status} {short(body)})")
    status, android_cid, body = m.onboard("ana", {"DeviceType": "Android", "AndroidGcmRegistrationId": android})
    check("2 ana's Android phone onboards with AndroidGcmRegistrationId", status == 201 and android_cid, f"({status} {short(body)})")
    device = m.connection("ana", ios_cid) or {}
    check("2 GET Connections shows the iPhone's ApnsDeviceToken", device.get("ApnsDeviceToken") == ios, "(token differs or missing)")

    notification = {"title": "Payslip", "body": "Your payslip for May is ready", "badge": 1, "custom": {"kind": "payslip"}}
    status, nid, body = m.send_to_users(["ana", "nobody-at-all"], notification)
    check("2 the send to ana is accepted: 202 with a notificationId", status == 202 and nid, f"({status} {short(body)})")
    if not nid:
        return
    # SAP's pushResults: one per device registration (its id, code 0), code 2 for a user with none.
    results = {r.get("target"): r for r in (as_json(body) or {}).get("pushResults", [])}
    check("2 pushResults name ana's two registrations (code 0) and the user without one (code 2)",
          set(results) == {ios_cid, android_cid, "nobody-at-all"} and results[ios_cid].get("code") == 0
          and results[android_cid].get("code") == 0 and results[ios_cid].get("notificationId") == nid
          and results["nobody-at-all"].get("code") == 2, f"({short(body)})")
    document, last = m.final_status(nid)
    check("2 the status comes to SENT", overall(document) == "SENT", f"(last seen {last})")
    check("2 the status's notificationType names both services", ((document or {}).get("statusDetails") or {}).get("notificationType")
          == "ios,android", f"({document})")
    got = deliveries(document)
    check("2 the status has 2 deliveries, both delivered (APNs to the iPhone, FCM to the Android)",
          len(got) == 2 and got.get(ios_cid, {}).get("status") == "delivered" and got.get(android_cid, {}).get("status") == "delivered"
          and got.get(ios_cid, {}).get("provider") == "apns" and got.get(android_cid, {}).get("provider") == "fcm", f"({got})")
    # The deliveries a page at a time (a notification to a whole app may have a million).
    url = f"{m.base}/mobileservices/push/v1/backend/notifications/{nid}/status"
    auth = {"Authorization": basic("wf", SENDER_PASSWORD)}
    status, _, body = call("GET", url + "?limit=1", headers=auth)
    first = as_json(body) or {}
    check("2 the status with limit=1: one delivery, a deliveriesNext, the counts' status all the same",
          status == 200 and len(first.get("deliveries", [])) == 1 and isinstance(first.get("deliveriesNext"), str)
          and overall(first) == "SENT", f"({status} {short(body)})")
    status, _, body = call("GET", url + "?limit=1&after=" + urllib.parse.quote(first.get("deliveriesNext") or "", safe=""), headers=auth)
    second = as_json(body) or {}
    check("2 ... and after it the other delivery, with no deliveriesNext",
          status == 200 and len(second.get("deliveries", [])) == 1 and "deliveriesNext" not in second
          and {d.get("registration") for d in first.get("deliveries", []) + second.get("deliveries", [])} == {ios_cid, android_cid},
          f"({status} {short(body)})")
    for query, name in [("limit=0", "limit"), ("limit=501", "limit"), ("limit=1&limit=2", "limit"), ("after=xyz", "after"),
                        ("limit=01", "limit")]:
        status, _, body = call("GET", f"{url}?{query}", headers=auth)
        check(f"2 the status with {query}: 400 naming {name}", status == 400 and name.encode() in body, f"({status} {short(body)})")
    status, _, body = call("GET", url + "?after=", headers=auth)
    check("2 the status with an empty after: the first page (as an empty form field)",
          status == 200 and len((as_json(body) or {}).get("deliveries", [])) == 2, f"({status} {short(body)})")
    # The id percent-encoded is the same notification; a trailing or double slash is no path.
    encoded = "".join(f"%{ord(c):02X}" for c in nid)
    status, _, body = call("GET", f"{m.base}/mobileservices/push/v1/backend/notifications/{encoded}/status", headers=auth)
    check("2 the status of the id percent-encoded: the same notification",
          status == 200 and ((as_json(body) or {}).get("statusDetails") or {}).get("notificationId") == nid, f"({status} {short(body)})")
    for path in [f"notifications/{nid}/status/", f"notifications//{nid}/status", f"notifications/{nid}%00x/status",
                 f"notifications/%00{nid}/status"]:
        status, _, body = call("GET", f"{m.base}/mobileservices/push/v1/backend/{path}", headers=auth)
        check(f"2 the status at .../{path}: 404", status == 404, f"({status} {short(body)})")
    entries = apns_lines_for(apns, nid)
    entry = entries[0] if entries else {}
    aps = (entry.get("payload") or {}).get("aps") or {}
    check("2 APNs got one request for the iPhone's token, answered 200", len(entries) == 1 and entry.get("token") == ios
          and entry.get("status") == 200, f"({len(entries)} requests, status {entry.get('status')}, reason {entry.get('reason')})")
    check("2 ... with the app's topic and aps.alert (title and body), badge and the custom member",
          entry.get("topic") == TOPIC and isinstance(aps.get("alert"), dict) and aps["alert"].get("title") == "Payslip"
          and aps["alert"].get("body") == notification["body"] and aps.get("badge") == 1
          and entry.get("payload", {}).get("kind") == "payslip", f"(topic {entry.get('topic')}, aps {aps})")
    entries = fcm_lines_for(fcm, nid)
    entry = entries[0] if entries else {}
    message = entry.get("message") or {}
    check("2 FCM got one message for the Android's token, answered 200", len(entries) == 1 and entry.get("token") == android
          and message.get("token") == android and entry.get("status") == 200,
          f"({len(entries)} requests, status {entry.get('status')}, errorCode {entry.get('errorCode')})")
    check("2 ... with the notification's title and body and the custom member as data",
          message.get("notification") == {"title": "Payslip", "body": notification["body"]}
          and (message.get("data") or {}).get("kind") == "payslip", f"({ {k: v for k, v in message.items() if k != 'token'} })")

    # A new token replaces the old one (PUT on SAP's path), and DELETE removes it.
    newer = ios_token()
    status, _, body = m.set_token("ana", ios_cid, "ios", newer, method="PUT")
    check("2 PUT of a new APNs token: 200", status == 200, f"({status} {short(body)})")
    status, nid, body = m.send_to_users(["ana"], {"alert": "second"})
    document, last = m.final_status(nid) if nid else (None, None)
    check("2 the next notification goes to the new token, not the old one",
          overall(document) == "SENT" and [e.get("token") for e in apns_lines_for(apns, nid)] == [newer],
          f"({status} {last} tokens {'new' if lines_with_token(apns, newer) else 'none'})")
    status, _, body = m.set_token("ana", ios_cid, "ios", None, method="DELETE", body=b"")
    device = m.connection("ana", ios_cid) or {}
    check("2 DELETE on SAP's path removes the APNs token: 204, ApnsDeviceToken empty", status == 204 and device.get("ApnsDeviceToken") == "",
          f"({status} {short(body)})")
    return ios_cid, android_cid


def scenario_locked_blocked(m, apns, fcm):
    lee_token, bo_token = ios_token(), "fcm-" + secrets.token_urlsafe(24)
    status, lee_cid, _ = m.onboard("lee", {"DeviceType": "iOS", "ApnsDeviceToken": lee_token})
    status2, bo_cid, _ = m.onboard("bo", {"DeviceType": "Android", "AndroidGcmRegistrationId": bo_token})
    fay_token = ios_token()
    status3, fay_cid, _ = m.onboard("fay", {"DeviceType": "iOS", "ApnsDeviceToken": fay_token})
    check("3 lee (iOS), bo (Android) and fay (iOS) onboard", status == status2 == status3 == 201, f"({status} {status2} {status3})")
    status, _, body = m.admin_call("POST", f"/admin/v1/registrations/{lee_cid}/lock")
    check("3 lee's registration is locked (admin API)", status == 200, f"({status} {short(body)})")
    status, _, body = m.admin_call("PUT", "/admin/v1/users/bo/block", {"type": "traffic", "reason": "push test"})
    check("3 bo is blocked (admin API)", status == 200, f"({status} {short(body)})")

    status, nid, body = m.send_to_users(["lee", "bo", "fay"], {"alert": "to lee, bo and fay"})
    check("3 the send to lee, bo and fay is accepted", status == 202 and nid, f"({status} {short(body)})")
    if not nid:
        return
    document, last = m.final_status(nid)
    got = deliveries(document)
    check("3 fay (neither locked nor blocked) is delivered", got.get(fay_cid, {}).get("status") == "delivered", f"({last})")
    check("3 the blocked user's delivery is skipped", got.get(bo_cid, {}).get("status") == "skipped", f"({got.get(bo_cid)})")
    check("3 the locked registration is not delivered (skipped or left out)", got.get(lee_cid, {}).get("status") in (None, "skipped"),
          f"({got.get(lee_cid)})")
    check("3 APNs never saw the locked registration's token, FCM never the blocked user's",
          not lines_with_token(apns, lee_token) and not lines_with_token(fcm, bo_token),
          f"({len(lines_with_token(apns, lee_token))} APNs, {len(lines_with_token(fcm, bo_token))} FCM requests)")
    status, _, body = m.send("demo/users/lee/devices/" + lee_cid + "/notifications", {"alert": "to the locked device"})
    check("3 a send to the locked device itself delivers nothing (404: no registration with a token, or 202 then skipped)",
          status == 404 or (status == 202 and not lines_with_token(apns, lee_token)), f"({status} {short(body)})")


def scenario_gone(m, apns, fcm):
    gone_ios, gone_android = ios_token("0410"), "gone-" + secrets.token_urlsafe(20)
    status, ios_cid, _ = m.onboard("gina", {"DeviceType": "iOS"})
    status2, _, body = m.set_token("gina", ios_cid or "-", "ios", gone_ios)
    status3, android_cid, _ = m.onboard("gina", {"DeviceType": "Android", "AndroidGcmRegistrationId": gone_android})
    check("4 gina's iPhone (a 0410 token) and Android (a gone- token) are registered", (status, status2, status3) == (201, 201, 201),
          f"({status} {status2} {status3} {short(body)})")
    status, nid, body = m.send_to_users(["gina"], {"alert": "are you there?"})
    check("4 the send to gina is accepted", status == 202 and nid, f"({status} {short(body)})")
    if not nid:
        return
    document, last = m.final_status(nid)
    got = deliveries(document)
    check("4 the status is ERROR with both deliveries failed", overall(document) == "ERROR"
          and [got.get(ios_cid, {}).get("status"), got.get(android_cid, {}).get("status")] == ["failed", "failed"], f"({last})")
    check("4 APNs was asked once (410 is not retried) and FCM once (UNREGISTERED is not retried)",
          [e.get("status") for e in lines_with_token(apns, gone_ios)] == [410]
          and [e.get("errorCode") for e in lines_with_token(fcm, gone_android)] == ["UNREGISTERED"],
          f"(APNs {[e.get('status') for e in lines_with_token(apns, gone_ios)]}, FCM {[e.get('errorCode') for e in lines_with_token(fcm, gone_android)]})")
    ios_device = until(lambda: (lambda d: d if d and d.get("ApnsDeviceToken") == "" else None)(m.connection("gina", ios_cid)), seconds=10)
    check("4 APNs 410 cleared the iPhone's ApnsDeviceToken (GET Connections)", ios_device is not None,
          f"({'still set' if (m.connection('gina', ios_cid) or {}).get('ApnsDeviceToken') else 'unreadable'})")
    android_device = until(lambda: (lambda d: d if d and d.get("AndroidGcmRegistrationId") == "" else None)(m.connection("gina", android_cid)), seconds=10)
    check("4 FCM UNREGISTERED cleared the Android's AndroidGcmRegistrationId (GET Connections)", android_device is not None,
          f"({'still set' if (m.connection('gina', android_cid) or {}).get('AndroidGcmRegistrationId') else 'unreadable'})")
    status, _, body = m.send_to_users(["gina"], {"alert": "again"})
    check("4 a second send to gina finds no token left: 404", status == 404, f"({status} {short(body)})")


def scenario_retries(m, apns, fcm):
    busy_ios, failing_ios = ios_token("0429"), ios_token("0500")
    busy_android, failing_android = "busy-" + secrets.token_urlsafe(20), "fail-" + secrets.token_urlsafe(20)
    cids = []
    for fields in [{"DeviceType": "iOS", "ApnsDeviceToken": busy_ios}, {"DeviceType": "iOS", "ApnsDeviceToken": failing_ios},
                   {"DeviceType": "Android", "AndroidGcmRegistrationId": busy_android},
                   {"DeviceType": "Android", "AndroidGcmRegistrationId": failing_android}]:
        status, cid, _ = m.onboard("rita", fields)
        cids.append(cid if status == 201 else None)
    check("5 rita's four devices onboard (0429 and 0500 APNs tokens, busy- and fail- FCM tokens)", all(cids), f"({cids})")
    status, nid, body = m.send_to_users(["rita"], {"alert": "retry me"})
    check("5 the send to rita is accepted", status == 202 and nid, f"({status} {short(body)})")
    if not nid:
        return
    document, last = m.final_status(nid)
    got = deliveries(document)
    check("5 all four are delivered in the end (SENT)", overall(document) == "SENT"
          and all(got.get(cid, {}).get("status") == "delivered" for cid in cids), f"({last})")
    answers = [e.get("status") for e in lines_with_token(apns, busy_ios)]
    check("5 APNs 429 with Retry-After: 3 attempts in the stand-in's log (429, 429, 200)", answers == [429, 429, 200], f"({answers})")
    times = [e.get("time") for e in lines_with_token(apns, busy_ios)]
    check("5 ... each retry no earlier than the Retry-After second",
          len(times) == 3 and all(b - a >= 0.9 for a, b in zip(times, times[1:])), f"({[round(b - a, 2) for a, b in zip(times, times[1:])]})")
    check("5 the status counts 3 attempts for it", got.get(cids[0], {}).get("attempts") == 3, f"({got.get(cids[0])})")
    answers = [e.get("status") for e in lines_with_token(apns, failing_ios)]
    check("5 APNs 500: retried once, then delivered (500, 200)", answers == [500, 200], f"({answers})")
    answers = [e.get("status") for e in lines_with_token(fcm, busy_android)]
    check("5 FCM 429 with Retry-After: 3 attempts (429, 429, 200)", answers == [429, 429, 200], f"({answers})")
    answers = [e.get("status") for e in lines_with_token(fcm, failing_android)]
    check("5 FCM 503: retried once, then delivered (503, 200)", answers == [503, 200], f"({answers})")


def scenario_hostile(m):
    notification = {"alert": "x"}
    status, _, body = m.send("demo/notifications", {"alert": "x", "colour": "red"})
    check("8 an unknown member: 400 naming it", status == 400 and b"colour" in body, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", {"alert": "y" * 5000})
    check("8 a 5000-character alert: 400 naming the size", status == 400 and b"4096" in body and b"bytes" in body, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", b'{"alert": "x",')
    check("8 malformed JSON: 400", status == 400, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", b'\xff\xfe{"alert":"x"}')
    check("8 a body that is not UTF-8: 400", status == 400, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", [notification])
    check("8 a JSON array instead of an object: 400", status == 400, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications/users", {"users": "ana", "notification": notification})
    check("8 users not a list: 400 naming users", status == 400 and b"users" in body, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications/users", {"users": [f"u{n}" for n in range(1001)], "notification": notification})
    check("8 1001 users: 400 naming the limit", status == 400 and b"1000" in body, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications/users", {"users": [42], "notification": notification})
    check("8 a user that is a number: 400 naming users[0]", status == 400 and b"users[0]" in body, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", {"alert": "x", "badge": "one"})
    check("8 a badge that is text: 400 naming badge", status == 400 and b"badge" in body, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", {})
    check("8 an empty notification: 400", status == 400, f"({status} {short(body)})")
    for text in ["red \u001b[31malert", "a\u0000b"]:
        status, _, body = m.send("demo/notifications", {"alert": text})
        check(f"8 a control character in the alert ({text[:5]!r}): 400 naming notification.alert",
              status == 400 and b"notification.alert has a control character" in body, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", {"alert": "x", "gcm": {"title": "t\u0085"}})
    check("8 a C1 control character in gcm.title: 400 naming it", status == 400 and b"notification.gcm.title" in body,
          f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications", b"{" + b'"alert":"' + b"z" * (300 * 1024) + b'"}')
    check("8 a 300 KB body: 413 or 400, not accepted", status in (400, 413), f"({status} {short(body)})")

    # Another sender asking for a notification it did not send; a made-up id.
    status, mallory, _ = m.onboard("mallory", {"DeviceType": "iOS", "ApnsDeviceToken": ios_token()})
    status, nid, body = m.send_to_users(["mallory"], {"alert": "for mallory"})
    check("8 (a notification of wf to read the status of)", status == 202 and nid, f"({status} {short(body)})")
    if nid:
        status, _, body = m.status_of(nid)
        check("8 its sender reads its status: 200", status == 200, f"({status} {short(body)})")
        status, _, body = m.status_of(nid, sender="other")
        check("8 another sender asking its status: 404", status == 404, f"({status} {short(body)})")
    status, _, body = m.status_of("no-such-notification")
    check("8 the status of an unknown id: 404", status == 404, f"({status} {short(body)})")

    # Device side.
    status, _, body = m.set_token("mallory", mallory or "-", "windows", "abcd")
    check("8 an os other than ios/android: 400 naming it", status == 400 and b"windows" in body, f"({status} {short(body)})")
    status, _, body = m.set_token("mallory", mallory or "-", "android", "has a space")
    check("8 a push token with a space: 400", status == 400, f"({status} {short(body)})")
    status, _, body = m.set_token("mallory", mallory or "-", "ios", "not-hex-" + "z" * 10)
    check("8 an iOS push token that is not hex: 400", status == 400, f"({status} {short(body)})")
    status, _, body = m.set_token("mallory", mallory or "-", "android", None, body=b"{not json")
    check("8 a push registration that is not JSON: 400", status == 400, f"({status} {short(body)})")
    status, _, body = m.set_token("mallory", mallory or "-", "android", None, body={"pushToken": 5})
    check("8 a pushToken that is a number: 400", status == 400 and b"pushToken" in body, f"({status} {short(body)})")
    ana_token = ios_token()
    status, ana_cid, _ = m.onboard("victim", {"DeviceType": "iOS", "ApnsDeviceToken": ana_token})
    # SAP lets a device choose its own device id: mallory naming victim's registration id binds
    # that id to mallory's own registration; victim's keeps its token.
    mallory_token = ios_token()
    status, _, body = call("POST", m.push_path("ios", ana_cid or "-"), {"pushToken": mallory_token},
                           {"Authorization": basic("mallory", DEVICE_PASSWORD), "X-SMP-APPCID": mallory or "-"})
    check("8 a user naming another user's registration id as his device id sets his own registration's token",
          status == 201 and (m.connection("mallory", mallory) or {}).get("ApnsDeviceToken") == mallory_token
          and (m.connection("victim", ana_cid) or {}).get("ApnsDeviceToken") == ana_token, f"({status} {short(body)})")
    status, _, body = call("POST", m.push_path("ios", mallory or "-"), {"pushToken": ios_token()},
                           {"Authorization": basic("mallory", "wrong-password"), "X-SMP-APPCID": mallory or "-"})
    check("8 a push registration with a wrong password: 401", status == 401, f"({status} {short(body)})")


def scenario_one_fcm_token(m, fcm):
    before = fcm.stats() or {}
    tokens = ["fcm-" + secrets.token_urlsafe(16) for _ in range(5)]
    for token in tokens:
        m.onboard("multi", {"DeviceType": "Android", "AndroidGcmRegistrationId": token})
    ids = []
    for n in range(4):
        status, nid, _ = m.send_to_users(["multi"], {"alert": f"many {n}"})
        ids.append(nid)
    finals = list(m.final_statuses([nid for nid in ids if nid]).values())
    after = fcm.stats() or {}
    sent = after.get("delivered", 0) - before.get("delivered", 0)
    check("9 20 FCM messages delivered (5 devices x 4 notifications)", all(overall(f) == "SENT" for f in finals) and sent >= 20, f"({sent})")
    check("9 the FCM access token was fetched once for all messages so far (tokensIssued == 1)", after.get("tokensIssued") == 1,
          f"(tokensIssued {after.get('tokensIssued')}, FCM messages delivered {after.get('delivered')})")


def scenario_metrics(m):
    """Push metrics on the admin listener's /metrics: deliveries by outcome and provider (labels
    from a fixed set, never a user or token), the time to delivery and the queue depth."""
    status, _, body = call("GET", m.admin_base + "/metrics")
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    check("metrics: /metrics answers", status == 200, f"({status})")
    for needle in ['midtier_push_deliveries_total{outcome="delivered",provider="apns"}',
                   'midtier_push_deliveries_total{outcome="delivered",provider="fcm"}',
                   'midtier_push_deliveries_total{outcome="token_gone",provider="apns"}',
                   'midtier_push_deliveries_total{outcome="retried",provider="apns"}',
                   'midtier_push_deliveries_total{outcome="skipped",provider="none"}',
                   "midtier_push_delivery_seconds_bucket", "midtier_push_queue_depth"]:
        check(f"metrics: {needle.split('{')[0]} {needle[needle.find('{'):] if '{' in needle else ''}".strip(), needle in text)


def scenario_background(m, apns, fcm):
    """10. Issue 36 item 10: a notification with nothing to show reaches iOS as a background push,
    which Apple requires to carry content-available: 1."""
    token = ios_token()
    status, cid, _ = m.onboard("silent", {"DeviceType": "iOS", "ApnsDeviceToken": token})
    status, nid, body = m.send_to_users(["silent"], {"data": "sync", "custom": {"kind": "refresh"}})
    check("10 a data-only notification is accepted", status == 202 and nid, f"({status} {short(body)})")
    document, last = m.final_status(nid) if nid else (None, None)
    entries = apns_lines_for(apns, nid) if nid else []
    entry = entries[0] if entries else {}
    check("10 it goes to APNs as a background push: aps is exactly {content-available: 1}, push type background, priority 5",
          overall(document) == "SENT" and len(entries) == 1 and (entry.get("payload") or {}).get("aps") == {"content-available": 1}
          and entry.get("apns-push-type") == "background" and entry.get("apns-priority") == "5"
          and (entry.get("payload") or {}).get("kind") == "refresh", f"({last}, {entry})")
    # Issue 36 item 5: to Android, an alert with data goes as SAP's FCM provider sends it — a data
    # message (no notification block) with the data object's pairs and the alert as data.
    status, _, _ = m.onboard("silent", {"DeviceType": "Android", "AndroidGcmRegistrationId": "fcm-" + secrets.token_urlsafe(20)})
    status, nid, body = m.send_to_users(["silent"], {"alert": "Sync done", "data": json.dumps({"entity": "Leave", "id": "42"})})
    m.final_status(nid) if nid else None
    sent = fcm_lines_for(fcm, nid) if nid else []
    message = (sent[0].get("message") or {}) if sent else {}
    check("10 to Android an alert with data is a data message: no notification, the data's pairs and the alert as data",
          len(sent) == 1 and "notification" not in message and "notification" not in (message.get("android") or {})
          and message.get("data") == {"entity": "Leave", "id": "42", "alert": "Sync done", "notificationId": nid}, f"({status} {message})")


def scenario_sender_api(m, apns, fcm):
    """13. Issue 36 item 3: the rest of SAP's Notification Backend API — a push group, a bulk
    send, reading registrations and locales; topics and capabilities answer 501 naming why."""
    sales_token, other_token = ios_token(), ios_token()
    _, sales_cid, _ = m.onboard("grouped", {"DeviceType": "iOS"})
    status, _, body = m.set_token("grouped", sales_cid or "-", "ios", None,
                                  body={"pushToken": sales_token, "pushGroup": "sales", "userLocale": "de_DE"})
    _, other_cid, _ = m.onboard("ungrouped", {"DeviceType": "iOS"})
    m.set_token("ungrouped", other_cid or "-", "ios", None, body={"pushToken": other_token, "pushGroup": "Sales", "userLocale": "fr_FR"})
    status, _, body = m.send("demo/groups/sales/notifications", {"notification": {"alert": "to sales"}}, version="v2")
    document = as_json(body) or {}
    nid = document.get("notificationId")
    check("13 a push to group sales: 202, to the registration in that group only (not Sales)",
          status == 202 and [r.get("target") for r in document.get("pushResults", [])] == [sales_cid], f"({status} {short(body)})")
    status, _, body = m.send("demo/groups/nobody/notifications", {"notification": {"alert": "x"}}, version="v2")
    check("13 a push to a group nobody is in: 404 with code 2", status == 404 and b'"code":2' in body, f"({status} {short(body)})")
    if nid:
        m.final_status(nid)
        check("13 the group's notification reached only its device", len(lines_with_token(apns, sales_token)) == 1
              and not lines_with_token(apns, other_token), f"({len(lines_with_token(apns, sales_token))})")

    status, _, body = m.send("demo/notifications/bulk", {
        "notification": {"alert": "common"},
        "userNotifications": [{"user": "grouped", "notification": {"alert": "for grouped"}}, {"user": "ungrouped"}, {"user": "nobody-here"}]},
        version="v2")
    results = (as_json(body) or {}).get("pushResults", [])
    by_target = {r.get("target"): r for r in results}
    check("13 a bulk send: 202, each user's registration with its own notification, code 2 for a user without one",
          status == 202 and by_target.get(sales_cid, {}).get("code") == 0 and by_target.get(other_cid, {}).get("code") == 0
          and by_target.get(sales_cid, {}).get("notificationId") != by_target.get(other_cid, {}).get("notificationId")
          and by_target.get("nobody-here", {}).get("code") == 2, f"({status} {short(body)})")
    finals = m.final_statuses([r.get("notificationId") for r in results if r.get("notificationId")])
    alerts = {e.get("token"): ((e.get("payload") or {}).get("aps") or {}).get("alert") for e in apns.lines()
              if e.get("token") in (sales_token, other_token) and (e.get("payload") or {}).get("notificationId") in finals}
    check("13 ... each user got their own text, or the common one", alerts == {sales_token: "for grouped", other_token: "common"}, f"({alerts})")
    status, _, body = m.send("demo/notifications/bulk", {"userNotifications": [{"user": "grouped"}]}, version="v2")
    check("13 a bulk entry without a notification and no common one: 400", status == 400, f"({status} {short(body)})")
    status, _, body = m.send("demo/notifications/bulk", {"notification": {"alert": "x"}, "userNotifications": [{"user": "grouped", "notifcation": {}}]},
                             version="v2")
    check("13 a bulk entry with a member SAP's bulk push does not take: 400 naming it", status == 400 and b"notifcation" in body,
          f"({status} {short(body)})")
    status, _, body = m.send_to_users(["grouped", "grouped", {"realm": "", "id": "grouped"}], {"alert": "once"})
    results = (as_json(body) or {}).get("pushResults", [])
    check("13 a user named three times is one target: one pushResult", status == 202 and len(results) == 1, f"({status} {short(body)})")

    base = f"{m.base}/mobileservices/push/v2/backend"
    auth = {"Authorization": basic("wf", SENDER_PASSWORD)}
    status, _, body = call("GET", f"{base}/registrations?username=grouped", headers=auth)
    listed = (as_json(body) or {}).get("value") or []
    check("13 GET registrations?username= lists the user's push registrations in SAP's shape",
          status == 200 and len(listed) == 1 and listed[0].get("id") == sales_cid and listed[0].get("pushGroup") == "sales"
          and listed[0].get("pushProvider") == "ios" and listed[0].get("username") == "grouped" and listed[0].get("userLocale") == "de_DE",
          f"({status} {short(body)})")
    status, _, body = call("GET", f"{base}/registrations?pushGroup=Sales", headers=auth)
    check("13 GET registrations?pushGroup= by the group's exact bytes", status == 200
          and [r.get("id") for r in (as_json(body) or {}).get("value") or []] == [other_cid], f"({status} {short(body)})")
    status, _, body = call("GET", f"{base}/registrations/{other_cid}", headers=auth)
    check("13 GET registrations/{id}: the one", status == 200 and (as_json(body) or {}).get("id") == other_cid, f"({status} {short(body)})")
    status, _, body = call("GET", f"{base}/registrations/{other_cid}", headers={"Authorization": basic("outsider", SENDER_PASSWORD)})
    check("13 a sender of another app does not see it: 404", status == 404, f"({status} {short(body)})")
    status, _, body = call("GET", f"{base}/localizations?usernames=grouped&usernames=ungrouped", headers=auth)
    check("13 GET localizations: the users' locales", status == 200 and sorted(as_json(body) or []) == ["de_DE", "fr_FR"], f"({status} {short(body)})")
    status, _, body = call("GET", f"{base}/registrations", headers={})
    check("13 reading registrations without credentials: 401", status == 401, f"({status} {short(body)})")
    status, _, body = call("GET", f"{base}/registrations?applicationId=demo&applicationId=second", headers=auth)
    check("13 a filter given twice: 400 naming it (not its first value)", status == 400 and b"applicationId" in body, f"({status} {short(body)})")
    for path in ["demo/topics/notifications"]:
        status, _, body = m.send(path, {"notification": {"alert": "x"}}, version="v2")
        check(f"13 {path}: 501 naming what Midtier does not do", status == 501 and b"topics" in body, f"({status} {short(body)})")


ATOM_WITH_CAPABILITY = """<?xml version='1.0' encoding='utf-8'?>
<entry xmlns="http://www.w3.org/2005/Atom" xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices"
       xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
 <link rel="http://schemas.microsoft.com/ado/2007/08/dataservices/related/Capability" type="application/atom+xml;type=feed" title="Capability">
  <m:inline><feed><entry><content type="application/xml"><m:properties>
   <d:Category>push</d:Category><d:CapabilityName>purchaseOrder-display</d:CapabilityName>
  </m:properties></content></entry></feed></m:inline>
 </link>
 <content type="application/xml"><m:properties><d:FormFactor>tablet</d:FormFactor><d:DeviceType>iPad</d:DeviceType>
  <d:ApnsDeviceToken>{token}</d:ApnsDeviceToken></m:properties></content>
</entry>"""


def scenario_capabilities(m, apns):
    """13b. SAP's push to a capability: devices register capabilities with their registration
    (help.sap.com, "Create Capabilities Upon Registration", in JSON or as an Atom inline feed);
    a sender reaches the named users' devices with that capability and form factor."""
    phone, tablet, plain, other = ios_token(), ios_token(), ios_token(), ios_token()
    capability = [{"Category": "push", "CapabilityName": "purchaseOrder-display"}]
    _, phone_cid, _ = m.onboard("capable", {"DeviceType": "iPhone", "FormFactor": "smartphone", "ApnsDeviceToken": phone, "Capability": capability})
    status, headers, body = call("POST", f"{m.base}/odata/applications/v1/demo/Connections", ATOM_WITH_CAPABILITY.format(token=tablet).encode(),
                                 {"Authorization": basic("capable", DEVICE_PASSWORD), "Content-Type": "application/atom+xml"})
    tablet_cid = header(headers, "X-SMP-APPCID")
    _, plain_cid, _ = m.onboard("capable", {"DeviceType": "iPhone", "FormFactor": "phone", "ApnsDeviceToken": plain})
    _, other_cid, _ = m.onboard("incapable", {"DeviceType": "iPhone", "FormFactor": "phone", "ApnsDeviceToken": other,
                                              "Capability": {"results": [{"Category": "push", "CapabilityName": "leave-approve"}]}})
    check("13b four registrations with and without capabilities (JSON, OData's results, Atom inline feed)",
          all([phone_cid, tablet_cid, plain_cid, other_cid]), f"({status} {short(body)})")
    url = f"{m.base}/mobileservices/push/v2/backend/capabilities/purchaseOrder-display/notifications"
    auth = {"Authorization": basic("wf", SENDER_PASSWORD)}
    status, _, body = call("POST", url, {"notification": {"alert": "PO 4711"},
                                         "users": [{"user": "capable", "formFactor": ["phone"], "badge": 7},
                                                   {"user": "incapable", "formFactor": ["phone", "tablet"]}]}, auth)
    results = (as_json(body) or {}).get("pushResults") or []
    check("13b a push to a capability for phones: 202, the phone with it (code 0), code 2 for the user without it",
          status == 202 and [(r.get("target"), r.get("code")) for r in results] == [(phone_cid, 0), ("incapable", 2)],
          f"({status} {short(body)})")
    finals = m.final_statuses([r.get("notificationId") for r in results if r.get("notificationId")])
    got = {e.get("token"): ((e.get("payload") or {}).get("aps") or {}) for e in apns.lines() if e.get("token") in (phone, tablet, plain, other)}
    check("13b ... APNs got it for that phone only, with the user's badge",
          set(got) == {phone} and got[phone].get("badge") == 7 and "PO 4711" in json.dumps(got[phone].get("alert")), f"({got} {finals})")
    status, _, body = call("POST", url, {"notification": {"alert": "PO 4712"}, "users": [{"user": "capable", "formFactor": ["phone", "tablet"]}]}, auth)
    check("13b phones and tablets: the phone and the tablet (its capability from the Atom feed), not the registration without it",
          status == 202 and sorted(r.get("target") for r in (as_json(body) or {}).get("pushResults") or []) == sorted([phone_cid, tablet_cid]),
          f"({status} {short(body)})")
    status, _, body = call("PUT", f"{m.base}/odata/applications/v1/demo/Connections('{phone_cid}')", {"Capability": []},
                           {"Authorization": basic("capable", DEVICE_PASSWORD), "X-SMP-APPCID": phone_cid or ""})
    check("13b an update with an empty Capability list clears the phone's", status in (200, 204), f"({status} {short(body)})")
    status, _, body = call("POST", url, {"notification": {"alert": "x"}, "users": [{"user": "capable", "formFactor": ["phone"]}]}, auth)
    check("13b ... so a push to phones finds none: 404 with code 2", status == 404 and b'"code":2' in body, f"({status} {short(body)})")
    for name, bad, named in [("badges per registration", {"users": [{"user": "capable", "badges": {"x": 1}}]}, b"badges"),
                             ("a misspelt member", {"users": [{"user": "capable", "fromFactor": ["phone"]}]}, b"fromFactor"),
                             ("no users", {"users": []}, b"users")]:
        status, _, body = call("POST", url, {"notification": {"alert": "x"}, **bad}, auth)
        check(f"13b {name}: 400 naming it", status == 400 and named in body, f"({status} {short(body)})")
    status, _, body = call("POST", f"{m.base}/odata/applications/v1/demo/Connections",
                           {"DeviceType": "iPhone", "Capability": [{"Category": "push", "CapabilityName": "bad\u001bname"}]},
                           {"Authorization": basic("capable", DEVICE_PASSWORD)})
    check("13b a capability with a control character: 400", status == 400 and b"Capability" in body, f"({status} {short(body)})")
    status, _, body = call("POST", url, {"notification": {"alert": "x"}, "users": [{"user": "capable"}]},
                           {"Authorization": basic("outsider", SENDER_PASSWORD)})
    check("13b a sender whose apps have no push: 404", status == 404, f"({status} {short(body)})")
    # Found by the outside attack of issue 36.
    status, _, body = call("POST", url, {"notification": {"alert": "PO 4713"},
                                         "users": [{"user": "capable", "formFactor": ["tablet"]}] * 5}, auth)
    check("13b a user named five times is one target: one pushResult, one notification",
          status == 202 and len((as_json(body) or {}).get("pushResults") or []) == 1, f"({status} {short(body)})")
    status, _, body = call("POST", url, {"notification": {"alert": "x"}, "users": [{"user": "capable"}]},
                           {"Authorization": basic("tworealms", SENDER_PASSWORD)})
    check("13b a bare user id from a sender whose apps have users in two realms: 400 asking for the realm",
          status == 400 and b"realm" in body, f"({status} {short(body)})")
    status, _, body = call("POST", url, {"notification": {"alert": "x"}, "users": [{"user": {"realm": "", "id": "capable"}, "formFactor": ["tablet"]}]},
                           {"Authorization": basic("tworealms", SENDER_PASSWORD)})
    check("13b ... named with its realm, it reaches that realm's user only",
          status == 202 and [r.get("target") for r in (as_json(body) or {}).get("pushResults") or []] == [tablet_cid], f"({status} {short(body)})")
    status, _, body = call("POST", url, {"notification": {"alert": "B" * 3888}, "users": [{"user": "capable", "badge": 999999}]}, auth)
    check("13b a badge that makes the notification too large for a push service: 400", status == 400 and b"badge" in body,
          f"({status} {short(body)})")
    status, _, body = call("POST", url, {"notification": {"alert": "x"}, "users": [{"user": {"id": "capable", "realm": 5}}]}, auth)
    check("13b a realm that is not text: 400", status == 400 and b"realm" in body, f"({status} {short(body)})")


def scenario_slow_apns(m, apns, fcm):
    """11. Issue 36 items 7 and 8: APNs holds every request (a service answering very slowly) while
    more are queued for it than it has places; FCM's deliveries go out all the same, while APNs
    still holds them all. Asserted on order (what the stand-ins hold and logged), never on time."""
    apns.control("/_hold")
    held_token, droid_token = ios_token("0777"), "fcm-" + secrets.token_urlsafe(20)
    status, _, _ = m.onboard("slowios", {"DeviceType": "iOS", "ApnsDeviceToken": held_token})
    status2, _, _ = m.onboard("quickdroid", {"DeviceType": "Android", "AndroidGcmRegistrationId": droid_token})
    check("11 slowios (an APNs token the stand-in holds) and quickdroid (FCM) onboard", status == status2 == 201, f"({status} {status2})")
    slow = [m.send_to_users(["slowios"], {"alert": f"slow {n}"})[1] for n in range(70)]
    check("11 70 notifications to slowios accepted", all(slow), f"({sum(1 for n in slow if n)} accepted)")
    full = until(lambda: (apns.stats() or {}).get("held", 0) >= 64)
    check("11 APNs holds 64 requests (the places of the app's APNs, and of the whole worker before issue 36)", full is not None,
          f"(held {(apns.stats() or {}).get('held')})")
    quick = [m.send_to_users(["quickdroid"], {"alert": f"quick {n}"})[1] for n in range(5)]
    finals = m.final_statuses([nid for nid in quick if nid])
    stats = apns.stats() or {}
    check("11 FCM's 5 notifications are SENT while APNs still holds all its requests (none answered, none given up)",
          all(overall(f) == "SENT" for f in finals.values()) and len(finals) == 5 and stats.get("held", 0) >= 64
          and stats.get("abandoned") == 0 and not lines_with_token(apns, held_token),
          f"({[overall(f) for f in finals.values()]}, APNs held {stats.get('held')} abandoned {stats.get('abandoned')})")
    pending = [m.status_of(nid)[1] for nid in slow[:3] if nid]
    check("11 ... and slowios's notifications are still QUEUED", all(overall(d) == "QUEUED" for d in pending), f"({pending})")
    # While APNs is full, two more deliveries are taken and wait for a place; meanwhile one
    # phone is locked and the other gets a new token. The registration is read again right
    # before the send: the locked one gets nothing, the other only at its new token (the
    # attack of 2026-11-28 found both sent as they stood before the wait).
    old_lock, old_swap = ios_token(), ios_token()
    _, lock_cid, _ = m.onboard("waitlock", {"DeviceType": "iOS", "ApnsDeviceToken": old_lock})
    _, swap_cid, _ = m.onboard("waitswap", {"DeviceType": "iOS", "ApnsDeviceToken": old_swap})
    status, waiting, _ = m.send_to_users(["waitlock", "waitswap"], {"alert": "after the wait"})
    check("11b a notification to waitlock and waitswap accepted while APNs is full", status == 202 and waiting, f"({status})")
    time.sleep(3)  # taken by the worker (a probe a second) and waiting for a place
    new_swap = ios_token()
    locked, _, _ = m.admin_call("POST", f"/admin/v1/registrations/{lock_cid}/lock")
    swapped, _, _ = m.set_token("waitswap", swap_cid, "ios", new_swap, method="PUT")
    check("11b waitlock's phone is locked and waitswap's token replaced meanwhile", locked == 200 and swapped == 200, f"({locked} {swapped})")
    apns.control("/_release")
    finals = m.final_statuses([nid for nid in slow if nid])
    check("11 once APNs answers, all 70 are SENT", all(overall(f) == "SENT" for f in finals.values()),
          f"({sum(1 for f in finals.values() if overall(f) == 'SENT')} SENT)")
    counts = [len([e for e in apns_lines_for(apns, nid) if e.get("status") == 200]) for nid in slow if nid]
    check("11 ... each reached APNs exactly once (those put back or waiting were not sent twice)", counts == [1] * len(counts),
          f"({counts})")
    document, last = m.final_status(waiting) if waiting else (None, None)
    got = deliveries(document)
    check("11b the locked phone's delivery is skipped and its token never reached APNs",
          (got.get(lock_cid) or {}).get("status") == "skipped" and not lines_with_token(apns, old_lock), f"({got.get(lock_cid)} {last})")
    check("11b the other went to its new token only, never to the old one",
          (got.get(swap_cid) or {}).get("status") == "delivered" and not lines_with_token(apns, old_swap)
          and len(lines_with_token(apns, new_swap)) == 1, f"({got.get(swap_cid)})")


def scenario_sigterm(m, apns):
    """12. Issue 36 item 9: SIGTERM while APNs holds 20 deliveries. Midtier takes no more, waits
    for those being sent, writes their outcomes and exits 0; after a restart none goes again."""
    apns.control("/_hold")
    token = ios_token("0777")
    status, _, _ = m.onboard("term", {"DeviceType": "iOS", "ApnsDeviceToken": token})
    ids = [m.send_to_users(["term"], {"alert": f"in flight {n}"})[1] for n in range(20)]
    check("12 20 notifications to term accepted", status == 201 and all(ids), f"({status}, {sum(1 for n in ids if n)})")
    held = until(lambda: (apns.stats() or {}).get("held") == 20)
    check("12 APNs holds all 20 (in flight)", held is not None, f"(held {(apns.stats() or {}).get('held')})")
    m.process.send_signal(signal.SIGTERM)
    stopping = until(lambda: m.process.poll() is not None or "push deliveries: no more taken" in m.log_text())
    check("12 after SIGTERM Midtier says it takes no more deliveries, and waits for those being sent (still running)",
          stopping is not None and m.process.poll() is None, f"(exit {m.process.poll()})")
    apns.control("/_release")
    try:
        code = m.process.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        code = None
    check("12 once APNs answers, Midtier exits 0", code == 0, f"(exit {code})")
    stats = apns.stats() or {}
    check("12 APNs saw none of them given up", stats.get("abandoned") == 0, f"({stats.get('abandoned')} abandoned)")
    check("12 every outcome was written (no 'outcome was not written' in the log)", "outcome was not written" not in m.log_text())
    check("12 Midtier restarts on the same store", m.start())
    finals = m.final_statuses([nid for nid in ids if nid], seconds=LEASE + DEADLINE)
    check("12 after the restart all 20 are SENT", all(overall(f) == "SENT" for f in finals.values()),
          f"({[overall(f) for f in finals.values()]})")
    counts = [len([e for e in apns_lines_for(apns, nid) if e.get("status") == 200]) for nid in ids if nid]
    check("12 ... each reached APNs exactly once", counts == [1] * len(counts), f"({counts})")


def scenario_crash_in_flight(m, apns):
    """12b. Issue 36 item 9's other half: SIGKILL while APNs holds 5 deliveries. Their outcome
    is unknown; after the restart (same host and port: the same instance) they are due again at
    once, not when their 90-second leases run out. APNs then sees each twice (at least once)."""
    apns.control("/_hold")
    token = ios_token("0777")
    status, _, _ = m.onboard("crashed", {"DeviceType": "iOS", "ApnsDeviceToken": token})
    ids = [m.send_to_users(["crashed"], {"alert": f"crash {n}"})[1] for n in range(5)]
    check("12b 5 notifications to crashed accepted", status == 201 and all(ids), f"({status}, {sum(1 for n in ids if n)})")
    held = until(lambda: (apns.stats() or {}).get("held") == 5)
    check("12b APNs holds all 5 (in flight)", held is not None, f"(held {(apns.stats() or {}).get('held')})")
    m.kill()
    apns.control("/_release")
    check("12b Midtier is SIGKILLed and restarts on the same store", m.process.poll() is not None and m.start())
    restarted = time.monotonic()
    finals = m.final_statuses([nid for nid in ids if nid], seconds=LEASE + DEADLINE)
    elapsed = time.monotonic() - restarted
    print(f"crash in flight: all 5 final {elapsed:.1f} s after the restart (the lease is {LEASE} s)")
    check("12b after the restart all 5 are SENT", all(overall(f) == "SENT" for f in finals.values()),
          f"({[overall(f) for f in finals.values()]})")
    check(f"12b ... retried before their {LEASE}-second leases ran out: the restarted instance released its earlier run's leases",
          elapsed < LEASE and "left unfinished are due again" in m.log_text(), f"({elapsed:.0f} s)")


CLOSE_AFTER = 7   # requests an HTTP/2 connection carries in scenario 14


def scenario_connections(m, apns, fcm):
    """14. Issue 36 item 12: a push service that ends its connections after every 7 requests —
    with a graceful GOAWAY, then with an abrupt close — delays and loses nothing: each request
    the end of a connection refused or left unanswered goes again at once over a new
    connection, within the same attempt. Asserted on outcomes, attempts and the stand-ins'
    logs, never on time."""
    users = [f"conn{n}" for n in range(6)]
    tokens = {}
    for user in users:
        ios, android = ios_token(), "fcm-" + secrets.token_urlsafe(20)
        status, _, _ = m.onboard(user, {"DeviceType": "iOS", "ApnsDeviceToken": ios})
        status2, _, _ = m.onboard(user, {"DeviceType": "Android", "AndroidGcmRegistrationId": android})
        tokens[user] = (ios, android) if status == status2 == 201 else None
    check("14 six users onboard an iPhone and an Android each", all(tokens.values()), f"({tokens})")
    if not all(tokens.values()):
        return
    for how in ("goaway", "close"):
        ok = apns.restart(["--close-after", str(CLOSE_AFTER), "--close-how", how]) and \
            fcm.restart(["--close-after", str(CLOSE_AFTER), "--close-how", how])
        check(f"14 {how}: APNs and FCM restart, ending each HTTP/2 connection after {CLOSE_AFTER} requests", ok)
        if not ok:
            break
        connections_ended(m, apns, fcm, how, users, tokens)
    check("14 APNs and FCM restart keeping their connections again", apns.restart([]) and fcm.restart([]))


def connections_ended(m, apns, fcm, how, users, tokens):
    # The restarted FCM stand-in no longer knows Midtier's access token: its 401 (an attempt of
    # its own) is had here, before the notifications that count.
    _, warm, _ = m.send_to_users(users[:1], {"alert": f"{how} first"})
    check(f"14 {how}: a first notification is SENT (Midtier's FCM access token renewed after the stand-in's restart)",
          warm and overall(m.final_status(warm)[0]) == "SENT")
    since, sent_at = time.time(), time.monotonic()
    ids = [m.send_to_users(users, {"alert": f"{how} {n}"})[1] for n in range(5)]
    check(f"14 {how}: 5 notifications to the six users accepted", all(ids), f"({sum(1 for n in ids if n)} accepted)")
    ids = [nid for nid in ids if nid]
    finals = m.final_statuses(ids)
    print(f"connections ended ({how}): every notification final {time.monotonic() - sent_at:.1f} s after the first send")
    every = [d for f in finals.values() for d in (f or {}).get("deliveries", [])]
    check(f"14 {how}: every notification is SENT, its 12 deliveries (60 in all) delivered within the deadline",
          all(overall(f) == "SENT" and len(f["deliveries"]) == 12 for f in finals.values())
          and len(every) == 60 and all(d.get("status") == "delivered" for d in every),
          f"({[overall(f) for f in finals.values()]}, {sum(1 for d in every if d.get('status') == 'delivered')} delivered, "
          f"{sorted({d.get('reason') for d in every if d.get('status') != 'delivered'})})")
    again = [d for d in every if d.get("attempts") != 1]
    check(f"14 {how}: none needed a second attempt (what the connection's end refused went again at once, in the same attempt)",
          not again, f"({len(again)} of {len(every)} with attempts {sorted({d.get('attempts') for d in again})}, "
          f"reasons {sorted({d.get('reason') for d in again})[:3]})")

    apns_lines = [e for e in apns.lines() if (e.get("payload") or {}).get("notificationId") in ids]
    fcm_lines = [e for e in fcm.lines() if e.get("kind") == "send" and ((e.get("message") or {}).get("data") or {}).get("notificationId") in ids]
    received = {}
    for e in apns_lines:
        received.setdefault((e["payload"]["notificationId"], e.get("token")), []).append(e.get("status"))
    for e in fcm_lines:
        received.setdefault((e["message"]["data"]["notificationId"], e.get("token")), []).append(e.get("status"))
    wanted = {(nid, token) for nid in ids for user in users for token in tokens[user]}
    missing = [pair for pair in wanted if 200 not in received.get(pair, [])]
    check(f"14 {how}: the stand-ins took each of the 60 (notification, token) pairs (a 200 in their logs)", not missing,
          f"({len(missing)} missing)")
    twice = sum(1 for pair in wanted if received.get(pair, []).count(200) > 1)
    print(f"connections ended ({how}): {twice} of {len(wanted)} deliveries reached their service more than once")
    apns_stats, fcm_stats = apns.stats() or {}, fcm.stats() or {}
    ended = (apns_stats.get("closed", 0), fcm_stats.get("closed", 0))
    print(f"connections ended ({how}): APNs {apns_stats.get('connections')} connections, {apns_stats.get('refused')} streams refused; "
          f"FCM {fcm_stats.get('connections')} connections, {fcm_stats.get('refused')} streams refused")
    check(f"14 {how}: both services really ended connections (at least 3 each)", min(ended) >= 3,
          f"(APNs {apns_stats}, FCM {fcm_stats})")
    per_connection = {}
    for service, lines in (("apns", apns.lines()), ("fcm", fcm.lines())):
        for e in lines:
            if e.get("time", 0) >= since:
                key = (service, e.get("clientPort"))
                per_connection[key] = per_connection.get(key, 0) + 1
    check(f"14 {how}: no connection carried more than {CLOSE_AFTER} requests", max(per_connection.values(), default=0) <= CLOSE_AFTER,
          f"({sorted(per_connection.values())})")
    check(f"14 {how}: no delivery went twice (the service answered, or refused unprocessed, every request it got)", twice == 0,
          f"({twice})")


EXPIRY_TESTED = []            # when scenario 15 began and ended: APNs refuses tokens as expired then
PROVIDER_TOKEN_LIFETIME = 5   # seconds the APNs stand-in takes a provider token in scenario 15
ACCESS_TOKEN_LIFETIME = 12    # seconds the FCM stand-in's access tokens live in scenario 15


def scenario_service_tokens(m, apns, fcm):
    """15. The push services' own tokens (docs/push.md, "Tokens of the push services"), with
    lifetimes of seconds instead of an hour: APNs refuses a provider token older than
    PROVIDER_TOKEN_LIFETIME with ExpiredProviderToken, FCM's token endpoint issues access tokens
    of ACCESS_TOKEN_LIFETIME seconds. Midtier makes one provider token for a burst of requests,
    a new one when APNs calls its token expired, fetches one access token until it is about to
    expire, a new one before it does, and a new one when FCM answers 401."""
    users = [f"conn{n}" for n in range(6)]
    EXPIRY_TESTED.append(time.time())
    ok = apns.restart(["--provider-token-lifetime", str(PROVIDER_TOKEN_LIFETIME)]) and \
        fcm.restart(["--access-token-lifetime", str(ACCESS_TOKEN_LIFETIME)])
    check(f"15 APNs restarts taking provider tokens for {PROVIDER_TOKEN_LIFETIME} s, FCM issuing access tokens of {ACCESS_TOKEN_LIFETIME} s", ok)
    # A fresh Midtier has no provider token and no access token yet.
    m.process.send_signal(signal.SIGTERM)
    try:
        m.process.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pass
    check("15 Midtier restarts (no provider or access token yet)", ok and m.start())
    if not ok or m.process.poll() is not None:
        return

    def burst(label, count=2):
        """`count` notifications to the six users at once (12 APNs and 12 FCM deliveries per
        two); (ids, whether all came to SENT, the APNs lines, the FCM send lines). The lines are
        those logged since the burst began (a refused request's payload is not read, so it
        cannot be told by its notification id): nothing else is sent meanwhile."""
        since = time.time()
        ids = [m.send_to_users(users, {"alert": f"{label} {n}"})[1] for n in range(count)]
        ids = [nid for nid in ids if nid]
        finals = m.final_statuses(ids)
        sent = len(ids) == count and all(overall(f) == "SENT" for f in finals.values())
        apns_lines = [e for e in apns.lines() if e.get("time", 0) >= since]
        fcm_lines = [e for e in fcm.lines() if e.get("kind") == "send" and e.get("time", 0) >= since]
        return ids, sent, apns_lines, fcm_lines

    def tokens_of(lines, key):
        return sorted({(e.get(key) or {}).get("hash") if key == "providerToken" else e.get(key) for e in lines if e.get(key)})

    # APNs: one provider token for a burst, made anew when APNs calls it expired.
    _, sent, first, first_fcm = burst("apns first")
    first_tokens = tokens_of(first, "providerToken")
    check("15 APNs: the first burst (12 requests at once from a fresh Midtier) is delivered with one provider token",
          sent and len(first_tokens) == 1 and all(e.get("status") == 200 for e in first),
          f"({len(first_tokens)} provider tokens, statuses {sorted({e.get('status') for e in first})})")
    issued = (fcm.stats() or {}).get("tokensIssued")
    check("15 FCM: ... and its 12 FCM messages with one access token, fetched once", sent and issued == 1
          and len(tokens_of(first_fcm, "accessToken")) == 1 and all(e.get("status") == 200 for e in first_fcm),
          f"({issued} issued, {len(tokens_of(first_fcm, 'accessToken'))} used)")
    iat = max([(e.get("providerToken") or {}).get("iat") or 0 for e in first], default=0)
    until(lambda: time.time() > iat + PROVIDER_TOKEN_LIFETIME + 0.5, seconds=PROVIDER_TOKEN_LIFETIME + 30)
    ids, sent, second, _ = burst("apns expired")
    refused = [e for e in second if e.get("reason") == "ExpiredProviderToken"]
    delivered = [e for e in second if e.get("status") == 200]
    new_tokens = sorted({(e.get("providerToken") or {}).get("hash") for e in delivered})
    check("15 APNs: a burst after the provider token's lifetime is refused ExpiredProviderToken, then delivered with a new token",
          sent and refused and all((e.get("providerToken") or {}).get("hash") in first_tokens for e in refused)
          and len(delivered) == 12 and not set(new_tokens) & set(first_tokens)
          and all(((e.get("providerToken") or {}).get("iat") or 0) > iat for e in delivered),
          f"({len(refused)} refused, {len(delivered)} delivered, tokens {len(new_tokens)} new)")
    check("15 APNs: one new provider token for all of them (Apple refuses tokens renewed more often than every 20 minutes)",
          len(new_tokens) == 1, f"({len(new_tokens)} new provider tokens)")
    finals = [m.status_of(nid)[1] for nid in ids]
    attempts = sorted({d.get("attempts") for f in finals for d in (f or {}).get("deliveries", []) if d.get("provider") == "apns"})
    print(f"service tokens: the deliveries APNs refused as expired took {attempts} attempts")

    # FCM: the access token is kept until shortly before it expires, renewed before it does,
    # and renewed on 401.
    issued_before = (fcm.stats() or {}).get("tokensIssued", 0)
    ids, sent, _, sends = burst("fcm one", count=1)
    ids2, sent2, _, sends2 = burst("fcm two", count=1)
    stats = fcm.stats() or {}
    used = tokens_of(sends + sends2, "accessToken")
    check(f"15 FCM: two notifications one after the other, well within the token's {ACCESS_TOKEN_LIFETIME} s, use one access token",
          sent and sent2 and len(used) == 1 and stats.get("tokensIssued", 0) - issued_before <= 1
          and not [e for e in sends + sends2 if e.get("status") == 401],
          f"({stats.get('tokensIssued', 0) - issued_before} issued, {len(used)} used)")
    expired = until(lambda: (fcm.stats() or {}).get("liveAccessTokens") == 0, seconds=ACCESS_TOKEN_LIFETIME + 30)
    check("15 FCM: (the access token has expired at the stand-in)", expired is not None)
    _, sent, _, later = burst("fcm later")
    later_tokens = tokens_of(later, "accessToken")
    check("15 FCM: after its expiry Midtier uses a new access token, fetched before sending (no 401)",
          sent and len(later_tokens) == 1 and not set(later_tokens) & set(used) and not [e for e in later if e.get("status") == 401],
          f"({len(later_tokens)} tokens, {sum(1 for e in later if e.get('status') == 401)} answered 401)")
    fcm.control("/_expire-tokens")
    issued_before = (fcm.stats() or {}).get("tokensIssued", 0)
    _, sent, _, revoked = burst("fcm revoked")
    unauthenticated = [e for e in revoked if e.get("status") == 401]
    after = [e for e in revoked if e.get("status") == 200]
    check("15 FCM: a token FCM refuses with 401 is renewed and the messages delivered with the new one",
          sent and unauthenticated and len(after) == 12 and len(tokens_of(after, "accessToken")) == 1
          and not set(tokens_of(after, "accessToken")) & set(later_tokens),
          f"({len(unauthenticated)} answered 401, {len(after)} delivered, tokens {tokens_of(after, 'accessToken')[:3]})")
    check("15 FCM: one new access token for all of them", (fcm.stats() or {}).get("tokensIssued", 0) - issued_before == 1,
          f"({(fcm.stats() or {}).get('tokensIssued', 0) - issued_before} issued)")
    check("15 APNs and FCM restart with an hour's tokens again", apns.restart([]) and fcm.restart([]))
    EXPIRY_TESTED.append(time.time())


def scenario_durability(m, apns):
    users = {"dura": ios_token(), "latelock": ios_token(), "lateblock": ios_token()}
    cids = {}
    for user, token in users.items():
        status, cid, _ = m.onboard(user, {"DeviceType": "iOS", "ApnsDeviceToken": token})
        cids[user] = cid if status == 201 else None
    check("6 dura, latelock and lateblock onboard with iOS tokens", all(cids.values()), f"({cids})")
    apns.stop()
    check("6 the APNs stand-in is stopped", apns.process.poll() is not None)
    sent = []
    for n in range(6):
        status, nid, body = m.send_to_users(["dura"], {"alert": f"queued {n}"})
        sent.append((status, nid))
    check("6 six notifications to dura accepted while APNs is down: 202 each", all(s == 202 and nid for s, nid in sent), f"({sent})")
    status, lock_nid, _ = m.send_to_users(["latelock"], {"alert": "to be locked"})
    status2, block_nid, _ = m.send_to_users(["lateblock"], {"alert": "to be blocked"})
    check("6 one notification each to latelock and lateblock accepted", status == status2 == 202 and lock_nid and block_nid, f"({status} {status2})")
    ids = [nid for _, nid in sent if nid] + [nid for nid in (lock_nid, block_nid) if nid]

    def tried():
        for nid in ids:
            _, document, _ = m.status_of(nid)
            if not document or not document.get("deliveries") or any(d.get("attempts", 0) < 1 for d in document["deliveries"]):
                return False
        return True
    check("6 every delivery was tried (and failed) while APNs is down", until(tried) is not None)
    status, _, body = m.admin_call("POST", f"/admin/v1/registrations/{cids['latelock']}/lock")
    check("6 latelock's registration is locked between the send and the delivery", status == 200, f"({status} {short(body)})")
    status, _, body = m.admin_call("PUT", "/admin/v1/users/lateblock/block", {"type": "all", "reason": "push test"})
    check("6 lateblock is blocked between the send and the delivery", status == 200, f"({status} {short(body)})")
    m.kill()
    check("6 Midtier is SIGKILLed", m.process.poll() is not None)
    check("6 the APNs stand-in starts again", apns.start())
    check("6 Midtier restarts on the same store", m.start())

    restarted = time.monotonic()
    finals = m.final_statuses(ids, seconds=LEASE + DEADLINE)
    print(f"durability: every notification final {time.monotonic() - restarted:.0f} s after the restart "
          f"(a delivery in flight at the SIGKILL waits out its {LEASE}-second lease)")
    dura_ids = [nid for _, nid in sent if nid]
    check("6 after the restart every notification to dura is SENT",
          all(overall(finals[nid]) == "SENT" for nid in dura_ids), f"({[(nid[:8], overall(finals[nid])) for nid in dura_ids]})")
    counts = {nid: len([e for e in apns_lines_for(apns, nid) if e.get("status") == 200]) for nid in dura_ids}
    check("6 each was delivered exactly once (one 200 per notificationId in the APNs log)", all(c == 1 for c in counts.values()),
          f"({list(counts.values())})")
    if lock_nid:
        got = deliveries(finals[lock_nid])
        check("6 the registration locked after the send got nothing: skipped, APNs never saw its token",
              got.get(cids["latelock"], {}).get("status") == "skipped" and not lines_with_token(apns, users["latelock"]),
              f"({got}, {len(lines_with_token(apns, users['latelock']))} APNs requests)")
    if block_nid:
        got = deliveries(finals[block_nid])
        check("6 the user blocked after the send got nothing: skipped, APNs never saw the token",
              got.get(cids["lateblock"], {}).get("status") == "skipped" and not lines_with_token(apns, users["lateblock"]),
              f"({got}, {len(lines_with_token(apns, users['lateblock']))} APNs requests)")


def scenario_two_instances(work, k, apns, fcm, hashes):
    with ThrowawayPostgres() as pg:
        instances = []
        for name in ["a", "b"]:
            folder = os.path.join(work, "pg-" + name)
            os.makedirs(folder)
            config, mport, aport = make_config(folder, k, apns.port, fcm.port, hashes,
                                               store={"url": pg.url})
            instances.append(Midtier(name, config, mport, aport, os.path.join(folder, "midtier.log")))
        started = [None, None]
        threads = [threading.Thread(target=lambda i=i: started.__setitem__(i, instances[i].start())) for i in range(2)]
        for thread in threads: thread.start()
        for thread in threads: thread.join()
        check("7 two instances start on one PostgreSQL", all(started),
              f"({[open(i.log, 'rb').read()[-800:] for i in instances]})")
        if not all(started):
            return [i.log for i in instances]
        A, B = instances
        ios, android = ios_token(), "fcm-" + secrets.token_urlsafe(20)
        status, _, _ = A.onboard("multi", {"DeviceType": "iOS", "ApnsDeviceToken": ios})
        status2, _, _ = B.onboard("multi", {"DeviceType": "Android", "AndroidGcmRegistrationId": android})
        check("7 multi onboards an iPhone through A and an Android through B", status == status2 == 201, f"({status} {status2})")
        ids = []
        for n in range(40):
            instance = instances[n % 2]
            status, nid, body = instance.send_to_users(["multi"], {"alert": f"n{n}"})
            ids.append((status, nid))
        check("7 40 notifications accepted, alternately by A and B", all(s == 202 and nid for s, nid in ids),
              f"({[s for s, _ in ids]})")
        finals = list(A.final_statuses([nid for _, nid in ids if nid]).values())
        check("7 every one comes to SENT with both devices delivered",
              len(finals) == 40 and all(overall(f) == "SENT" and len(f["deliveries"]) == 2
                                         and all(d["status"] == "delivered" for d in f["deliveries"]) for f in finals),
              f"({sum(1 for f in finals if overall(f) == 'SENT')} SENT)")
        apns_counts = [len([e for e in apns_lines_for(apns, nid) if e.get("status") == 200]) for _, nid in ids if nid]
        fcm_counts = [len([e for e in fcm_lines_for(fcm, nid) if e.get("status") == 200]) for _, nid in ids if nid]
        twice = sum(1 for c in apns_counts + fcm_counts if c > 1)
        check("7 each notification reached APNs exactly once", apns_counts == [1] * 40,
              f"(deliveries per notification: {apns_counts})")
        check("7 each notification reached FCM exactly once", fcm_counts == [1] * 40,
              f"(deliveries per notification: {fcm_counts})")
        print(f"two instances: {twice} of 80 deliveries went out more than once")
        kill_all([A.process, B.process])
        return [i.log for i in instances]


class HeldConnections:
    """A TCP relay to 127.0.0.1:target that, while `hold` is set, keeps each new connection's
    bytes from the target until it is cleared: a push service whose new connection is slow."""

    def __init__(self, target):
        self.target, self.port, self.held = target, free_port(), 0
        self.hold = threading.Event()
        self.released = threading.Event()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(asyncio.start_server(self.relay, "127.0.0.1", self.port))
            ready.set()
            self.loop.run_forever()
        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)

    async def relay(self, reader, writer):
        if self.hold.is_set():
            self.held += 1
            while not self.released.is_set():
                await asyncio.sleep(0.05)
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target)

        async def pipe(a, b):
            try:
                while data := await a.read(65536):
                    b.write(data)
                    await b.drain()
            except Exception:
                pass
            finally:
                b.close()
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


def scenario_slow_connection(work, k, apns, fcm, hashes):
    """11c. A notification's request waits for its connection to APNs (a new connection held
    before TLS); meanwhile one phone is locked, one user blocked, one registration deleted and
    one token replaced. The request's body goes only after a fresh check: none of the four old
    tokens gets it, the new token does (the attack of 2026-11-29 found all four sent as first
    checked, 4 s after the changes, and a deleted user's notification on the phone another user
    then registered). The connection is held until the changes are made: order, not time."""
    folder = os.path.join(work, "slow-connection")
    os.makedirs(folder)
    relay = HeldConnections(apns.port)
    config, mport, aport = make_config(folder, k, apns.port, fcm.port, hashes)
    app_file = os.path.join(config, "apps", "demo.json")
    app = json.load(open(app_file))
    app["push"]["apns"]["endpoint"] = f"https://127.0.0.1:{relay.port}"
    json.dump(app, open(app_file, "w"))
    m = Midtier("slow-connection", config, mport, aport, os.path.join(folder, "midtier.log"))
    if not check_started(m):
        return [m.log]
    tokens = {user: ios_token() for user in ["cnlock", "cnblock", "cndelete", "cnswap"]}
    cids = {user: m.onboard(user, {"DeviceType": "iOS", "ApnsDeviceToken": token})[1] for user, token in tokens.items()}
    relay.hold.set()
    status, nid, _ = m.send_to_users(list(tokens), {"alert": "for the phones as they were"})
    held = until(lambda: relay.held >= 1)
    check("11c a notification to four phones accepted, and its APNs connection held", status == 202 and held is not None,
          f"({status}, held {relay.held})")
    # A check holds half a second (`PushDeliveryWorker.checkHolds`): the changes come later
    # than that after it (a slower machine only makes the wait longer).
    time.sleep(1)
    new_token = ios_token()
    changes = [m.admin_call("POST", f"/admin/v1/registrations/{cids['cnlock']}/lock")[0],
               m.admin_call("PUT", "/admin/v1/users/cnblock/block", {"type": "all", "reason": "11c"})[0],
               m.admin_call("DELETE", f"/admin/v1/registrations/{cids['cndelete']}")[0],
               m.set_token("cnswap", cids["cnswap"], "ios", new_token, method="PUT")[0]]
    check("11c meanwhile: a lock, a block, a delete and a new token, each acknowledged", changes == [200, 200, 204, 200], f"({changes})")
    relay.released.set()
    document, last = m.final_status(nid) if nid else (None, None)
    got = deliveries(document)
    reached = {user: [e for e in lines_with_token(apns, token) if e.get("status") == 200] for user, token in tokens.items()}
    check("11c none of the four old tokens got the notification", not any(reached.values()), f"({ {u: len(v) for u, v in reached.items()} })")
    check("11c ... the locked, blocked and deleted ones are skipped",
          all((got.get(cids[u]) or {}).get("status") == "skipped" for u in ["cnlock", "cnblock", "cndelete"]), f"({got} {last})")
    check("11c ... and the new token got it once", (got.get(cids["cnswap"]) or {}).get("status") == "delivered"
          and len(lines_with_token(apns, new_token)) == 1, f"({got.get(cids['cnswap'])})")
    kill_all([m.process])
    return [m.log]


def standins_and_secrets(work):
    """The stand-in APNs and FCM (started), their keys, the OAuth sender's identity provider, and
    the hashes make_config wants: (apns, fcm, keys, hashes). Also used by Benchmarks/push_*.py."""
    apns_port, fcm_port = free_port(), free_port()
    k = keys.generate(os.path.join(work, "keys"), token_uri=f"https://127.0.0.1:{fcm_port}/token")
    apns = StandIn("apns.py", apns_port, ["--cert", k["cert"], "--key", k["key"], "--auth-key-pub", k["apns_pub"],
                                          "--team", k["team"], "--key-id", k["apns_key_id"], "--topic", TOPIC],
                   os.path.join(work, "apns.jsonl"), k["ca"], work)
    fcm = StandIn("fcm.py", fcm_port, ["--cert", k["cert"], "--key", k["key"], "--service-account-pub", k["sa_pub"],
                                       "--client-email", k["client_email"], "--project", k["project"],
                                       "--token-uri", k["token_uri"]],
                  os.path.join(work, "fcm.jsonl"), k["ca"], work)
    apns.started, fcm.started = apns.start(), fcm.start()
    # The OAuth sender's identity provider: its key, and its JWKS as a file.
    k["sender_idp_key"], sender_jwks = idp_key(work)
    k["sender_jwks"] = os.path.join(work, "sender-jwks.json")
    json.dump(sender_jwks, open(k["sender_jwks"], "w"))
    hashes = {"admin": hash_secret(ADMIN_TOKEN), "sender": hash_secret(SENDER_PASSWORD), "device": hash_secret(DEVICE_PASSWORD),
              "api key": subprocess.run([BIN, "hash-secret", "--api-key"], input=SENDER_API_KEY + "\n", capture_output=True, text=True,
                                        check=True).stdout.strip()}
    return apns, fcm, k, hashes


def main():
    work = tempfile.mkdtemp(prefix="midtier-push-")
    logs = []
    started_at = time.monotonic()
    try:
        apns, fcm, k, hashes = standins_and_secrets(work)
        check("the APNs stand-in starts", apns.started)
        check("the FCM stand-in starts", fcm.started)
        apns_port, fcm_port = apns.port, fcm.port
        folder = os.path.join(work, "sqlite")
        os.makedirs(folder)
        config, mport, aport = make_config(folder, k, apns_port, fcm_port, hashes)
        result = subprocess.run([BIN, "check-config", "--config", config], cwd=REPO, capture_output=True, text=True)
        check("check-config accepts the push configuration", result.returncode == 0, f"({result.stdout[-500:]} {result.stderr[-500:]})")
        key_text = open(k["apns_p8"]).read().splitlines()[1]
        check("check-config's output holds no key", key_text not in result.stdout + result.stderr)

        m = Midtier("sqlite", config, mport, aport, os.path.join(folder, "midtier.log"))
        logs.append(m.log)
        if check_started(m):
            scenario_auth(m)
            scenario_oauth_sender(m, k)
            scenario_hostile(m)
            scenario_two_devices(m, apns, fcm)
            scenario_locked_blocked(m, apns, fcm)
            scenario_gone(m, apns, fcm)
            scenario_retries(m, apns, fcm)
            scenario_one_fcm_token(m, fcm)
            scenario_metrics(m)
            scenario_background(m, apns, fcm)
            scenario_sender_api(m, apns, fcm)
            scenario_capabilities(m, apns)
            scenario_slow_apns(m, apns, fcm)
            scenario_connections(m, apns, fcm)
            scenario_service_tokens(m, apns, fcm)
            scenario_sigterm(m, apns)
            scenario_crash_in_flight(m, apns)
            scenario_durability(m, apns)
            kill_all([m.process])
        logs += scenario_two_instances(work, k, apns, fcm, hashes) or []
        logs += scenario_slow_connection(work, k, apns, fcm, hashes) or []

        # The stand-ins check Midtier's JWTs as Apple and Google do (whole-second iat and exp, key,
        # issuer, topic): no request of Midtier's may have been refused for its credentials.
        refused = [e.get("reason") for e in apns.lines() if e.get("status") == 403
                   and not (e.get("reason") == "ExpiredProviderToken" and EXPIRY_TESTED[:1] and EXPIRY_TESTED[0] <= e.get("time", 0) <= EXPIRY_TESTED[-1])]
        check("APNs never refused Midtier's provider token (ES256 JWT: kid, iss, whole-second iat), but as expired in 15", not refused,
              f"({len(refused)} refusals: {sorted(set(refused))})")
        refused = [e.get("errorCode") for e in fcm.lines() if e.get("kind") == "oauth" and e.get("status") != 200]
        check("Google's token endpoint never refused Midtier's service-account assertion (RS256 JWT: whole-second iat/exp)",
              not refused, f"({len(refused)} refusals: {sorted(set(refused))})")

        # No secret in Midtier's logs.
        sa = json.load(open(k["service_account"]))
        apns_tokens = sorted({e["token"] for e in apns.lines() if e.get("token")})
        fcm_tokens = sorted({e["token"] for e in fcm.lines() if e.get("token")})
        values = {"sender password": SENDER_PASSWORD, "sender API key": SENDER_API_KEY, "device password": DEVICE_PASSWORD, "admin token": ADMIN_TOKEN,
                  "APNs key": key_text, "service account key": sa["private_key"].splitlines()[1], "FCM access token prefix": "ya29."}
        values.update({f"APNs device token {n}": t for n, t in enumerate(apns_tokens)})
        values.update({f"FCM device token {n}": t for n, t in enumerate(fcm_tokens)})
        found = secrets_in_logs(logs, values)
        check(f"Midtier's logs hold no password, key, access token or device token ({len(values)} values looked for)", not found,
              f"(found: {found[:5]})")
        check("Midtier's logs record accepted notifications (the log was written)",
              any("push notification accepted" in open(p, errors="replace").read() for p in logs if os.path.exists(p)))
    finally:
        kill_all(processes)
        shutil.rmtree(work, ignore_errors=True)
        print(f"push: ran for {time.monotonic() - started_at:.0f} s")
    check.finish()


def check_started(m):
    ok = m.start()
    check("midtier serve starts with push configured", ok, "" if ok else f"({open(m.log, 'rb').read()[-1500:]!r})")
    return ok


if __name__ == "__main__":
    main()
