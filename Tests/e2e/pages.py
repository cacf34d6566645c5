#!/usr/bin/env python3
"""The admin console and the self-service page in a real browser (headless Chromium driven by
selenium through chromedriver), against a real Midtier process and the sandbox.

An admin signs in with a token, blocks a user and sees the device API refuse that user,
unblocks; wipes a registration and sees `TRAFFIC_REG_WIPED`; a user signs in to the
self-service page (with a password, and with an identity provider's token) and locks their
own phone; another user's device is never shown or reachable; forged form posts (no CSRF
token, another site's page) are refused; hostile device models and user ids show as text;
sign-out ends the session; the pages carry their protective headers and cookie flags.
docs/console.md.

Usage: pages.py PATH-TO-MIDTIER [--screenshots DIR]. Screenshots of every page go to DIR
(default `test-output/pages/`). Prints `pages: N passed, M failed`; exits 1 on failure.
"""
import http.server, json, os, re, socketserver, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.parse, urllib.request
from harness import Checks, basic, demo_config, free_port, header, idp_key, jwt, kill_all, start_sandbox_and_midtier, wait_for

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, NoSuchElementException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHOTS = os.path.abspath(sys.argv[sys.argv.index("--screenshots") + 1]) if "--screenshots" in sys.argv else os.path.join(REPO, "test-output", "pages")
ADMIN_TOKEN = "pages-test-admin-token-0123456789abcdef"
HOSTILE_MODEL = "<script>alert('pwned')</script><img src=x onerror=alert(2)>"
ISSUER = "https://idp.pages.test/realms/staff"
processes = []
check = Checks("pages")


class Opener(urllib.request.HTTPRedirectHandler):
    """No redirects followed: the test looks at each answer itself."""
    def redirect_request(self, *args):
        return None


_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), Opener)


def call(url, method="GET", headers=None, body=None):
    """(status, headers as a list of pairs, body) without following redirects."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with _direct.open(request, timeout=30) as answer:
            return answer.status, answer.getheaders(), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.items(), error.read()


def cookies_set(headers):
    return [value for name, value in headers if name.lower() == "set-cookie"]


def first(headers, name):
    return next((value for key, value in headers if key.lower() == name.lower()), None)


def register(base, user, password, model, device_type="iOS", app="demo", authorization=None):
    status, headers, body = call(f"{base}/odata/applications/v1/{app}/Connections", "POST",
                                 {"Content-Type": "application/json", "Authorization": authorization or basic(user, password)},
                                 json.dumps({"DeviceType": device_type, "DeviceModel": model}).encode())
    return first(headers, "X-SMP-APPCID") if status == 201 else None


def payroll(base, user, password, cid):
    status, headers, _ = call(f"{base}/sf/odata/v2/User?$format=json", headers={"Authorization": basic(user, password), "X-SMP-APPCID": cid})
    return status, first(headers, "x-message-code")


class AttackerPage(http.server.BaseHTTPRequestHandler):
    """Another site's page with a form that posts to the console (a cross-site request forgery)."""
    target = ""

    def do_GET(self):
        page = (f'<!DOCTYPE html><html><body><form id="forged" method="post" action="{self.target}">'
                '<input type="hidden" name="id" value="carol"><input type="hidden" name="type" value="all">'
                '<input type="hidden" name="csrf" value="guessed"><button id="go" type="submit">Win a prize</button></form></body></html>').encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args):
        pass


def browser():
    options = Options()
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,800",
                     "--disable-extensions", "--no-first-run", "--password-store=basic"]:
        options.add_argument(argument)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def shot(driver, name):
    driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))


def wait_id(driver, element_id, seconds=30):
    return WebDriverWait(driver, seconds).until(expected_conditions.presence_of_element_located((By.ID, element_id)))


def no_alert(driver):
    try:
        driver.switch_to.alert
        return False
    except NoAlertPresentException:
        return True


def text_of(driver, element_id):
    try:
        return driver.find_element(By.ID, element_id).text
    except NoSuchElementException:
        return None


work = tempfile.mkdtemp(prefix="midtier-pages-")
driver = None
attacker = None
try:
    os.makedirs(SHOTS, exist_ok=True)
    sport, mport, aport, evil_port = free_port(), free_port(), free_port(), free_port()
    admin_hash = subprocess.run([BIN, "hash-secret"], input=ADMIN_TOKEN.encode(), capture_output=True, check=True).stdout.decode().strip()
    config = demo_config(REPO, work, mport, aport, adminTokenHashes=[admin_hash])
    sf_path = os.path.join(config, "destinations", "sf.json")
    sf = json.load(open(sf_path))
    sf.update({"URL": f"http://127.0.0.1:{sport}", "tokenServiceURL": f"http://127.0.0.1:{sport}/oauth/token"})
    json.dump(sf, open(sf_path, "w"))
    # A jwt app: its users sign in to the self-service page by pasting their IdP's token.
    key, jwks = idp_key(work)
    json.dump(jwks, open(os.path.join(config, "corp-jwks.json"), "w"))
    json.dump({"authentication": {"type": "jwt", "issuer": ISSUER, "audience": "midtier",
                                  "jwks": {"file": os.path.join(config, "corp-jwks.json")}, "userClaim": "sub"},
               "destinations": ["sf"], "logSettings": {"logEnabled": True, "logLevel": "WARN"},
               "usagePolicy": {"dataCollectionEnabled": True}}, open(os.path.join(config, "apps", "corp.json"), "w"))

    midtier, log_path = start_sandbox_and_midtier(BIN, REPO, work, config, sport, processes)
    base, admin = f"http://localhost:{mport}", f"http://localhost:{aport}"
    ready = wait_for(f"{base}/healthz") and wait_for(f"http://127.0.0.1:{sport}/sandbox/stats")
    check("midtier and the sandbox start", ready and midtier.poll() is None, open(log_path, "rb").read()[-2000:].decode(errors="replace"))

    alice_phone = register(base, "alice", "alice-demo-password", "iPhone15,2")
    alice_hostile = register(base, "alice", "alice-demo-password", HOSTILE_MODEL, device_type="Android")
    bob_phone = register(base, "bob", "bob-demo-password", "Pixel 8", device_type="Android")
    carol_phone = register(base, "carol", "carol-demo-password", "iPhone14,7")
    now = int(time.time())
    corp_token = jwt(key, {"iss": ISSUER, "aud": "midtier", "sub": "alice", "exp": now + 600, "iat": now})
    corp_alice = register(base, None, None, "Galaxy S24", device_type="Android", app="corp", authorization=f"Bearer {corp_token}")
    # An IdP may name a user with any printable string, a trailing no-break space included
    # (control characters are refused: docs/identity.md, "Stored text").
    dora_token = jwt(key, {"iss": ISSUER, "aud": "midtier", "sub": "dora\u00a0", "exp": now + 600, "iat": now})
    corp_dora = register(base, None, None, "Pixel 7", device_type="Android", app="corp", authorization=f"Bearer {dora_token}")
    check("devices onboard (alice twice, bob, carol, alice and 'dora\\u00a0' of the IdP)",
          all([alice_phone, alice_hostile, bob_phone, carol_phone, corp_alice, corp_dora]))
    check("alice and bob read payroll before anything changes", payroll(base, "alice", "alice-demo-password", alice_phone)[0] == 200
          and payroll(base, "bob", "bob-demo-password", bob_phone)[0] == 200)

    # --- Protective headers and cookie flags, as a browser receives them. ---
    status, headers, body = call(f"{admin}/console/sign-in")
    csp = first(headers, "Content-Security-Policy") or ""
    check("the sign-in page answers with a strict Content-Security-Policy (no inline script or style, no frames)",
          status == 200 and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp, f"({csp})")
    check("… X-Frame-Options DENY, Referrer-Policy no-referrer, nosniff, no-store",
          first(headers, "X-Frame-Options") == "DENY" and first(headers, "Referrer-Policy") == "no-referrer"
          and first(headers, "X-Content-Type-Options") == "nosniff" and first(headers, "Cache-Control") == "no-store", f"({headers})")
    check("the pages have no script and no inline style", b"<script" not in body and b"style=" not in body and b"<style" not in body)
    status, _, _ = call(f"{admin}/console/")
    check("a console page without a session sends the browser to sign in", status == 303)
    status, _, _ = call(f"{base}/console/")
    check("the console is not on the device listener", status in (403, 404))
    # DNS rebinding: another site's name re-pointed at the admin listener is refused there.
    for path in ["/console/sign-in", "/admin/v1/registrations"]:
        status, _, _ = call(f"{admin}{path}", headers={"Host": f"rebind.attacker.example:{aport}", "Authorization": f"Bearer {ADMIN_TOKEN}"})
        check(f"{path} addressed to another host name is refused (421)", status == 421, f"({status})")
    status, _, _ = call(f"http://127.0.0.1:{aport}/console/sign-in")
    check("… and answered by IP address and localhost", status == 200)
    status, headers, _ = call(f"{base}/mobileservices/me")
    check("/mobileservices/me without its slash goes to /mobileservices/me/ (where the cookie is sent)",
          status == 303 and first(headers, "Location") == "/mobileservices/me/", f"({status} {headers})")

    driver = browser()

    # --- The admin console. ---
    driver.get(f"{admin}/console/")
    wait_id(driver, "token")
    shot(driver, "console-sign-in")
    driver.find_element(By.ID, "token").send_keys("not-the-admin-token")
    driver.find_element(By.ID, "sign-in").click()
    wait_id(driver, "problem")
    check("a wrong admin token is refused on the page", "not a valid admin token" in (text_of(driver, "problem") or ""), driver.page_source[:500])
    driver.find_element(By.ID, "token").send_keys(ADMIN_TOKEN)
    driver.find_element(By.ID, "sign-in").click()
    wait_id(driver, "store-state")
    check("the admin signs in and sees the overview (store reachable)", text_of(driver, "store-state") == "reachable")
    check("the token is not in the page or its address", ADMIN_TOKEN not in driver.page_source and ADMIN_TOKEN not in driver.current_url)
    session = driver.get_cookie("midtier_console")
    check("the session cookie is HttpOnly, SameSite=Strict, for /console/ only",
          session is not None and session.get("httpOnly") and session.get("sameSite") == "Strict" and session.get("path") == "/console/",
          f"({session})")
    shot(driver, "console-overview")

    # Block alice; the device API refuses her.
    driver.get(f"{admin}/console/users?id=alice")
    wait_id(driver, "block")
    Select(driver.find_element(By.ID, "block-type")).select_by_value("all")
    driver.find_element(By.ID, "block-reason").send_keys("phone reported stolen")
    driver.find_element(By.ID, "block").click()
    wait_id(driver, "unblock")
    check("blocking alice in the console shows her blocked", "Blocked (all)" in (text_of(driver, "block-state") or "")
          and "alice is blocked" in (text_of(driver, "notice") or ""), text_of(driver, "block-state"))
    shot(driver, "console-users")
    status, code = payroll(base, "alice", "alice-demo-password", alice_phone)
    check("the device API refuses the blocked user: 403 TRAFFIC_REG_BLOCKED", status == 403 and code == "TRAFFIC_REG_BLOCKED", f"({status} {code})")
    check("bob is not affected", payroll(base, "bob", "bob-demo-password", bob_phone)[0] == 200)
    check("alice's hostile device model shows as text on her user page", HOSTILE_MODEL in driver.find_element(By.ID, f"registration-{alice_hostile}").text
          and no_alert(driver))
    driver.find_element(By.ID, "unblock").click()
    wait_id(driver, "block")
    check("unblocking alice", "Not blocked" in (text_of(driver, "block-state") or ""))
    check("alice is served again", payroll(base, "alice", "alice-demo-password", alice_phone)[0] == 200)

    # A user id with a trailing no-break space is blocked exactly as it is (trimming would eat it).
    driver.get(f"{admin}/console/users?" + urllib.parse.urlencode({"id": "dora\u00a0", "realm": ISSUER}))
    wait_id(driver, "block")
    driver.find_element(By.ID, "block").click()
    wait_id(driver, "unblock")
    status, _, body = call(f"{admin}/admin/v1/users/dora%C2%A0?" + urllib.parse.urlencode({"realm": ISSUER}),
                           headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    check("the console blocks the IdP's 'dora\\u00a0' herself, byte for byte", status == 200 and (json.loads(body).get("block") or {}).get("type") == "all",
          f"({status} {body[:200]!r})")
    status, _, _ = call(f"{base}/sf/odata/v2/User?$format=json", headers={"Authorization": f"Bearer {dora_token}", "X-SMP-APPCID": corp_dora})
    check("… and the device API refuses her", status == 403, f"({status})")
    driver.find_element(By.ID, "unblock").click()
    wait_id(driver, "block")
    status, _, body = call(f"{admin}/admin/v1/users/dora%C2%A0?" + urllib.parse.urlencode({"realm": ISSUER}),
                           headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    check("… and unblocks her", status == 200 and json.loads(body).get("block") is None, f"({status} {body[:200]!r})")

    # A hostile user id searched for stays text.
    driver.get(f"{admin}/console/users?" + urllib.parse.urlencode({"id": "<img src=x onerror=alert(3)>"}))
    wait_id(driver, "problem")
    check("a hostile user id searched for shows as text", "<img src=x onerror=alert(3)>" in (text_of(driver, "problem") or "") and no_alert(driver))

    # Registrations: filter, then wipe bob's with its confirmation step.
    driver.get(f"{admin}/console/registrations")
    wait_id(driver, f"registration-{bob_phone}")
    check("the registrations page lists every registration", all(driver.find_elements(By.ID, f"registration-{cid}")
                                                            for cid in [alice_phone, alice_hostile, bob_phone, carol_phone, corp_alice, corp_dora])
          and len(driver.find_elements(By.CSS_SELECTOR, "table.registrations tbody tr")) == 6)
    check("… a hostile device model as text, no script run", HOSTILE_MODEL in driver.find_element(By.ID, f"registration-{alice_hostile}").text
          and no_alert(driver))
    shot(driver, "console-registrations")
    Select(driver.find_element(By.ID, "filter-app")).select_by_value("corp")
    driver.find_element(By.ID, "filter").click()
    WebDriverWait(driver, 30).until(lambda d: "app=corp" in d.current_url)
    rows = driver.find_elements(By.CSS_SELECTOR, "table.registrations tbody tr")
    check("filtering by app shows that app's registrations only",
          sorted(row.get_attribute("id") for row in rows) == sorted([f"registration-{corp_alice}", f"registration-{corp_dora}"]))
    driver.get(f"{admin}/console/registrations?user=bob")
    driver.find_element(By.CSS_SELECTOR, f"#registration-{bob_phone} a.action-wipe").click()
    wait_id(driver, "confirm")
    check("wiping asks for confirmation first, saying what it does", "cannot be undone" in driver.page_source and "Wipe registration" in driver.title
          or "Wipe registration" in driver.find_element(By.TAG_NAME, "h1").text)
    shot(driver, "console-confirm")
    check("nothing changes before the confirmation", payroll(base, "bob", "bob-demo-password", bob_phone)[0] == 200)
    driver.find_element(By.ID, "confirm").click()
    wait_id(driver, "notice")
    check("after the confirmation bob's registration is wiped", "wiped" in (text_of(driver, "notice") or "")
          and driver.find_element(By.CSS_SELECTOR, f"#registration-{bob_phone} .state-wiped").text == "wiped")
    status, code = payroll(base, "bob", "bob-demo-password", bob_phone)
    check("the device API says TRAFFIC_REG_WIPED to the wiped registration", status == 403 and code == "TRAFFIC_REG_WIPED", f"({status} {code})")

    # The audit shows the console's changes as the admin API's, by admin#1.
    driver.get(f"{admin}/console/audit")
    wait_id(driver, "filter")
    audit_text = driver.find_element(By.CSS_SELECTOR, "table.audit").text
    check("the audit lists the console's changes newest first, by admin#1",
          re.search(r"admin#1 registration\.wipe " + re.escape(bob_phone), audit_text) is not None
          and audit_text.index("registration.wipe") < audit_text.index("user.unblock") < audit_text.index("user.block"), audit_text[:600])
    shot(driver, "console-audit")
    driver.get(f"{admin}/console/audit?user=bob")
    audit_text = driver.find_element(By.CSS_SELECTOR, "table.audit").text
    check("filtering the audit by user shows bob's entries only", "user:bob registration.create" in audit_text and "alice" not in audit_text,
          audit_text[:400])
    status, _, body = call(f"{admin}/admin/v1/audit", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    entries = json.loads(body).get("entries", []) if status == 200 else []
    check("the admin API's audit has the same entries (user.block, user.unblock of alice and dora, registration.wipe by admin#1)",
          [(e["action"], e["target"]) for e in entries if e["actor"] == "admin#1"]
          == [("user.block", "alice"), ("user.unblock", "alice"), ("user.block", f"dora\u00a0@{ISSUER}"), ("user.unblock", f"dora\u00a0@{ISSUER}"),
              ("registration.wipe", bob_phone)], f"({entries})")
    # Client logs and usage reports: what alice's corp device uploaded, its text shown as text.
    corp_headers = {"Authorization": f"Bearer {corp_token}", "X-SMP-APPCID": corp_alice}
    hostile_log = ("#2026-11-25T08:00:00Z#ERROR#corr-9#com.example#Pay.swift:7#<img src=x onerror=alert(4)>#\n"
                   "#2026-11-25T08:00:01Z#INFO####all fine#\n")
    status, _, body = call(f"{base}/mobileservices/application/corp/clientlogs/v1/runtime/log/application/corp", "POST",
                           dict(corp_headers, **{"Content-Type": "application/octet-stream"}), hostile_log.encode())
    check("alice's corp device uploads a client log (204)", status == 204, f"({status} {body[:300]!r})")
    report = {"report": "r-1", "appInfo": {"application": "corp"},
              "sessions": [{"events": [{"time": "2026-11-25T08:00:00Z", "type": "<b>open</b>"}]}]}
    status, _, body = call(f"{base}/mobileservices/application/corp/clientusage/v1/runtime/clientusage/application/corp", "POST",
                           dict(corp_headers, **{"Content-Type": "application/json"}), json.dumps(report).encode())
    check("… and a usage report (204)", status == 204, f"({status} {body[:300]!r})")
    driver.get(f"{admin}/console/client-logs")
    wait_id(driver, "filter")
    rows = driver.find_elements(By.CSS_SELECTOR, "table.client-logs tbody tr")
    check("the Client logs page lists the entries newest first, a hostile message as text, no script run",
          len(rows) == 2 and "all fine" in rows[0].text and "<img src=x onerror=alert(4)>" in rows[1].text and no_alert(driver),
          " | ".join(row.text for row in rows))
    shot(driver, "console-client-logs")
    Select(driver.find_element(By.ID, "filter-level")).select_by_value("ERROR")
    driver.find_element(By.ID, "filter").click()
    WebDriverWait(driver, 30).until(lambda d: "level=ERROR" in d.current_url)
    rows = driver.find_elements(By.CSS_SELECTOR, "table.client-logs tbody tr")
    check("filtering by minimum level ERROR shows the error only", len(rows) == 1 and "Pay.swift:7" in rows[0].text,
          " | ".join(row.text for row in rows))
    driver.get(f"{admin}/console/client-usage")
    wait_id(driver, "filter")
    rows = driver.find_elements(By.CSS_SELECTOR, "table.client-usage tbody tr")
    check("the Usage reports page lists the report, its markup as text", len(rows) == 1 and "<b>open</b>" in rows[0].text and no_alert(driver),
          " | ".join(row.text for row in rows))
    shot(driver, "console-client-usage")
    driver.find_element(By.CSS_SELECTOR, "a.full-report").click()
    wait_id(driver, "report")
    check("Full report shows the whole report as text", '"report":"r-1"' in (text_of(driver, "report") or "").replace(" ", "") and no_alert(driver),
          text_of(driver, "report"))

    driver.get(f"{admin}/console/push")
    wait_id(driver, "filter")
    check("the Push page loads (no app has push here: it says so, no notifications)",
          driver.find_elements(By.ID, "no-push-apps") != [] and driver.find_elements(By.ID, "no-notifications") != [] and no_alert(driver),
          driver.find_element(By.TAG_NAME, "main").text[:300])

    driver.get(f"{admin}/console/destinations")
    destinations_text = driver.find_element(By.TAG_NAME, "table").text
    check("the destinations page shows sf without secrets", "sf" in destinations_text and "OAuth2SAMLBearerAssertion" in destinations_text
          and "BEGIN" not in driver.page_source and "demo-signing.key" not in driver.page_source)
    shot(driver, "console-destinations")

    # Forged posts: no CSRF token, and another site's form.
    console_cookie = driver.get_cookie("midtier_console")["value"]
    status, _, body = call(f"{admin}/console/users/block", "POST",
                           {"Cookie": f"midtier_console={console_cookie}", "Content-Type": "application/x-www-form-urlencoded"},
                           b"id=carol&type=all&reason=forged")
    check("a form post with the session cookie but without the CSRF token is refused (403)", status == 403, f"({status} {body[:200]!r})")
    status, _, body = call(f"{admin}/console/users/block", "POST",
                           {"Cookie": f"midtier_console={console_cookie}", "Content-Type": "application/x-www-form-urlencoded"},
                           b"id=carol&type=all&reason=forged&csrf=" + b"0" * 64)
    check("… and with a wrong one (403)", status == 403, f"({status})")
    # The attacker's page is on another port of the same host: another origin but the same
    # site, so the browser does send the SameSite=Strict cookie; the CSRF token must stop it.
    AttackerPage.target = f"{admin}/console/users/block"
    attacker = socketserver.ThreadingTCPServer(("127.0.0.1", evil_port), AttackerPage)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    driver.get(f"http://localhost:{evil_port}/")
    driver.find_element(By.ID, "go").click()
    WebDriverWait(driver, 30).until(lambda d: f":{aport}/" in d.current_url)
    check("another site's form, submitted in the admin's browser, is refused", "carol" not in (text_of(driver, "notice") or "")
          and payroll(base, "carol", "carol-demo-password", carol_phone)[0] == 200, driver.page_source[:300])
    status, _, body = call(f"{admin}/admin/v1/users/carol", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    check("carol was never blocked", status == 200 and json.loads(body).get("block") is None, f"({status} {body[:200]!r})")

    # Sign-out ends the session, also for a copy of its cookie.
    driver.get(f"{admin}/console/")
    wait_id(driver, "sign-out").click()
    wait_id(driver, "token")
    check("sign-out returns to the sign-in page", "Sign in" in driver.title)
    driver.get(f"{admin}/console/users?id=alice")
    check("after sign-out the console asks to sign in again", "/console/sign-in" in driver.current_url)
    status, headers, _ = call(f"{admin}/console/users?id=alice", headers={"Cookie": f"midtier_console={console_cookie}"})
    check("the old session cookie no longer works", status == 303 and first(headers, "Location") == "/console/sign-in", f"({status})")

    # --- The self-service page. ---
    driver.delete_all_cookies()
    driver.get(f"{base}/mobileservices/me/")
    wait_id(driver, "user")
    shot(driver, "me-sign-in")
    driver.find_element(By.ID, "user").send_keys("alice")
    driver.find_element(By.ID, "password").send_keys("wrong-password")
    driver.find_element(By.ID, "sign-in").click()
    wait_id(driver, "problem")
    check("a wrong password is refused on the page", "not right" in (text_of(driver, "problem") or ""))
    driver.find_element(By.ID, "user").send_keys("alice")
    driver.find_element(By.ID, "password").send_keys("alice-demo-password")
    driver.find_element(By.ID, "sign-in").click()
    wait_id(driver, "who")
    me_cookie = driver.get_cookie("midtier_me")
    check("alice signs in and sees her own devices only", driver.find_elements(By.ID, f"device-{alice_phone}")
          and driver.find_elements(By.ID, f"device-{alice_hostile}") and not driver.find_elements(By.ID, f"device-{bob_phone}")
          and not driver.find_elements(By.ID, f"device-{carol_phone}") and not driver.find_elements(By.ID, f"device-{corp_alice}"),
          driver.page_source[:800])
    check("… the IdP's alice's device is not hers either (another realm)", corp_alice not in driver.page_source)
    check("her hostile device model shows as text", HOSTILE_MODEL in driver.find_element(By.ID, f"device-{alice_hostile}").text and no_alert(driver))
    check("the session cookie is HttpOnly, SameSite=Strict, for /mobileservices/me/ only",
          me_cookie is not None and me_cookie.get("httpOnly") and me_cookie.get("sameSite") == "Strict"
          and me_cookie.get("path") == "/mobileservices/me/", f"({me_cookie})")
    shot(driver, "me-devices")

    driver.get(f"{base}/mobileservices/me/confirm?id={carol_phone}&action=lock")
    check("carol's device cannot be reached from alice's session (not found)", "not one of yours" in (text_of(driver, "problem") or ""))
    driver.get(f"{base}/mobileservices/me/")
    csrf = driver.find_element(By.CSS_SELECTOR, "form.sign-out input[name=csrf]").get_attribute("value")
    status, _, _ = call(f"{base}/mobileservices/me/lock", "POST",
                        {"Cookie": f"midtier_me={me_cookie['value']}", "Content-Type": "application/x-www-form-urlencoded"},
                        f"id={carol_phone}&csrf={csrf}".encode())
    check("posting a lock of carol's device with alice's valid session and token: 404", status == 404)
    check("carol is still served", payroll(base, "carol", "carol-demo-password", carol_phone)[0] == 200)
    status, _, _ = call(f"{base}/mobileservices/me/lock", "POST",
                        {"Cookie": f"midtier_me={me_cookie['value']}", "Content-Type": "application/x-www-form-urlencoded"},
                        f"id={alice_phone}".encode())
    check("a forged lock without the CSRF token is refused (403)", status == 403)

    driver.find_element(By.CSS_SELECTOR, f"#device-{alice_phone} a.action-lock").click()
    wait_id(driver, "confirm")
    shot(driver, "me-confirm")
    driver.find_element(By.ID, "confirm").click()
    wait_id(driver, "notice")
    check("alice locks her own phone", "locked" in (text_of(driver, "notice") or "")
          and driver.find_element(By.CSS_SELECTOR, f"#device-{alice_phone} .state-locked").text == "locked")
    status, code = payroll(base, "alice", "alice-demo-password", alice_phone)
    check("the device API refuses the locked phone: 403 TRAFFIC_REG_LOCKED", status == 403 and code == "TRAFFIC_REG_LOCKED", f"({status} {code})")
    check("her other device still works", payroll(base, "alice", "alice-demo-password", alice_hostile)[0] == 200)
    status, _, body = call(f"{admin}/admin/v1/audit", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    entries = json.loads(body).get("entries", []) if status == 200 else []
    check("the lock is audited as alice's own", any(e["actor"] == "user:alice" and e["action"] == "registration.lock" and e["target"] == alice_phone
                                                    for e in entries), f"({entries[-3:]})")
    wait_id(driver, "sign-out").click()
    wait_id(driver, "user")
    status, headers, _ = call(f"{base}/mobileservices/me/", headers={"Cookie": f"midtier_me={me_cookie['value']}"})
    check("after sign-out the old self-service cookie shows the sign-in form", status == 200 and first(headers, "Set-Cookie") is not None
          and "midtier_me_sign_in" in (first(headers, "Set-Cookie") or ""))

    # A JWT user signs in by pasting the IdP's token: the IdP's alice, not users.json's alice.
    driver.get(f"{base}/mobileservices/me/")
    driver.find_element(By.TAG_NAME, "summary").click()
    driver.find_element(By.ID, "bearer").send_keys(corp_token)
    driver.find_element(By.ID, "sign-in-token").click()
    wait_id(driver, "who")
    check("the IdP's alice signs in with her token and sees her own device only", driver.find_elements(By.ID, f"device-{corp_alice}")
          and not driver.find_elements(By.ID, f"device-{alice_phone}") and ISSUER in text_of(driver, "who"), driver.page_source[:600])
    check("the token is not in the page", corp_token not in driver.page_source)
    wait_id(driver, "sign-out").click()

    # A session opened with a token ends when the token does (not 8 hours later).
    # Long enough to sign in on a loaded machine; the page is asked again once it has passed.
    short_exp = int(time.time()) + 10
    short_token = jwt(key, {"iss": ISSUER, "aud": "midtier", "sub": "alice", "exp": short_exp, "iat": int(time.time())})
    driver.get(f"{base}/mobileservices/me/")
    driver.find_element(By.TAG_NAME, "summary").click()
    driver.find_element(By.ID, "bearer").send_keys(short_token)
    driver.find_element(By.ID, "sign-in-token").click()
    wait_id(driver, "who")
    check("… and the session works before the token expires", driver.find_elements(By.ID, f"device-{corp_alice}"))
    time.sleep(max(0.0, short_exp + 1 - time.time()))
    driver.get(f"{base}/mobileservices/me/")
    check("a session opened with a token ends when the token expires", driver.find_elements(By.ID, "sign-in")
          and not driver.find_elements(By.ID, "who"))

    # Failed sign-ins are throttled as API sign-ins are (5 free failures per user name).
    statuses = []
    for _ in range(7):
        status, headers, body = call(f"{base}/mobileservices/me/", headers={})
        token = re.search(rb'name="csrf" value="([0-9a-f]{64})"', body).group(1).decode()
        status, headers, _ = call(f"{base}/mobileservices/me/sign-in", "POST",
                                  {"Cookie": f"midtier_me_sign_in={token}", "Content-Type": "application/x-www-form-urlencoded"},
                                  f"csrf={token}&user=carol&password=guess".encode())
        statuses.append(status)
        if status == 429:
            break
    check("failed page sign-ins for one name are throttled (429 with Retry-After)", statuses[-1] == 429 and statuses[0] == 401, f"({statuses})")
    status, _, _ = call(f"{base}/mobileservices/me/sign-in", "POST", {"Content-Type": "application/x-www-form-urlencoded"},
                        b"csrf=" + b"1" * 64 + b"&user=alice&password=alice-demo-password")
    check("a sign-in post without the form's cookie is refused (403)", status == 403)

    check("no admin token, password or session cookie in the server's log",
          not any(secret.encode() in open(log_path, "rb").read() for secret in
                  [ADMIN_TOKEN, "alice-demo-password", console_cookie, me_cookie["value"], corp_token]))
except Exception as error:  # a broken Midtier or browser is reported, not a crash
    import traceback
    traceback.print_exc()
    check("the browser test ran to its end", False, repr(error))
finally:
    if driver is not None:
        driver.quit()
    if attacker is not None:
        attacker.shutdown()
    kill_all(processes)
    check.finish()
