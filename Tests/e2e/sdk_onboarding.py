#!/usr/bin/env python3
"""A client that onboards the way the SAP BTP SDK does, against a real Midtier process.

For a JWT app: discovery (`GET /config/v1/{appId}`), the OAuth2 authorization code flow with
PKCE (S256) at a stand-in IdP written here (it signs real RS256 JWTs with a key of its own and
publishes the JWKS Midtier fetches), registration, settings exchange, then payroll through `/sf`
with only the SDK's headers (`Authorization`, `X-SMP-APPID`, `X-SMP-DEVICEID`). The same for a
basic app. docs/device-api.md, "Onboarding a SAP SDK app".

Usage: sdk_onboarding.py PATH-TO-MIDTIER. Prints `sdk-onboarding: N passed, M failed`; exits 1
on failure. Standard library and the `openssl` command only; every process is killed at the end.
"""
import hashlib, http.server, json, os, shutil, socketserver, subprocess, sys, tempfile, threading, time
import xml.etree.ElementTree as ElementTree
import urllib.error, urllib.parse, urllib.request
from harness import Checks, b64url, basic, demo_config, free_port, header, idp_key, jwt, kill_all, start_sandbox_and_midtier, wait_for

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLIENT_ID, REDIRECT = "payroll-ios", "com.example.payroll:/oauth2redirect"
# The IdP's users: password, and the SuccessFactors user id it puts in the token.
IDP_USERS = {"alice": ("alice-idp-password", "100001"), "bob": ("bob-idp-password", "100002")}
processes = []
check = Checks("sdk-onboarding")


def call(url, method="GET", headers=None, body=None):
    """(status, headers, body) without following redirects and without any proxy."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with opener.open(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


class IdP(http.server.BaseHTTPRequestHandler):
    """A stand-in for the company IdP: authorization code with PKCE (S256 only), RS256 tokens."""
    protocol_version = "HTTP/1.1"
    key = None
    jwks = None
    issuer = None
    codes = {}  # code -> (user, client_id, redirect_uri, code_challenge)
    lock = threading.Lock()

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def form(self):
        length = int(self.headers.get("Content-Length") or 0)
        return {k: v[0] for k, v in urllib.parse.parse_qs(self.rfile.read(length).decode()).items()}

    def do_GET(self):
        if self.path == "/certs":
            return self.answer(200, json.dumps(IdP.jwks).encode(), [("Content-Type", "application/json")])
        self.answer(404)

    def do_POST(self):
        fields = self.form()
        if self.path == "/auth":
            # The sign-in form, posted with the authorization request's parameters.
            user = IDP_USERS.get(fields.get("username", ""))
            if (fields.get("response_type") != "code" or fields.get("client_id") != CLIENT_ID or fields.get("redirect_uri") != REDIRECT
                    or fields.get("code_challenge_method") != "S256" or not fields.get("code_challenge")):
                return self.answer(400, b"invalid authorization request")
            if user is None or user[0] != fields.get("password"):
                return self.answer(401, b"wrong user name or password")
            code = os.urandom(16).hex()
            with IdP.lock:
                IdP.codes[code] = (fields["username"], fields["client_id"], fields["redirect_uri"], fields["code_challenge"])
            query = urllib.parse.urlencode({"code": code, "state": fields.get("state", "")})
            return self.answer(302, headers=[("Location", f"{REDIRECT}?{query}")])
        if self.path == "/token":
            with IdP.lock:
                granted = IdP.codes.pop(fields.get("code", ""), None)  # a code is good once
            if (granted is None or fields.get("grant_type") != "authorization_code" or fields.get("client_id") != granted[1]
                    or fields.get("redirect_uri") != granted[2]
                    or b64url(hashlib.sha256(fields.get("code_verifier", "").encode()).digest()) != granted[3]):
                return self.answer(400, json.dumps({"error": "invalid_grant"}).encode(), [("Content-Type", "application/json")])
            user = granted[0]
            now = int(time.time())
            token = jwt(IdP.key, {"iss": IdP.issuer, "aud": "midtier", "sub": user, "sfUserId": IDP_USERS[user][1],
                                  "iat": now, "exp": now + 300, "azp": CLIENT_ID})
            body = json.dumps({"access_token": token, "token_type": "Bearer", "expires_in": 300}).encode()
            return self.answer(200, body, [("Content-Type", "application/json"), ("Cache-Control", "no-store")])
        self.answer(404)

    def log_message(self, *args):
        pass


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def sign_in_with_pkce(config, user, password):
    """The SDK's OAuth2 sign-in from a discovery `config`: (status of the token request, token)."""
    client = config["oauth2.clients"][0]
    verifier = b64url(os.urandom(32))
    challenge = b64url(hashlib.sha256(verifier.encode()).digest())
    state = os.urandom(8).hex()
    form = urllib.parse.urlencode({"response_type": "code", "client_id": client["clientID"], "redirect_uri": client["redirectURL"],
                                   "code_challenge": challenge, "code_challenge_method": "S256", "state": state,
                                   "username": user, "password": password}).encode()
    status, headers, _ = call(config["oauth2.authorizationEndpoint"], "POST", {"Content-Type": "application/x-www-form-urlencoded"}, form)
    location = header(headers, "Location") or ""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
    if status != 302 or not location.startswith(client["redirectURL"]) or query.get("state") != [state]:
        return status, None
    return token_request(config, client, query["code"][0], verifier)


def token_request(config, client, code, verifier):
    form = urllib.parse.urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": client["redirectURL"],
                                   "client_id": client["clientID"], "code_verifier": verifier}).encode()
    status, _, body = call(config["oauth2.tokenEndpoint"], "POST", {"Content-Type": "application/x-www-form-urlencoded"}, form)
    return status, (json.loads(body)["access_token"] if status == 200 else None)


work = tempfile.mkdtemp(prefix="midtier-sdk-")
# SAP's SDK Assistant names destinations with dots: the generated iOS apps call
# `backendURL.appendingPathComponent("com.sap.edm.sampleservice.v2")` (SAP-samples apps, AppParameters.plist
# "Destinations"); docs/forwarding.md, "Destination names".
DOTTED = "com.sap.edm.sampleservice.v2"


def add_dotted_destination(config):
    """A copy of `sf` named as SAP's assistant names destinations, for the basic app `demo`."""
    sf = json.load(open(os.path.join(config, "destinations", "sf.json")))
    json.dump(dict(sf, Name=DOTTED), open(os.path.join(config, "destinations", DOTTED + ".json"), "w"))
    demo_path = os.path.join(config, "apps", "demo.json")
    demo = json.load(open(demo_path))
    json.dump(dict(demo, destinations=demo["destinations"] + [DOTTED]), open(demo_path, "w"))


def check_dotted_destination(base, headers):
    status, _, body = call(f"{base}/{DOTTED}/odata/v2/EmployeePayrollRunResults?$format=json&$top=5", headers=headers)
    rows = json.loads(body)["d"]["results"] if status == 200 else []
    check(f"a call through /{DOTTED}/... reaches its back end", status == 200
          and sorted({row.get("userId") for row in rows}) == ["100001"], f"({status} {body[:200]!r})")


def user_and_device_storage(base, alice, bob, database):
    """The Storage service's user and device levels (docs/device-api.md, "User and device
    storage"), for the JWT app `corp`: `alice` and `bob` are the SDK's headers of two users.
    Sources: help.sap.com Mobile Services "Accessing Storage Service — Runtime APIs" (runtime.html),
    "Samples for Storage Service" (samples.html), SAPFoundation `SAPcpmsObserver`."""
    import sqlite3
    root = f"{base}/mobileservices/application/corp/Storage/v1/runtime/application/corp"
    json_headers = lambda headers: dict(headers, **{"Content-Type": "application/json"})
    home = {"Menu": {"AutoHiding": False, "Style": "blue"}, "ShortCuts": ["Overview", "Profile"]}
    # runtime.html: user level ".../Storage/v1/runtime/application/<applicationId>/currentuser/<configurationName>/<propName>/..."
    status, _, body = call(f"{root}/currentuser/HomeScreen", "PUT", json_headers(alice), json.dumps(home).encode())
    check("Storage: alice PUTs a user document", status == 200, f"({status} {body[:200]!r})")
    # samples.html: a GET answers the bare JSON value ({"Menu":{"AutoHiding":false,"Style":"blue"},"ShortCuts":[...]}).
    status, _, body = call(f"{root}/currentuser/HomeScreen", headers=alice)
    check("Storage: alice GETs her user document back as she stored it", status == 200 and json.loads(body) == home, f"({status} {body[:200]!r})")
    # runtime.html: <propName>/<propNameLv2> key paths; a GET on a key path answers the value there.
    status, _, body = call(f"{root}/currentuser/HomeScreen/Menu/Style", headers=alice)
    check("Storage: a key path of the user document answers its value", status == 200 and json.loads(body) == "blue", f"({status} {body[:200]!r})")
    # "User storage: persists user preferences" (admin.html): another user has none of alice's.
    status, _, body = call(f"{root}/currentuser/HomeScreen", headers=bob)
    check("Storage: bob does not see alice's user document (404)", status == 404, f"({status} {body[:200]!r})")
    # Android multi-user sample: "If the key is not found and the request returns a 404 error".
    status, _, body = call(f"{root}/currentuser/NoSuchThing", headers=alice)
    check("Storage: an unknown user key is 404", status == 404, f"({status} {body[:200]!r})")
    # Not in SAP's pages: Midtier reads bodies with its strict JSON reader (400 naming the fault).
    status, _, body = call(f"{root}/currentuser/HomeScreen", "PUT", json_headers(alice), b'{"a":1,}')
    check("Storage: a malformed JSON body is 400", status == 400, f"({status} {body[:200]!r})")
    # Not in SAP's pages: Midtier's limit of 64 KiB a document (docs/device-api.md).
    big = json.dumps({"x": "a" * (70 * 1024)}).encode()
    status, _, body = call(f"{root}/currentuser/Big", "PUT", json_headers(alice), big)
    check("Storage: a document over 64 KiB is 413", status == 413, f"({status} {body[:200]!r})")

    # samples.html: device level ".../device/mydevice/HomeScreen"; SAPcpmsObserver sends the device id as X-SMP-DEVICEID.
    phone = dict(alice, **{"X-SMP-DEVICEID": "alice-storage-phone"})
    status, headers, _ = call(f"{base}/odata/applications/v1/corp/Connections", "POST", json_headers(phone),
                              json.dumps({"DeviceType": "iOS", "DeviceId": "alice-storage-phone"}).encode())
    cid = header(headers, "X-SMP-APPCID")
    check("Storage: alice onboards a device for device storage", status == 201 and cid, f"({status})")
    status, _, body = call(f"{root}/device/{cid}/HomeScreen", "PUT", json_headers(phone), b'{"Menu":{"AutoHiding":true}}')
    check("Storage: alice PUTs a device document", status == 200, f"({status} {body[:200]!r})")
    status, _, body = call(f"{root}/device/alice-storage-phone/HomeScreen/Menu", headers=phone)
    check("Storage: the device document by the SDK's device id", status == 200 and json.loads(body) == {"AutoHiding": True},
          f"({status} {body[:200]!r})")
    status, _, body = call(f"{root}/device/{cid}/HomeScreen", headers=bob)
    check("Storage: bob cannot read alice's device document (403)", status == 403, f"({status} {body[:200]!r})")
    status, _, body = call(f"{root}/device/{cid}/HomeScreen", "PUT", json_headers(bob), b"{}")
    check("Storage: nor write it (403)", status == 403, f"({status} {body[:200]!r})")

    def rows(registration):
        with sqlite3.connect(database) as db:
            return db.execute("SELECT COUNT(*) FROM user_storage WHERE registration_id = ?", (registration,)).fetchone()[0]

    check("Storage: the device document is in the store", rows(cid) == 1, f"({rows(cid)})")
    # runtime.html lists POST and PATCH besides GET, PUT and DELETE, and `?overwrite=true`: "If you get the user
    # storage or device storage for the application with overwrite=true query parameter, then the application level
    # configuration gets merged into the response" (admin.html); "The device storage API merges settings in both
    # Application storage and user storage" (runtime.html). Merge order, POST's 409 and PATCH as RFC 7396: Midtier's reading.
    status, _, body = call(f"{root}/currentuser/HomeScreen", "POST", json_headers(alice), b'{"Menu":{}}')
    check("Storage: POST does not replace an existing document (409)", status == 409, f"({status} {body[:200]!r})")
    status, _, body = call(f"{root}/currentuser/Drafts", "POST", json_headers(alice), b'{"count":1,"last":"x"}')
    check("Storage: POST creates a new user document", status == 200, f"({status} {body[:200]!r})")
    status, _, body = call(f"{root}/currentuser/Drafts", "PATCH", json_headers(alice), b'{"count":2,"last":null}')
    status, _, body = call(f"{root}/currentuser/Drafts", headers=alice)
    check("Storage: PATCH merges into it, null removing a member", status == 200 and json.loads(body) == {"count": 2}, f"({status} {body[:200]!r})")
    status, _, body = call(f"{root}/device/{cid}/HomeScreen?overwrite=true", headers=phone)
    merged = json.loads(body) if status == 200 else {}
    check("Storage: a device GET with overwrite=true merges the user's document under the device's",
          merged == {"Menu": {"AutoHiding": True, "Style": "blue"}, "ShortCuts": ["Overview", "Profile"]}, f"({status} {body[:300]!r})")
    status, _, body = call(f"{root}/device/{cid}?overwrite=true", headers=phone)
    levels = json.loads(body) if status == 200 else {}
    check("Storage: and the application level's settings too", "settingsExchange" in levels.get("mobileservices", {})
          and "Drafts" in levels, f"({status} {body[:300]!r})")
    status, _, body = call(f"{root}/currentuser?overwrite=true", headers=bob)
    check("Storage: bob's merged view has none of alice's documents", status == 200 and "HomeScreen" not in json.loads(body)
          and "Drafts" not in json.loads(body), f"({status} {body[:300]!r})")
    # admin.html: "Device storage: persists installation-specific or device-specific settings" — it goes with the installation.
    status, _, body = call(f"{base}/mobileservices/me/registrations/{cid}/wipe", "POST", alice)
    check("Storage: alice wipes that device through self-service", status == 200, f"({status} {body[:200]!r})")
    status, answer_headers, body = call(f"{root}/device/{cid}/HomeScreen", headers=phone)
    check("Storage: the wiped device's storage is refused as the proxy refuses it", status == 403
          and header(answer_headers, "x-message-code") == "TRAFFIC_REG_WIPED", f"({status} {body[:200]!r})")
    check("Storage: a wipe deleted the device's documents", rows(cid) == 0, f"({rows(cid)})")
    status, _, body = call(f"{root}/currentuser/HomeScreen", headers=alice)
    check("Storage: alice's user document outlives the device's wipe", status == 200 and json.loads(body) == home, f"({status})")


def add_implicit_app(config):
    """A basic app like `demo` whose devices may register implicitly (`implicitRegistration`, off by default:
    docs/device-api.md, "Implicit registration"). SAP's own pages say "You must explicitly register an
    application connection" (Mobile Services, Managing App Registrations): this is Midtier's option for
    stock flows that call data with only X-SMP-APPID and X-SMP-DEVICEID."""
    app = json.load(open(os.path.join(config, "apps", "demo.json")))
    app["implicitRegistration"] = True
    json.dump(app, open(os.path.join(config, "apps", "walkup.json"), "w"))


def check_implicit_registration(base, payroll):
    carol = {"Authorization": basic("carol", "carol-demo-password"), "X-SMP-APPID": "walkup", "X-SMP-DEVICEID": "carol-walkup-1"}

    def registrations(app):
        status, _, body = call(f"{base}/odata/applications/v1/{app}/Connections?$format=json",
                               headers={"Authorization": carol["Authorization"]})
        return [r["DeviceId"] for r in json.loads(body)["d"]["results"]] if status == 200 else None

    status, users, _, body = payroll({"X-SMP-APPID": "walkup", "X-SMP-DEVICEID": "carol-walkup-1"})
    check("implicit registration: without credentials 401, and nothing is registered", status == 401
          and registrations("walkup") == [], f"({status} {registrations('walkup')})")
    status, users, _, body = payroll(carol)
    check("implicit registration: the first call with only the SDK's headers reads carol's own payroll", status == 200
          and users == ["100003"], f"({status} {users} {body[:300]!r})")
    status, users, _, body = payroll(carol)
    check("implicit registration: the next call reuses that registration", status == 200 and users == ["100003"]
          and registrations("walkup") == ["carol-walkup-1"], f"({status} {registrations('walkup')})")
    status, users, _, body = payroll(dict(carol, **{"X-SMP-APPID": "demo", "X-SMP-DEVICEID": "carol-demo-1"}))
    check("an app without implicitRegistration still refuses an unregistered device (403)", status == 403 and users == []
          and registrations("demo") == [], f"({status} {body[:200]!r})")


def add_logging_app(config):
    """A basic app like `demo` whose devices upload logs and usage: `logSettings.logEnabled` and
    `usagePolicy.dataCollectionEnabled` on (`demo` has both off, as SAP's defaults)."""
    app = json.load(open(os.path.join(config, "apps", "demo.json")))
    app["logSettings"] = {"logEnabled": True, "logLevel": "WARN"}
    app["usagePolicy"] = dict(app.get("usagePolicy", {}), dataCollectionEnabled=True)
    json.dump(app, open(os.path.join(config, "apps", "fieldlog.json"), "w"))


LOG_TEXT = ("#2024-05-06T07:08:09.123+02:00#ERROR#corr-1#com.example.payroll#PayrollView.swift:42#Payroll \\#7 failed#\r\n"
            "#2024-05-06T07:08:10.000+02:00#INFO##com.example.payroll#PayrollView.swift:50#retrying#\r\n")


def client_uploads(base, app, headers, other, device, database):
    """Client log and usage uploads as the SDK posts them (docs/device-api.md, "Client logs and
    usage"): `headers` are the SDK's headers of a user with a registration of `device` in `app`,
    `other` another user's. Sources: help.sap.com Mobile Services "Log Upload"
    (https://help.sap.com/doc/f53c64b93e5140918d676b927a3cd65b/Cloud/en-US/docs-en/guides/features/logging/api/logupload.html)
    and "Client Usage" (.../guides/features/usage/api/usage.html); SAPFoundation `SAPcpmsLogUploader`."""
    import io, sqlite3, uuid, zipfile
    logs = f"{base}/mobileservices/application/{app}/clientlogs/v1/runtime/log/application/{app}"
    usage = f"{base}/mobileservices/application/{app}/clientusage/v1/runtime/clientusage/application/{app}"

    def kept(kind):
        with sqlite3.connect(database) as db:
            return db.execute("SELECT COUNT(*) FROM client_uploads u JOIN registration r ON r.id = u.registration_id "
                              "WHERE u.app_id = ? AND u.kind = ? AND r.device_id = ?", (app, kind, device)).fetchone()[0]

    def entries():
        with sqlite3.connect(database) as db:
            return db.execute("SELECT e.severity, e.correlation_id, e.message FROM client_log_entries e JOIN client_uploads u ON u.id = e.upload_id "
                              "JOIN registration r ON r.id = u.registration_id WHERE u.app_id = ? AND r.device_id = ? "
                              "ORDER BY u.received_at, e.sequence", (app, device)).fetchall()

    # logupload.html: POST .../clientlogs/v1/runtime/log/application/{applicationId}?deviceId={deviceId}; "simple binary data"; 204 uploaded.
    status, _, body = call(f"{logs}?deviceId={device}", "POST", dict(headers, **{"Content-Type": "application/octet-stream"}), LOG_TEXT.encode())
    check(f"client logs ({app}): a plain log upload is 204", status == 204, f"({status} {body[:300]!r})")
    # logupload.html: the format #Date time#Severity#CorrelationId#Source#Location#Message#; the client escapes # in the message.
    check(f"client logs ({app}): its entries are kept field by field, \\# read as #", entries()[:2] == [
        ("ERROR", "corr-1", "Payroll #7 failed"), ("INFO", "", "retrying")], f"({entries()})")
    # logupload.html: "These can be zipped data" — a zip built with Python's zipfile.
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("payroll-1.log", LOG_TEXT)
        z.writestr("payroll-2.log", "#2024-05-06T08:00:00Z#WARN###Sync.swift:9#slow sync#\n")
    status, _, body = call(f"{logs}?deviceId={device}", "POST", dict(headers, **{"Content-Type": "application/zip"}), archive.getvalue())
    check(f"client logs ({app}): a zipped upload of two files is 204", status == 204 and len(entries()) == 5, f"({status} {body[:300]!r} {len(entries())})")
    # logupload.html: "multipart data".
    boundary = uuid.uuid4().hex
    multipart = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"client.log\"\r\n"
                 f"Content-Type: text/plain\r\n\r\n{LOG_TEXT}\r\n--{boundary}--\r\n").encode()
    status, _, body = call(f"{logs}?deviceId={device}", "POST", dict(headers, **{"Content-Type": f"multipart/form-data; boundary={boundary}"}), multipart)
    check(f"client logs ({app}): a multipart upload is 204", status == 204 and len(entries()) == 7, f"({status} {body[:300]!r})")
    # logupload.html: 400 "Invalid log format". Midtier names the line.
    status, _, body = call(f"{logs}?deviceId={device}", "POST", headers, b"#2024-05-06T07:08:09Z#INFO####ok#\n#not a date#INFO####x#\n")
    check(f"client logs ({app}): a log not in SAP's format is 400 naming the line", status == 400
          and "line 2" in (json.loads(body)["error"]["message"]["value"] if status == 400 else ""), f"({status} {body[:300]!r})")
    # Not in SAP's pages: a zip bomb (64 MiB of one byte in a few KiB) is refused while unzipping (413).
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bomb.log", b"#" * (64 << 20))
    status, _, body = call(f"{logs}?deviceId={device}", "POST", dict(headers, **{"Content-Type": "application/zip"}), bomb.getvalue())
    check(f"client logs ({app}): a zip bomb is 413 and nothing of it is kept", status == 413 and len(entries()) == 7, f"({status} {body[:300]!r})")
    # Not in SAP's pages: Midtier's clientUploads.maxUploadBytes (5 MiB by default, the SDK's default largest log file).
    status, _, body = call(f"{logs}?deviceId={device}", "POST", headers, b"#" * (6 << 20))
    check(f"client logs ({app}): a body over 5 MiB is 413 naming clientUploads.maxUploadBytes", status == 413
          and b"clientUploads.maxUploadBytes" in body, f"({status} {body[:300]!r})")
    # The upload is the caller's own registration's: another user naming this device gets nothing in (403), nothing kept.
    status, _, body = call(f"{logs}?deviceId={device}", "POST", dict(other, **{"X-SMP-DEVICEID": device}), LOG_TEXT.encode())
    check(f"client logs ({app}): another user naming this device is refused (403)", status == 403 and kept("log") == 3, f"({status} {kept('log')})")

    # usage.html: POST .../clientusage/v1/runtime/clientusage/application/{applicationId}/device/{deviceId}, a JSON report
    # with report (required), appInfo.application (required), deviceInfo, sessions[].events[].time (required).
    report = {"report": str(uuid.uuid4()), "appInfo": {"application": app, "appVersion": "1.0"},
              "deviceInfo": {"platform": "iOS", "platformVersion": "17.4", "deviceModel": "iPhone15,2", "deviceID": device},
              "sessions": [{"sessionInfo": {"sessionId": str(uuid.uuid4())}, "events": [{"time": "2024-05-06T07:08:09Z", "type": "open"}]}]}
    json_headers = dict(headers, **{"Content-Type": "application/json"})
    status, _, body = call(f"{usage}/device/{device}", "POST", json_headers, json.dumps(report).encode())
    # usage.html does not give the success code; Midtier answers 204 as the log upload does (docs/device-api.md).
    check(f"client usage ({app}): a usage report is 204", status == 204 and kept("usage") == 1, f"({status} {body[:300]!r})")
    # usage.html: the /device/{deviceId} part is optional.
    status, _, body = call(usage, "POST", json_headers, json.dumps(dict(report, report=str(uuid.uuid4()))).encode())
    check(f"client usage ({app}): without /device/{{deviceId}} too", status == 204 and kept("usage") == 2, f"({status} {body[:300]!r})")
    # usage.html: report is required.
    status, _, body = call(usage, "POST", json_headers, json.dumps({"appInfo": {"application": app}}).encode())
    check(f"client usage ({app}): a report without its id is 400", status == 400, f"({status} {body[:300]!r})")


def check_log_settings_as_strings(settings, storage, headers):
    """SAP's settings document carries logSettings values as strings, like the other policies
    (SAPFoundation `SAPcpmsSettings` payload; SAP's Android multi-user sample:
    "logSettings":{"logEntryExpiry":"7","logLevel":"NONE"})."""
    check("the settings exchange sends logSettings values as strings", settings.get("logSettings")
          == {"logEnabled": "false", "logLevel": "WARN"}, f"({settings.get('logSettings')})")
    status, value, body = storage("demo", "mobileservices/settingsExchange/logSettings", headers)
    check("Storage: logSettings values as strings", status == 200 and value == {"logEnabled": "false", "logLevel": "WARN"},
          f"({status} {body[:200]!r})")


try:
    idp_port, sport, mport, aport = free_port(), free_port(), free_port(), free_port()
    IdP.key, IdP.jwks = idp_key(work)
    IdP.issuer = f"http://127.0.0.1:{idp_port}"
    idp = ThreadingServer(("127.0.0.1", idp_port), IdP)
    threading.Thread(target=idp.serve_forever, daemon=True).start()

    config = demo_config(REPO, work, mport, aport)
    sf_path = os.path.join(config, "destinations", "sf.json")
    sf = json.load(open(sf_path))
    sf.update({"URL": f"http://127.0.0.1:{sport}", "tokenServiceURL": f"http://127.0.0.1:{sport}/oauth/token"})
    json.dump(sf, open(sf_path, "w"))
    json.dump({"authentication": {"type": "jwt", "issuer": IdP.issuer, "audience": "midtier",
                                  "jwks": {"url": f"{IdP.issuer}/certs"}, "userClaim": "sub",
                                  "oauth2": {"authorizationEndpoint": f"{IdP.issuer}/auth", "tokenEndpoint": f"{IdP.issuer}/token",
                                             "clients": [{"clientID": CLIENT_ID, "redirectURL": REDIRECT}]}},
               "destinations": ["sf"],
               # A client policy of its own, read back through the Storage service below.
               "passwordPolicy": {"passwordPolicyEnabled": True, "passwordPolicyMinLength": 12, "passwordPolicyLockTimeout": 60},
               "featureVectorPolicies": {"featureVectorPolicyAllEnabled": False, "restrictedPolicies": ["Alchemer"]},
               # Devices upload logs and usage (client_uploads below).
               "logSettings": {"logEnabled": True, "logLevel": "WARN"}, "usagePolicy": {"dataCollectionEnabled": True}},
              open(os.path.join(config, "apps", "corp.json"), "w"))
    add_dotted_destination(config)
    add_implicit_app(config)
    add_logging_app(config)

    midtier, log_path = start_sandbox_and_midtier(BIN, REPO, work, config, sport, processes)
    base = f"http://127.0.0.1:{mport}"
    ready = wait_for(f"{base}/healthz") and wait_for(f"http://127.0.0.1:{sport}/sandbox/stats")
    check("midtier, the sandbox and the IdP start", ready and midtier.poll() is None, open(log_path, "rb").read()[-2000:].decode(errors="replace"))

    def storage(app, key_path="", headers=None, method="GET", service_app=None, mdk=False):
        """(status, parsed JSON or None, body) of the Storage service's `global` level, in the
        form SAPcpmsSettings / Android `Settings` call (`/mobileservices/application/{appId}/Storage/v1/
        runtime/application/{appId}/global/...`, help.sap.com Mobile Services "Samples for Storage
        Service") or, with `mdk`, the form MDK clients call (`/mobileservices/Storage/v1/runtime/...`)."""
        prefix = f"/mobileservices/Storage/v1/runtime/application/{app}/global" if mdk else \
            f"/mobileservices/application/{service_app or app}/Storage/v1/runtime/application/{app}/global"
        status, _, body = call(base + prefix + ("/" + key_path if key_path else ""), method, headers,
                               b"{}" if method in ("PUT", "POST") else None)
        return status, (json.loads(body) if status == 200 else None), body

    def odata_error(body):
        try:
            return json.loads(body)["error"]["message"]["value"]
        except (ValueError, KeyError, TypeError):
            return None

    def payroll(headers):
        status, answer_headers, body = call(f"{base}/sf/odata/v2/EmployeePayrollRunResults?$format=json&$top=5", headers=headers)
        rows = json.loads(body)["d"]["results"] if status == 200 else []
        return status, sorted({row.get("userId") for row in rows}), answer_headers, body

    # --- A JWT app, as the SDK onboards to it. ---
    status, _, body = call(f"{base}/config/v1/corp")
    discovery = json.loads(body) if status == 200 else {}
    auth = (discovery.get("auth") or [{}])[0]
    oauth2 = auth.get("config", {})
    check("discovery announces oauth2 for the JWT app", status == 200 and auth.get("type") == "oauth2", f"({status} {body[:300]!r})")
    check("discovery names the IdP's endpoints and the client, in both forms",
          oauth2.get("oauth2.authorizationEndpoint") == f"{IdP.issuer}/auth" and oauth2.get("oauth2.tokenEndpoint") == f"{IdP.issuer}/token"
          and oauth2.get("oauth2.clientID") == CLIENT_ID and oauth2.get("oauth2.grantType") == "authorization_code"
          and oauth2.get("oauth2.clients") == [{"clientID": CLIENT_ID, "redirectURL": REDIRECT, "grantType": "authorization_code"}]
          and discovery.get("appID") == "corp", f"({discovery})")
    check("discovery says where Midtier is", discovery.get("host") == "localhost" and discovery.get("port") == mport
          and discovery.get("protocol") == "http", f"({discovery})")
    # SAP's Discovery Service path, as DiscoveryServiceConfigurationProvider calls it with Midtier as its
    # discoveryServiceHost (SAPFoundation DiscoveryServiceConfigurationProvider; the path and the
    # `{appId}:1.0` AppConfigID as SAP's tutorials and the Fiori client call it): the same document.
    for config_id in ("corp", "corp:1.0"):
        call_segment = urllib.parse.quote(f"getApplicationConfiguration(AppConfigID='{config_id}',EmailAddress='alice@example.com')", safe="")
        status, _, body = call(f"{base}/config-api.svc/ApplicationConfigurations/{call_segment}")
        check(f"the Discovery Service path answers the discovery document for AppConfigID {config_id}",
              status == 200 and json.loads(body) == discovery, f"({status} {body[:300]!r})")
    call_segment = urllib.parse.quote("getApplicationConfiguration(AppConfigID='corp')", safe="")
    status, _, body = call(f"{base}/config-api.svc/ApplicationConfigurations/{call_segment}")
    check("the Discovery Service path without EmailAddress is 400 naming it", status == 400 and b"EmailAddress" in body, f"({status} {body[:200]!r})")

    status, token = sign_in_with_pkce(oauth2, "alice", IDP_USERS["alice"][0])
    check("alice signs in at the IdP with PKCE and gets a token", status == 200 and token, f"({status})")
    # The stand-in holds PKCE to account: a code redeemed with another verifier is refused.
    form = urllib.parse.urlencode({"response_type": "code", "client_id": CLIENT_ID, "redirect_uri": REDIRECT,
                                   "code_challenge": b64url(hashlib.sha256(b"the-real-verifier").digest()), "code_challenge_method": "S256",
                                   "state": "s", "username": "alice", "password": IDP_USERS["alice"][0]}).encode()
    _, headers, _ = call(f"{IdP.issuer}/auth", "POST", {"Content-Type": "application/x-www-form-urlencoded"}, form)
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(header(headers, "Location") or "").query).get("code", [""])[0]
    status, stolen = token_request(oauth2, oauth2["oauth2.clients"][0], code, "another-verifier")
    check("the IdP refuses a code redeemed without its PKCE verifier", status == 400 and stolen is None, f"({status})")

    sdk = {"Authorization": f"Bearer {token}", "X-SMP-APPID": "corp", "X-SMP-DEVICEID": "alice-iphone"}
    status, headers, body = call(f"{base}/odata/applications/v1/corp/Connections", "POST", dict(sdk, **{"Content-Type": "application/json"}),
                                 json.dumps({"DeviceType": "iOS", "DeviceModel": "iPhone15,2", "DeviceId": "alice-iphone"}).encode())
    alice_cid = header(headers, "X-SMP-APPCID")
    check("alice's device registers with the IdP's token", status == 201 and alice_cid, f"({status} {body[:300]!r})")
    status, _, body = call(f"{base}/mobileservices/settingsExchange/v1/corp", headers=sdk)
    settings = json.loads(body).get("mobileservices", {}).get("settingsExchange", {}) if status == 200 else {}
    check("the settings exchange answers the client policy", status == 200 and "blockWipingPolicy" in settings, f"({status} {body[:300]!r})")
    # Settings through the Storage service, as SAPcpmsSettings (iOS) and `Settings` (Android) read them.
    exchanged = settings
    # help.sap.com, SAPFoundation `SAPcpmsSettings`: the Store API answers {"mobileservices":{"settingsExchange":{...}}};
    # Mobile Services "Accessing Storage Service": GET .../Storage/v1/runtime/application/<appId>/global/<configurationName>/<propName>/...
    status, value, body = storage("corp", "mobileservices/settingsExchange", sdk)
    check("Storage: global/mobileservices/settingsExchange is the settings exchange's document", status == 200 and value == exchanged,
          f"({status} {body[:300]!r})")
    # Android SDK sample "Get Application-Level Settings": load(APPLICATION, KeyPath.MOBILESERVICES) then
    # settingsData.getJSONObject("settingsExchange"): a key path answers the value under it.
    status, value, body = storage("corp", "mobileservices", sdk)
    check("Storage: global/mobileservices answers the object under that key", status == 200 and value == {"settingsExchange": exchanged},
          f"({status} {body[:300]!r})")
    # help.sap.com "Samples for Storage Service": GET of a deeper key path answers the bare value there.
    status, value, body = storage("corp", "mobileservices/settingsExchange/passwordPolicy", sdk)
    check("Storage: a deeper key path (passwordPolicy) answers its value, values as strings", status == 200
          and value == exchanged.get("passwordPolicy") and value.get("passwordPolicyMinLength") == "12"
          and value.get("passwordPolicyEnabled") == "true" and all(isinstance(v, str) for v in value.values()), f"({status} {body[:300]!r})")
    # MDK's client code: GET /mobileservices/Storage/v1/runtime/application/${appId}/global/mobileservices/settingsExchange/
    # featureVectorPolicies, 200 + JSON whose `restrictedPolicies` it reads.
    status, value, body = storage("corp", "mobileservices/settingsExchange/featureVectorPolicies", sdk, mdk=True)
    check("Storage (MDK path): featureVectorPolicies, with its restrictedPolicies", status == 200
          and value == exchanged.get("featureVectorPolicies") and value.get("featureVectorPolicyAllEnabled") == "false"
          and value.get("restrictedPolicies") == ["Alchemer"], f"({status} {body[:300]!r})")
    # Android multi-user sample (SAP samples): "If the key is not found and the request returns a 404 error".
    status, _, body = storage("corp", "mobileservices/settingsExchange/noSuchPolicy", sdk)
    check("Storage: an unknown key path is 404 with an OData error naming it", status == 404
          and "noSuchPolicy" in (odata_error(body) or ""), f"({status} {body[:300]!r})")
    status, _, body = storage("corp", "mobileservices/settingsExchange/passwordPolicy/passwordPolicyMinLength/deeper", sdk, mdk=True)
    check("Storage (MDK path): a key path below a value is 404", status == 404, f"({status} {body[:200]!r})")
    # SAPcpmsSettings' payload: "mobileservices": {"__metadata": {"writeRoles": ["Administrator"]}, ...}; "Samples for Storage
    # Service": "Only users with the Administrator role can modify these settings using Runtime API" — read-only for devices.
    status, _, body = storage("corp", "mobileservices/settingsExchange/passwordPolicy", sdk, method="PUT")
    check("Storage: a device cannot PUT the global settings (403)", status == 403 and odata_error(body), f"({status} {body[:300]!r})")
    status, _, body = storage("corp", "mobileservices", sdk, method="DELETE", mdk=True)
    check("Storage (MDK path): nor DELETE them (403)", status == 403, f"({status} {body[:300]!r})")
    status, value, _ = storage("corp", "mobileservices/settingsExchange", sdk)
    check("Storage: the global settings are unchanged after those", status == 200 and value == exchanged, f"({status})")
    # Mobile Services "Accessing Storage Service": the application URL pattern is "authenticated by application's security configuration".
    status, _, body = storage("corp", "mobileservices/settingsExchange", {"X-SMP-APPID": "corp"})
    check("Storage: without a token, 401 (as the settings exchange)", status == 401, f"({status} {body[:200]!r})")
    status, _, body = storage("demo", "mobileservices/settingsExchange", sdk, service_app="corp")
    check("Storage: another app's id under corp's service path is refused (403)", status == 403, f"({status} {body[:200]!r})")
    status, _, body = storage("nosuchapp", "mobileservices/settingsExchange", sdk, mdk=True)
    check("Storage (MDK path): an unknown app id is 404", status == 404, f"({status} {body[:200]!r})")

    status, users, _, body = payroll(sdk)
    check("alice reads her own payroll with only the SDK's headers (no X-SMP-APPCID)", status == 200 and users == ["100001"],
          f"({status} {users} {body[:300]!r})")
    status, users, _, body = payroll(dict(sdk, **{"X-SMP-APPCID": alice_cid}))
    check("and with X-SMP-APPCID once the SDK knows it", status == 200 and users == ["100001"], f"({status} {users})")

    status, bob_token = sign_in_with_pkce(oauth2, "bob", IDP_USERS["bob"][0])
    bob = {"Authorization": f"Bearer {bob_token}", "X-SMP-APPID": "corp", "X-SMP-DEVICEID": "bob-pixel"}
    status, headers, _ = call(f"{base}/odata/applications/v1/corp/Connections", "POST", dict(bob, **{"Content-Type": "application/json"}),
                              json.dumps({"DeviceType": "Android", "DeviceId": "bob-pixel"}).encode())
    check("bob onboards his own device", status == 201, f"({status})")
    status, users, _, _ = payroll(bob)
    check("bob reads his own payroll", status == 200 and users == ["100002"], f"({status} {users})")
    status, users, _, body = payroll(dict(bob, **{"X-SMP-DEVICEID": "alice-iphone"}))
    check("bob naming alice's device gets nothing of hers (403)", status == 403 and users == [], f"({status} {body[:200]!r})")

    status, users, headers, _ = payroll({"X-SMP-APPID": "corp", "X-SMP-DEVICEID": "alice-iphone"})
    check("without a token: 401 with the JWT app's Bearer challenge", status == 401
          and (header(headers, "WWW-Authenticate") or "").startswith("Bearer"), f"({status} {headers})")
    status, users, _, _ = payroll(dict(sdk, **{"X-SMP-APPID": "demo", "X-SMP-APPCID": alice_cid}))
    check("an X-SMP-APPID that is not the registration's app is refused (403)", status == 403 and users == [], f"({status})")

    # --- The registration API's original format: Atom/XML, read by a real XML parser. ---
    ATOM, M, D = "{http://www.w3.org/2005/Atom}", "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}", \
        "{http://schemas.microsoft.com/ado/2007/08/dataservices}"
    hostile_model = "<script>alert('x')</script> & \"quotes\""
    status, headers, body = call(f"{base}/odata/applications/v1/corp/Connections", "POST",
                                 dict(sdk, **{"Content-Type": "application/json", "Accept": "application/atom+xml", "X-SMP-DEVICEID": "alice-ipad"}),
                                 json.dumps({"DeviceType": "iPad", "DeviceModel": hostile_model, "DeviceId": "alice-ipad",
                                             "ApnsPushEnable": True, "Email": "alice@example.com"}).encode())
    try:
        entry = ElementTree.fromstring(body)
    except ElementTree.ParseError as error:
        entry = None
        body = body + f" ({error})".encode()
    props = entry.find(f"{ATOM}content/{M}properties") if entry is not None else None
    value = (lambda name: props.find(f"{D}{name}") if props is not None else None)
    check("a registration asked for as Atom comes back as an Atom entry", status == 201 and entry is not None and entry.tag == f"{ATOM}entry"
          and (header(headers, "Content-Type") or "").startswith("application/atom+xml"), f"({status} {body[:300]!r})")
    check("its properties are typed the OData v2 way", value("ApnsPushEnable") is not None and value("ApnsPushEnable").text == "true"
          and value("ApnsPushEnable").get(f"{M}type") == "Edm.Boolean" and value("CreatedAt").get(f"{M}type") == "Edm.DateTime"
          and value("Email").text == "alice@example.com", f"({body[:600]!r})")
    check("a hostile device model is text in the XML, not markup", value("DeviceModel") is not None and value("DeviceModel").text == hostile_model,
          f"({body[:600]!r})")
    status, _, body = call(f"{base}/odata/applications/v1/corp/Connections?$format=atom", headers=sdk)
    feed = ElementTree.fromstring(body) if status == 200 else None
    ids = sorted(e.find(f"{ATOM}content/{M}properties/{D}ApplicationConnectionId").text for e in feed.findall(f"{ATOM}entry")) if feed is not None else []
    check("alice's Connections feed in Atom lists her two registrations, not bob's", status == 200 and len(ids) == 2 and alice_cid in ids,
          f"({status} {ids})")
    status, _, body = call(f"{base}/odata/applications/v1/corp/Connections", headers=dict(sdk, Accept="application/json"))
    results = json.loads(body)["d"]["results"] if status == 200 else []
    check("and in JSON", status == 200 and sorted(r["ApplicationConnectionId"] for r in results) == ids, f"({status} {body[:200]!r})")

    # --- A basic app, the same way. ---
    status, _, body = call(f"{base}/config/v1/demo")
    discovery = json.loads(body) if status == 200 else {}
    check("discovery announces basic for the basic app", (discovery.get("auth") or [{}])[0].get("type") == "basic"
          and discovery.get("appID") == "demo", f"({discovery})")
    tablet = {"Authorization": basic("alice", "alice-demo-password"), "X-SMP-APPID": "demo", "X-SMP-DEVICEID": "alice-ipad"}
    status, _, body = call(f"{base}/odata/applications/v1/demo/Connections", "POST", dict(tablet, **{"Content-Type": "application/json"}),
                           json.dumps({"DeviceType": "iPad", "DeviceId": "alice-ipad"}).encode())
    check("a basic user's device registers", status == 201, f"({status} {body[:200]!r})")
    status, _, body = call(f"{base}/mobileservices/settingsExchange/v1/demo", headers=tablet)
    settings = json.loads(body).get("mobileservices", {}).get("settingsExchange", {}) if status == 200 else {}
    password = settings.get("passwordPolicy", {})
    # SAP Mobile Services sends policy values as strings; the SDK's passcode policy reader
    # takes a [String: String], so that is what a stock client can read.
    check("the basic app's settings exchange gives the demo policy in the SDK's spelling and types", status == 200
          and password.get("passwordPolicyEnabled") == "true" and password.get("passwordPolicyMinLength") == "8"
          and all(isinstance(value, str) for value in password.values())
          and settings.get("usagePolicy", {}).get("dataCollectionEnabled") == "false"
          and settings.get("featureVectorPolicies", {}).get("featureVectorPolicyAllEnabled") == "true"
          and settings.get("blockWipingPolicy", {}).get("wipeDisconnectedPeriod") == 90, f"({status} {settings})")
    check_log_settings_as_strings(settings, storage, tablet)
    # Settings through the Storage service for the basic app (sources as for the JWT app above).
    status, value, body = storage("demo", "mobileservices/settingsExchange", tablet)
    check("Storage (basic app): global/mobileservices/settingsExchange is the settings exchange's document", status == 200
          and value == settings, f"({status} {body[:300]!r})")
    status, value, body = storage("demo", "mobileservices/settingsExchange/passwordPolicy", tablet)
    check("Storage (basic app): passwordPolicy with the demo values as strings", status == 200 and value.get("passwordPolicyMinLength") == "8"
          and value.get("passwordPolicyEnabled") == "true" and all(isinstance(v, str) for v in value.values()), f"({status} {body[:300]!r})")
    # Not confirmed in SAP's pages: what a key path ending at a single value answers; Midtier answers the JSON value ("8").
    status, _, body = storage("demo", "mobileservices/settingsExchange/passwordPolicy/passwordPolicyMinLength", tablet)
    check("Storage (basic app): a key path to one setting answers that value", status == 200 and json.loads(body) == "8", f"({status} {body[:200]!r})")
    status, value, body = storage("demo", "mobileservices/settingsExchange/featureVectorPolicies", tablet, mdk=True)
    check("Storage (basic app, MDK path): featureVectorPolicies", status == 200 and value.get("featureVectorPolicyAllEnabled") == "true"
          and value.get("restrictedPolicies") == [], f"({status} {body[:300]!r})")
    status, _, body = storage("demo", "mobileservices/settingsExchange/noSuchPolicy", tablet, mdk=True)
    check("Storage (basic app, MDK path): an unknown key path is 404", status == 404 and odata_error(body), f"({status} {body[:200]!r})")
    status, _, body = storage("demo", "mobileservices/settings%ZZExchange", tablet)
    check("Storage (basic app): a key path that is not percent-encoded correctly is 400, naming the segment", status == 400
          and "settings%ZZExchange" in (odata_error(body) or ""), f"({status} {body[:200]!r})")
    status, value, body = storage("demo", "mobile%73ervices/settingsExchange/passwordPolicy", tablet)
    check("Storage (basic app): key path segments are percent-decoded", status == 200 and value.get("passwordPolicyMinLength") == "8",
          f"({status} {body[:200]!r})")
    status, _, body = storage("demo", "mobileservices/settingsExchange/passwordPolicy", tablet, method="POST")
    check("Storage (basic app): POST on the global level is refused (403)", status == 403, f"({status} {body[:200]!r})")
    status, _, body = storage("corp", "mobileservices/settingsExchange", tablet, service_app="demo")
    check("Storage (basic app): corp's storage through demo's service path is refused (403)", status == 403, f"({status} {body[:200]!r})")
    status, _, body = storage("corp", "mobileservices/settingsExchange", tablet, mdk=True)
    check("Storage: the basic user's password is no credential for the JWT app's storage (401)", status == 401, f"({status} {body[:200]!r})")
    status, _, body = storage("demo", "mobileservices/settingsExchange", {"Authorization": basic("alice", "wrong-password"), "X-SMP-APPID": "demo"})
    check("Storage (basic app): a wrong password is 401", status == 401, f"({status} {body[:200]!r})")

    status, users, _, body = payroll(tablet)
    check("the basic user reads payroll with only the SDK's headers", status == 200 and users == ["100001"], f"({status} {users} {body[:200]!r})")
    check_dotted_destination(base, tablet)
    # Destinations download: SAPcpmsDestinations loads the app's destinations from the registration
    # service's Endpoints collection (SAPFoundation SAPcpmsDestinations; the Endpoints entity set with
    # EndpointName, RemoteURL, AnonymousAccess: SAP's "Retrieving Service Documents", service-document.html).
    status, _, body = call(f"{base}/odata/applications/v1/demo/Endpoints", headers=dict(tablet, Accept="application/json"))
    endpoints = json.loads(body)["d"]["results"] if status == 200 else []
    names = [endpoint.get("EndpointName") for endpoint in endpoints]
    check("Endpoints lists the basic app's destinations, the dotted one too", status == 200 and DOTTED in names and "sf" in names
          and names == sorted(names), f"({status} {body[:300]!r})")
    check("each Endpoint's RemoteURL is Midtier's URL for it, never the back end's", all(
          endpoint.get("RemoteURL") == f"{discovery['protocol']}://{discovery['host']}:{discovery['port']}/{endpoint.get('EndpointName')}"
          and endpoint.get("AnonymousAccess") is False
          for endpoint in endpoints) and endpoints, f"({endpoints})")
    remote = next((endpoint["RemoteURL"] for endpoint in endpoints if endpoint.get("EndpointName") == "sf"), base + "/missing")
    remote = base + remote[remote.index("/", len("http://")):]  # the same port, reached the way this test reaches Midtier
    status, _, body = call(f"{remote}/odata/v2/EmployeePayrollRunResults?$format=json&$top=5", headers=tablet)
    check("a call to an Endpoint's RemoteURL reads the user's own payroll", status == 200
          and sorted({row.get("userId") for row in json.loads(body)["d"]["results"]}) == ["100001"], f"({status} {body[:200]!r})")
    status, _, body = call(f"{base}/odata/applications/v1/demo/Endpoints('{DOTTED}')", headers=dict(tablet, Accept="application/atom+xml"))
    check("one Endpoint by name, in Atom when asked", status == 200 and f"<d:EndpointName>{DOTTED}</d:EndpointName>".encode() in body,
          f"({status} {body[:300]!r})")
    status, _, body = call(f"{base}/odata/applications/v1/demo/Endpoints('nope')", headers=tablet)
    check("an Endpoint the app does not have is 404", status == 404, f"({status} {body[:200]!r})")
    status, _, body = call(f"{base}/odata/applications/v1/demo/Endpoints", headers={"X-SMP-APPID": "demo"})
    check("Endpoints without credentials is 401", status == 401, f"({status} {body[:200]!r})")
    status, users, headers, _ = payroll({"X-SMP-APPID": "demo", "X-SMP-DEVICEID": "alice-ipad"})
    check("without credentials: 401 with the basic app's challenge", status == 401
          and (header(headers, "WWW-Authenticate") or "").startswith("Basic"), f"({status} {headers})")

    # --- Registration in Atom (issue 23, item 3): SAP's documented request body is an Atom entry.
    # Sources: help.sap.com Mobile Services "Managing App Registrations"
    # (https://help.sap.com/doc/f53c64b93e5140918d676b927a3cd65b/Cloud/en-US/docs-en/guides/getting-started/api/registration.html)
    # and SAP Mobile Platform 3.0 "Creating an Application Connection"
    # (https://help.sap.com/saphelp_smp304svr/helpdata/en/7c/0a5d5e700610149130e033fdbfca9a/content.htm).
    def atom_registration():
        ATOM, M, D = "{http://www.w3.org/2005/Atom}", "{http://schemas.microsoft.com/ado/2007/08/dataservices/metadata}", \
            "{http://schemas.microsoft.com/ado/2007/08/dataservices}"
        EDMX, EDM, APP = "{http://schemas.microsoft.com/ado/2007/06/edmx}", "{http://schemas.microsoft.com/ado/2008/09/edm}", \
            "{http://www.w3.org/2007/app}"
        atom_type = {"Content-Type": "application/atom+xml; charset=UTF-8"}  # the header SMP 3.0's example sends

        def entry_body(properties, doctype=""):
            # SAP's request body example ("Managing App Registrations"), its invalid <updated> date included.
            return (f"<?xml version='1.0' encoding='utf-8'?>{doctype}<entry xmlns=\"http://www.w3.org/2005/Atom\" "
                    "xmlns:d=\"http://schemas.microsoft.com/ado/2007/08/dataservices\" "
                    "xmlns:m=\"http://schemas.microsoft.com/ado/2007/08/dataservices/metadata\"><title type=\"text\"/>"
                    "<updated>2014-061-15T02:23:29Z</updated><author><name/></author>"
                    "<category term=\"applications.Connection\" scheme=\"http://schemas.microsoft.com/ado/2007/08/dataservices/scheme\"/>"
                    f"<content type=\"application/xml\"><m:properties>{properties}</m:properties></content></entry>").encode()

        def parsed(body):
            try:
                return ElementTree.fromstring(body)
            except ElementTree.ParseError:
                return None

        def atom_props(entry):
            props = entry.find(f"{ATOM}content/{M}properties") if entry is not None else None
            return {} if props is None else {child.tag[len(D):]: child.text or "" for child in props}

        def register(app, headers, body, version="v1", content_type=atom_type):
            return call(f"{base}/odata/applications/{version}/{app}/Connections", "POST", dict(headers, **content_type), body)

        iphone = dict(sdk, **{"X-SMP-DEVICEID": "alice-atom-iphone"})
        tablet_atom = {"Authorization": basic("alice", "alice-demo-password"), "X-SMP-APPID": "demo", "X-SMP-DEVICEID": "alice-atom-tablet"}
        entities = {}
        for app, headers, device in (("corp", iphone, "alice-atom-iphone"), ("demo", tablet_atom, "alice-atom-tablet")):
            # SAP's example properties: d:DeviceType, d:DeviceModel m:null="true", d:ApnsDeviceToken m:null="false".
            status, answer, body = register(app, headers, entry_body(
                f"<d:DeviceType>iPhone</d:DeviceType><d:DeviceModel m:null=\"true\" /><d:DeviceId>{device}</d:DeviceId>"
                "<d:ApnsDeviceToken m:null=\"false\">18AA48C0FFEE</d:ApnsDeviceToken><d:ApnsPushEnable>true</d:ApnsPushEnable>"
                "<d:NotAConnectionProperty>ignored</d:NotAConnectionProperty>"))
            entry = parsed(body)
            props = atom_props(entry)
            cid = header(answer, "X-SMP-APPCID") or ""
            # "201 Created New application connection settings are included in the response body" (Managing App Registrations);
            # SMP 3.0: "Content-Type: application/atom+xml", "Set-Cookie: X-SMP-APPCID=…", "Location: …/Connections('…')".
            check(f"Atom registration ({app}): 201 with an Atom entry of the new connection", status == 201 and entry is not None
                  and entry.tag == f"{ATOM}entry" and (header(answer, "Content-Type") or "").startswith("application/atom+xml")
                  and props.get("DeviceType") == "iPhone" and props.get("ApnsDeviceToken") == "18aa48c0ffee"
                  and props.get("ApnsPushEnable") == "true" and props.get("DeviceId") == device and props.get("DeviceModel") == ""
                  and props.get("ApplicationConnectionId") == cid, f"({status} {body[:400]!r})")
            check(f"Atom registration ({app}): the X-SMP-APPCID cookie and the entry's Location", cid
                  and f"X-SMP-APPCID={cid}" in (header(answer, "Set-Cookie") or "")
                  and (header(answer, "Location") or "").endswith(f"/odata/applications/v1/{app}/Connections('{cid}')"), f"({answer})")
            entities[app] = (headers, cid)

        headers, cid = entities["corp"]
        entity_url = f"{base}/odata/applications/v1/corp/Connections('{cid}')"
        # "Once registered, an application can retrieve and update the application connection settings" (REST services overview).
        status, answer, body = call(entity_url, headers=dict(headers, Accept="application/atom+xml"))
        check("GET of the Atom-registered entry in Atom", status == 200 and atom_props(parsed(body)).get("DeviceType") == "iPhone",
              f"({status} {body[:300]!r})")
        status, _, body = call(entity_url + "?$format=json", headers=headers)
        check("and in JSON (the APNs token kept in lower case: APNs reads hex in either case)", status == 200 and json.loads(body)["d"]["ApnsDeviceToken"] == "18aa48c0ffee", f"({status} {body[:300]!r})")
        status, _, body = call(entity_url, "PUT", dict(headers, **atom_type),
                               entry_body("<d:DeviceModel>iPhone15,3</d:DeviceModel><d:DeviceId>alice-atom-iphone</d:DeviceId>"))
        _, _, after = call(entity_url + "?$format=json", headers=headers)
        check("PUT in Atom updates the connection (204)", status == 204 and json.loads(after)["d"]["DeviceModel"] == "iPhone15,3",
              f"({status} {body[:300]!r} {after[:300]!r})")
        status, _, body = call(entity_url, "MERGE", dict(headers, **atom_type), entry_body("<d:UserLocale>de_DE</d:UserLocale>"))
        _, _, after = call(entity_url + "?$format=json", headers=headers)
        check("MERGE in Atom updates only what it names (204)", status == 204 and json.loads(after)["d"]["UserLocale"] == "de_DE"
              and json.loads(after)["d"]["DeviceModel"] == "iPhone15,3", f"({status} {body[:300]!r} {after[:300]!r})")

        # "<service version> Mandatory v1 onwards" (Managing App Registrations); "{latest|v1} – version of the service document" (SMP 3.0).
        status, answer, body = register("corp", dict(iphone, **{"X-SMP-DEVICEID": "alice-atom-latest"}),
                                        entry_body("<d:DeviceId>alice-atom-latest</d:DeviceId>"), version="latest")
        latest_cid = header(answer, "X-SMP-APPCID") or ""
        check("Atom registration under `latest`", status == 201 and "/odata/applications/latest/corp/Connections(" in (header(answer, "Location") or ""),
              f"({status} {body[:300]!r})")
        status, _, body = call(f"{base}/odata/applications/v2/corp/Connections('{latest_cid}')?$format=json", headers=iphone)
        check("the connection under `v2`", status == 200 and json.loads(body)["d"]["ApplicationConnectionId"] == latest_cid, f"({status} {body[:300]!r})")
        status, _, body = call(f"{base}/odata/applications/v0/corp/Connections", headers=iphone)
        check("`v0` is no service version (404)", status == 404, f"({status} {body[:200]!r})")

        # The service document and $metadata of the Connections service: namespace `applications`, EntityType Connection,
        # EntitySet Connections (SAP's $metadata of the applications service; SMP 3.0 `xml:base=…/odata/applications/latest/{appId}/`).
        status, answer, body = call(f"{base}/odata/applications/v1/corp/", headers=iphone)
        service = parsed(body)
        hrefs = [c.get("href") for c in service.iter(f"{APP}collection")] if service is not None else []
        # Endpoints too (SAPcpmsDestinations; docs/device-api.md, since the Endpoints collection was added).
        check("the service document, Atom by default, names the Connections and Endpoints collections", status == 200 and service is not None
              and service.tag == f"{APP}service" and hrefs == ["Connections", "Endpoints"], f"({status} {body[:300]!r})")
        status, _, body = call(f"{base}/odata/applications/v1/corp/?$format=json", headers=iphone)
        check("and in JSON with $format=json", status == 200 and json.loads(body) == {"d": {"EntitySets": ["Connections", "Endpoints"]}}, f"({status} {body[:300]!r})")
        status, _, body = call(f"{base}/odata/applications/v1/corp", headers=dict(iphone, Accept="application/json"))
        check("and in JSON by Accept", status == 200 and json.loads(body) == {"d": {"EntitySets": ["Connections", "Endpoints"]}}, f"({status} {body[:300]!r})")
        status, answer, body = call(f"{base}/odata/applications/v1/corp/$metadata", headers=iphone)
        metadata = parsed(body)
        schema = metadata.find(f"{EDMX}DataServices/{EDM}Schema") if metadata is not None else None
        connection = schema.find(f"{EDM}EntityType[@Name='Connection']") if schema is not None else None
        names = {p.get("Name"): p.get("Type") for p in connection.findall(f"{EDM}Property")} if connection is not None else {}
        key = [k.get("Name") for k in connection.findall(f"{EDM}Key/{EDM}PropertyRef")] if connection is not None else []
        sets = {s.get("Name"): s.get("EntityType") for s in schema.iter(f"{EDM}EntitySet")} if schema is not None else {}
        check("$metadata: namespace applications, EntityType Connection keyed by ApplicationConnectionId", status == 200
              and schema is not None and schema.get("Namespace") == "applications" and key == ["ApplicationConnectionId"],
              f"({status} {body[:300]!r})")
        check("$metadata: the entity set Connections and the properties Midtier stores, typed", sets == {"Connections": "applications.Connection", "Endpoints": "applications.Endpoint"}
              and names.get("DeviceType") == "Edm.String" and names.get("ApnsDeviceToken") == "Edm.String"
              and names.get("ApnsPushEnable") == "Edm.Boolean" and names.get("CreatedAt") == "Edm.DateTime"
              and names.get("BlockDisconnectedPeriod") == "Edm.Int32", f"({sets} {names})")

        # Bad Atom is 400 naming what is wrong; an entity attack expands nothing and registers nothing.
        _, _, before = call(f"{base}/odata/applications/v1/corp/Connections?$format=json", headers=iphone)
        status, _, body = register("corp", iphone, b"<entry xmlns='http://www.w3.org/2005/Atom'><content>")
        check("malformed Atom is 400 saying it is not well-formed", status == 400 and "well-formed" in (odata_error(body) or ""),
              f"({status} {body[:300]!r})")
        status, _, body = register("corp", iphone, b"<entry xmlns='http://www.w3.org/2005/Atom'><content type='application/xml'/></entry>")
        check("an entry without m:properties is 400 naming m:properties", status == 400 and "m:properties" in (odata_error(body) or ""),
              f"({status} {body[:300]!r})")
        status, _, body = register("corp", iphone, entry_body("<d:DeviceType>" + "x" * 5000 + "</d:DeviceType>"))
        check("an Atom field gets the JSON body's checks (too long: 400)", status == 400 and "DeviceType" in (odata_error(body) or ""),
              f"({status} {body[:300]!r})")
        status, _, body = register("corp", iphone, entry_body("<d:ApnsPushEnable>perhaps</d:ApnsPushEnable>"))
        check("a boolean that is neither true nor false is 400", status == 400 and "ApnsPushEnable" in (odata_error(body) or ""),
              f"({status} {body[:300]!r})")
        xxe = entry_body("<d:DeviceModel>&xxe;</d:DeviceModel>", "<!DOCTYPE entry [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]>")
        status, _, body = register("corp", iphone, xxe)
        check("an XXE Atom body is 400 and nothing of the file comes back", status == 400 and b"root:" not in body, f"({status} {body[:300]!r})")
        laughs = "<!DOCTYPE entry [<!ENTITY a \"aaaaaaaaaa\">" + "".join(
            f"<!ENTITY {chr(98 + i)} \"{('&' + chr(97 + i) + ';') * 10}\">" for i in range(8)) + "]>"
        status, _, body = register("corp", iphone, entry_body("<d:DeviceModel>&i;</d:DeviceModel>", laughs))
        check("a billion-laughs Atom body is 400 with nothing expanded", status == 400 and b"aaaaaaaaaa" not in body, f"({status} {body[:300]!r})")
        _, _, after = call(f"{base}/odata/applications/v1/corp/Connections?$format=json", headers=iphone)
        check("none of the refused bodies registered anything", len(json.loads(after)["d"]["results"]) == len(json.loads(before)["d"]["results"]),
              f"({before[:200]!r} {after[:200]!r})")

    atom_registration()
    check_implicit_registration(base, payroll)
    user_and_device_storage(base, sdk, bob, os.path.join(work, "midtier.sqlite"))
    database = os.path.join(work, "midtier.sqlite")
    # The OAuth2 (JWT) app: the SDK's headers with the IdP's token, no X-SMP-APPCID.
    client_uploads(base, "corp", sdk, bob, "alice-iphone", database)
    # The basic app `demo` sends logEnabled "false" (above): logupload.html, 403 "Client log upload is not enabled".
    status, _, body = call(f"{base}/mobileservices/application/demo/clientlogs/v1/runtime/log/application/demo?deviceId=alice-ipad",
                           "POST", tablet, LOG_TEXT.encode())
    check("client logs (demo): logEnabled false is 403", status == 403, f"({status} {body[:300]!r})")
    # A basic app with logs and usage on.
    field = {"Authorization": basic("alice", "alice-demo-password"), "X-SMP-APPID": "fieldlog", "X-SMP-DEVICEID": "alice-field-1"}
    status, _, body = call(f"{base}/odata/applications/v1/fieldlog/Connections", "POST", dict(field, **{"Content-Type": "application/json"}),
                           json.dumps({"DeviceType": "iOS", "DeviceId": "alice-field-1"}).encode())
    check("a basic user's device registers in fieldlog", status == 201, f"({status} {body[:200]!r})")
    client_uploads(base, "fieldlog", field, {"Authorization": basic("carol", "carol-demo-password"), "X-SMP-APPID": "fieldlog"},
                   "alice-field-1", database)
finally:
    kill_all(processes)
    shutil.rmtree(work, ignore_errors=True)
check.finish()
