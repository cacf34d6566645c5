#!/usr/bin/env python3
"""Principal propagation through the real `midtier` binary: destinations of type
`PrincipalPropagation`, for which Midtier issues each signed-in user a short-lived X.509
certificate signed by an operator CA, as SAP Cloud Connector does.

Every key and certificate is made here with the `openssl` command: a server CA and the back
ends' certificate for 127.0.0.1, a "system" client CA and Midtier's system certificate (a PEM
file with certificate and key, and a .p12 with a password), the principal-propagation CA
(RSA 2048; its key also encrypted, for a destination with `caKeyPassphrase`), and a device's
own certificate carrying another user's subject.

Stand-ins:
- nginx as the ABAP ICM (`principalPropagationMode` header): TLS with `ssl_verify_client on`
  against the system CA, `proxy_pass` to a plain-HTTP Python back end with
  `proxy_set_header SSL_CLIENT_CERT $http_ssl_client_cert`. The back end decodes the header
  (base64 of the DER), checks it with `openssl verify -CAfile <PP CA> -purpose sslclient`,
  reads its subject with `openssl x509 -nameopt RFC2253`, answers
  `{"verified": …, "subject": …}` and records every request's headers.
- A Python `ssl` server (mutualTLS mode) with CERT_REQUIRED against the PP CA, answering the
  subject of the certificate the peer presented.
- The same server requiring the system CA instead, as a header-mode back end without nginx
  (which keeps one SSL_CLIENT_CERT of several): it records every header as Midtier sent it.

Checks: check-config accepts the configuration and names file and key for each broken
variant; alice and bob each get their own verified subject (header mode, a .p12 system
certificate with the default pattern and `userIdSource`, ${login_name}/${mail}, mutualTLS),
never the other's, also under concurrent calls, with the certificate cached between calls,
and the subject reading back (RFC 2253) as the pattern is written; certificate headers a
device sends never reach a back end (the stand-ins are shown to pass them on); nginx refuses
a caller without the system certificate; a user without the attribute the pattern needs gets
403; a blocked user's next call is 403 and reaches no back end; the log holds no private key.

Usage: principal_propagation.py PATH-TO-MIDTIER. Prints
`principal-propagation: N passed, M failed`; exits 1 on failure. Standard library plus the
`openssl`, `nginx` and `curl` commands; every process is killed at the end.
"""
import base64, hashlib, http.client, http.server, json, os, re, shutil, signal, socketserver, ssl, subprocess, sys, tempfile
import threading, time
from concurrent.futures import ThreadPoolExecutor
from harness import Checks, basic, call, demo_config, free_port, hash_secret, kill_all, wait_for, write_json
from pki import PKI, openssl, pem_body

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ADMIN_TOKEN = "pp-admin-" + os.urandom(12).hex()
P12_PASSWORD = "pp-p12-" + os.urandom(8).hex()
CA_PASSPHRASE = "pp-ca-" + os.urandom(8).hex()
DAVE_PASSWORD = "dave-" + os.urandom(8).hex() + "-pw1"
PATTERN = "CN=${name},OU=Mobile,O=Example,C=DE"
CERT_HEADERS = ("ssl_client_cert", "ssl-client-cert", "client-cert")
processes = []
check = Checks("principal-propagation")


# --- Keys and certificates ------------------------------------------------------------------

class Keys(PKI):
    """Every key and certificate of the test, in `folder`."""

    def __init__(self, folder):
        super().__init__(folder)
        self.server_ca, self.server_ca_key = self.ca("server-ca", "/CN=Back-end Server CA/O=Example")
        self.server, self.server_key = self.leaf("server", "/CN=127.0.0.1", self.server_ca, self.server_ca_key, "server")
        self.system_ca, self.system_ca_key = self.ca("system-ca", "/CN=Midtier System CA/O=Example")
        self.system, self.system_key = self.leaf("system", "/CN=midtier-system/O=Example", self.system_ca, self.system_ca_key, "client")
        self.system_pem = self.path("system-keystore.pem")
        open(self.system_pem, "w").write(open(self.system).read() + open(self.system_key).read())
        self.system_p12 = self.path("system-keystore.p12")
        openssl("pkcs12", "-export", "-in", self.system, "-inkey", self.system_key, "-name", "midtier", "-out", self.system_p12,
                "-passout", "pass:" + P12_PASSWORD)
        self.pp_ca, self.pp_ca_key = self.ca("pp-ca", "/CN=Midtier Principal Propagation CA/O=Example")
        self.pp_ca_key_encrypted = self.path("pp-ca-encrypted.key")
        openssl("pkey", "-in", self.pp_ca_key, "-aes256", "-passout", "pass:" + CA_PASSPHRASE, "-out", self.pp_ca_key_encrypted)
        # The device's own: a CA it made and a certificate with bob's subject.
        self.device_ca, self.device_ca_key = self.ca("device-ca", "/CN=Midtier Principal Propagation CA/O=Example")
        self.forge("CN=bob,OU=Mobile,O=Example,C=DE")

    def forge(self, subject):
        """The device's certificate with `subject` (RFC 2253: the last RDN first), from its own CA."""
        rdns = "".join("/" + rdn for rdn in reversed(subject.split(",")))
        self.forged, self.forged_key = self.leaf("forged", rdns, self.device_ca, self.device_ca_key, "client")
        self.forged_der = openssl("x509", "-in", self.forged, "-outform", "DER").stdout




# --- The ICM stand-in's back end and the direct mutual-TLS server ----------------------------

class Records:
    lock = threading.Lock()
    icm = []        # per request reaching the ICM back end: path, headers, verified, subject, der
    direct = []     # per request reaching the mutual-TLS server: path, headers, subject, der
    raw = []        # per request reaching the raw header-mode server (no nginx in between): the same
    verified = {}   # sha256 of a DER -> what openssl said (cache)


def inspect_certificate(value, work, ca):
    """What `openssl` says of an SSL_CLIENT_CERT value: base64 of a DER certificate, one line."""
    result = {"verified": False, "subject": None, "der": None, "one_line": bool(re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", value or "")),
              "notBefore": None, "notAfter": None, "issuer": None}
    if not value:
        return result
    try:
        der = base64.b64decode(value, validate=True)
    except Exception:
        return result
    result["der"] = der
    digest = hashlib.sha256(der).hexdigest()
    with Records.lock:
        cached = Records.verified.get(digest)
    if cached:
        return dict(result, **cached)
    der_path, pem_path = os.path.join(work, f"in-{digest}.der"), os.path.join(work, f"in-{digest}.pem")
    open(der_path, "wb").write(der)
    converted = subprocess.run(["openssl", "x509", "-inform", "DER", "-in", der_path, "-out", pem_path], capture_output=True)
    if converted.returncode != 0:
        return result
    verify = subprocess.run(["openssl", "verify", "-CAfile", ca, "-purpose", "sslclient", pem_path], capture_output=True, text=True)
    shown = subprocess.run(["openssl", "x509", "-in", pem_path, "-noout", "-subject", "-issuer", "-startdate", "-enddate",
                            "-nameopt", "RFC2253"], capture_output=True, text=True).stdout
    fields = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    found = {"verified": verify.returncode == 0 and verify.stdout.strip().endswith(": OK"), "subject": fields.get("subject", "").strip(),
             "issuer": fields.get("issuer", "").strip(), "notBefore": ssl.cert_time_to_seconds(fields["notBefore"].strip()),
             "notAfter": ssl.cert_time_to_seconds(fields["notAfter"].strip()), "verify_output": (verify.stdout + verify.stderr).strip()}
    with Records.lock:
        Records.verified[digest] = found
    return dict(result, **found)


def make_icm_backend(work, ca):
    class ICMBackend(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            value = self.headers.get("SSL_CLIENT_CERT")
            seen = inspect_certificate(value, work, ca)
            record = {"path": self.path, "headers": list(self.headers.items()), "value": value, **seen}
            with Records.lock:
                Records.icm.append(record)
            body = json.dumps({"verified": seen["verified"], "subject": seen["subject"],
                               "system": self.headers.get("X-Verified-System-DN")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return ICMBackend


SHORT_NAMES = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "countryName": "C",
               "localityName": "L", "stateOrProvinceName": "ST", "emailAddress": "emailAddress"}


def rfc2253(subject):
    """getpeercert()'s subject (RDNs in DER order) written as RFC 2253 does: the last RDN first."""
    return ",".join("+".join(f"{SHORT_NAMES.get(k, k)}={v}" for k, v in rdn) for rdn in reversed(subject))


class DirectTLS(http.server.BaseHTTPRequestHandler):
    """Answers the subject of the peer's certificate; records each request in `records`."""
    protocol_version = "HTTP/1.1"
    records = Records.direct

    def do_GET(self):
        peer = self.connection.getpeercert() or {}
        der = self.connection.getpeercert(binary_form=True)
        subject = rfc2253(peer.get("subject", ()))
        with Records.lock:
            self.records.append({"path": self.path, "headers": list(self.headers.items()), "subject": subject, "der": der,
                                   "connection": id(self.connection)})
        body = json.dumps({"subject": subject}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class RawTLS(DirectTLS):
    """A header-mode back end without nginx: every header exactly as Midtier sent it."""
    records = Records.raw


def tls_server(port, handler, keys, client_ca):
    """A threading HTTPS server on `port` requiring a client certificate of `client_ca`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(keys.server, keys.server_key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(client_ca)
    server = ThreadingServer(("127.0.0.1", port), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


NGINX_CONF = """\
{user}worker_processes 1;
error_log {work}/nginx-error.log;
pid {work}/nginx.pid;
events {{ worker_connections 128; }}
http {{
    access_log {work}/nginx-access.log;
    client_body_temp_path {work}/nginx-body;
    proxy_temp_path {work}/nginx-proxy;
    fastcgi_temp_path {work}/nginx-fastcgi;
    uwsgi_temp_path {work}/nginx-uwsgi;
    scgi_temp_path {work}/nginx-scgi;
    underscores_in_headers on;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {server};
        ssl_certificate_key {server_key};
        ssl_verify_client on;
        ssl_client_certificate {system_ca};
        location / {{
            proxy_pass http://127.0.0.1:{backend};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header SSL_CLIENT_CERT $http_ssl_client_cert;
            proxy_set_header X-Verified-System-DN $ssl_client_s_dn;
        }}
    }}
}}
"""


# --- The device side --------------------------------------------------------------------------

def check_config(config):
    result = subprocess.run([BIN, "check-config", "--config", config], cwd=REPO, capture_output=True, text=True, timeout=60)
    return result.returncode, result.stdout + result.stderr


def same_subject(seen, wanted):
    """Whether two RFC 2253 subjects have the same RDNs, in whatever order (the order has its
    own checks)."""
    return bool(seen) and sorted(seen.split(",")) == sorted(wanted.split(","))


def find_private_keys(text):
    """Base64 runs of `text` (at least 100 characters) that decode to a DER private key
    (`openssl pkey -inform DER` reads them), as (offset, run prefix)."""
    found = []
    for match in re.finditer(r"[A-Za-z0-9+/]{100,}={0,2}", text):
        run = match.group(0)
        for start in range(4):   # a run may begin mid-quantum when glued to other base64 text
            chunk = run[start:]
            chunk = chunk[:len(chunk) - len(chunk) % 4]
            try:
                der = base64.b64decode(chunk)
            except Exception:
                continue
            # A DER SEQUENCE near its start (a private key is one: 30 82 …, 30 81 …, 30 77 …).
            for offset in [i for i in range(min(len(der), 64)) if der[i] == 0x30]:
                probe = subprocess.run(["openssl", "pkey", "-inform", "DER", "-noout"], input=der[offset:], capture_output=True)
                if probe.returncode == 0:
                    found.append((match.start(), run[:40]))
                    break
            else:
                continue
            break
    return found


work = tempfile.mkdtemp(prefix="midtier-pp-")
servers = []
started = time.monotonic()
try:
    keys = Keys(work)

    # --- Stand-ins ---
    backend_port, nginx_port, direct_port, raw_port = free_port(), free_port(), free_port(), free_port()
    backend = ThreadingServer(("127.0.0.1", backend_port), make_icm_backend(work, keys.pp_ca))
    servers.append(backend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()

    servers.append(tls_server(direct_port, DirectTLS, keys, keys.pp_ca))
    servers.append(tls_server(raw_port, RawTLS, keys, keys.system_ca))

    nginx_conf = os.path.join(work, "nginx.conf")
    open(nginx_conf, "w").write(NGINX_CONF.format(
        user="user root;\n" if os.geteuid() == 0 else "", work=work, port=nginx_port, server=keys.server, server_key=keys.server_key,
        system_ca=keys.system_ca, backend=backend_port))
    nginx_log = open(os.path.join(work, "nginx-stderr.log"), "wb")
    nginx = subprocess.Popen(["nginx", "-p", work, "-c", nginx_conf, "-e", os.path.join(work, "nginx-error.log"), "-g", "daemon off;"],
                             stdout=nginx_log, stderr=nginx_log)
    processes.append(nginx)

    # --- Configuration ---
    mport, aport = free_port(), free_port()
    config = demo_config(REPO, work, mport, aport, adminTokenHashes=[hash_secret(BIN, ADMIN_TOKEN)], logLevel="debug")
    users_file = os.path.join(config, "users.json")
    users = json.load(open(users_file))
    for user in users["users"]:
        if user["id"] in ("alice", "bob"):
            user["attributes"]["mail"] = f"{user['id']}@example.com"
    # A user of this test: no mail attribute.
    users["users"].append({"id": "dave", "passwordHash": hash_secret(BIN, DAVE_PASSWORD), "attributes": {"sfUserId": "100004"}})
    write_json(users_file, users)
    destinations = os.path.join(config, "destinations")
    secrets_dir = os.path.join(work, "secrets")
    os.mkdir(secrets_dir)
    p12_password_file = os.path.join(secrets_dir, "p12-password")
    open(p12_password_file, "w").write(P12_PASSWORD + "\n")
    passphrase_file = os.path.join(secrets_dir, "ca-passphrase")
    open(passphrase_file, "w").write(CA_PASSPHRASE + "\n")
    gateway = f"https://127.0.0.1:{nginx_port}/sap/opu/odata/sap"
    gw = {"Name": "gw", "URL": gateway, "Authentication": "PrincipalPropagation", "ProxyType": "OnPremise",
          "principalPropagationMode": "header", "subjectPattern": PATTERN, "certificateValidityMinutes": 10,
          "caCertificate": keys.pp_ca, "caKey": keys.pp_ca_key, "KeyStoreLocation": keys.system_pem,
          "trustedCertificates": keys.server_ca, "timeout": 10000}
    gwp12 = {"Name": "gwp12", "URL": gateway, "Authentication": "PrincipalPropagation", "ProxyType": "OnPremise",
             "caCertificate": keys.pp_ca, "caKey": keys.pp_ca_key, "KeyStoreLocation": keys.system_p12,
             "KeyStorePassword": {"file": p12_password_file}, "trustedCertificates": keys.server_ca, "userIdSource": "sfUserId",
             "timeout": 10000}
    gwmail = dict(gw, Name="gwmail", subjectPattern="CN=${login_name},OU=${mail},O=Example")
    mtls = {"Name": "mtls", "URL": f"https://127.0.0.1:{direct_port}/direct", "Authentication": "PrincipalPropagation",
            "ProxyType": "OnPremise", "principalPropagationMode": "mutualTLS", "subjectPattern": PATTERN,
            "certificateValidityMinutes": 10, "caCertificate": keys.pp_ca, "caKey": keys.pp_ca_key_encrypted,
            "caKeyPassphrase": {"file": passphrase_file}, "trustedCertificates": keys.server_ca, "timeout": 10000}
    gwraw = dict(gw, Name="gwraw", URL=f"https://127.0.0.1:{raw_port}/raw")
    for destination in (gw, gwp12, gwmail, mtls, gwraw):
        write_json(os.path.join(destinations, destination["Name"] + ".json"), destination)
    app_file = os.path.join(config, "apps", "demo.json")
    app = json.load(open(app_file))
    app["destinations"] = ["sf", "gw", "gwp12", "gwmail", "mtls", "gwraw"]
    write_json(app_file, app)

    # --- 1. check-config ---
    status, output = check_config(config)
    check("check-config accepts the configuration (header, .p12 system certificate, mutualTLS with an encrypted CA key)",
          status == 0, f"({status} {output[-800:]})")

    def broken(label, name, change, keys_named):
        variant = os.path.join(work, "config-" + re.sub(r"\W+", "-", label))
        shutil.copytree(config, variant)
        path = os.path.join(variant, "destinations", name + ".json")
        destination = json.load(open(path))
        change(destination)
        write_json(path, destination)
        status, output = check_config(variant)
        lines = [line for line in output.splitlines() if f"destinations/{name}.json: " in line]
        named = [line for line in lines if any(f"{name}.json: {key}" in line for key in keys_named)]
        check(f"check-config refuses {label}, naming {name}.json and {' or '.join(keys_named)}", status != 0 and named,
              f"({status} {output[-600:]!r})")
        return output

    wrong_passphrase = os.path.join(secrets_dir, "wrong-passphrase")
    open(wrong_passphrase, "w").write("not-the-passphrase\n")
    wrong_p12 = os.path.join(secrets_dir, "wrong-p12-password")
    open(wrong_p12, "w").write("not-the-password\n")
    broken("a wrong caKey passphrase", "mtls", lambda d: d.update(caKeyPassphrase={"file": wrong_passphrase}),
           ("caKeyPassphrase", "caKey"))
    broken("an encrypted caKey without caKeyPassphrase", "mtls", lambda d: d.pop("caKeyPassphrase"), ("caKey",))
    broken("a missing caCertificate", "gw", lambda d: d.pop("caCertificate"), ("caCertificate",))
    broken("a caCertificate file that does not exist", "gw", lambda d: d.update(caCertificate=os.path.join(work, "nope.pem")),
           ("caCertificate",))
    broken("the subjectPattern CN=${}", "gw", lambda d: d.update(subjectPattern="CN=${}"), ("subjectPattern",))
    broken("the subjectPattern XX=foo", "gw", lambda d: d.update(subjectPattern="XX=foo"), ("subjectPattern",))
    broken("a .p12 KeyStoreLocation with a wrong KeyStorePassword", "gwp12", lambda d: d.update(KeyStorePassword={"file": wrong_p12}),
           ("KeyStorePassword", "KeyStoreLocation"))
    broken("an http:// URL", "gw", lambda d: d.update(URL=f"http://127.0.0.1:{backend_port}/sap/opu/odata/sap"), ("URL",))
    broken("header mode without KeyStoreLocation", "gw", lambda d: d.pop("KeyStoreLocation"), ("KeyStoreLocation",))

    # `midtier user-certificate`: a sample certificate for the back end's rules (CERTRULE).
    sample = subprocess.run([BIN, "user-certificate", "--config", config, "--destination", "gw", "--user", "alice"],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    sample_path = os.path.join(work, "sample.pem")
    open(sample_path, "w").write(sample.stdout)
    verified = openssl("verify", "-CAfile", keys.pp_ca, "-purpose", "sslclient", sample_path)
    shown = openssl("x509", "-in", sample_path, "-noout", "-subject", "-nameopt", "RFC2253").stdout.decode()
    check("midtier user-certificate prints alice's certificate as gw would make it (verifies, subject as written, no key)",
          sample.returncode == 0 and verified.returncode == 0 and "subject=CN=alice,OU=Mobile,O=Example,C=DE" in shown
          and "PRIVATE KEY" not in sample.stdout + sample.stderr, f"({sample.returncode} {sample.stderr[-300:]} {shown})")
    header_value = subprocess.run([BIN, "user-certificate", "--config", config, "--destination", "gw", "--user", "alice", "--header"],
                                  cwd=REPO, capture_output=True, text=True, timeout=60).stdout.strip()
    check("midtier user-certificate --header prints one line of base64 DER",
          "\n" not in header_value and base64.b64decode(header_value or "A===", validate=False)[:1] == b"\x30", header_value[:60])
    nobody = subprocess.run([BIN, "user-certificate", "--config", config, "--destination", "gw", "--user", "nobody"],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    check("midtier user-certificate names an unknown user", nobody.returncode != 0 and "nobody" in nobody.stderr, nobody.stderr[-200:])

    # --- 2. nginx trusts only Midtier's system certificate ---
    nginx_up = False
    deadline = time.time() + 10
    while time.time() < deadline and not nginx_up and nginx.poll() is None:
        probe = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", keys.server_ca,
                                f"https://127.0.0.1:{nginx_port}/ping"], capture_output=True, text=True)
        nginx_up = probe.stdout not in ("", "000")
        time.sleep(0.05)
    check("nginx (the ICM stand-in) starts", nginx_up and nginx.poll() is None,
          open(os.path.join(work, "nginx-error.log"), "rb").read()[-800:].decode(errors="replace") if os.path.exists(os.path.join(work, "nginx-error.log")) else "")

    def curl_nginx(*args):
        result = subprocess.run(["curl", "-s", "-o", os.path.join(work, "curl.out"), "-w", "%{http_code}", "--cacert", keys.server_ca,
                                 "--noproxy", "*", *args, f"https://127.0.0.1:{nginx_port}/sap/opu/odata/sap/direct"],
                                capture_output=True, text=True, timeout=20)
        return result.stdout.strip()

    forged_b64 = base64.b64encode(keys.forged_der).decode()
    before = len(Records.icm)
    code = curl_nginx("-H", f"SSL_CLIENT_CERT: {forged_b64}")
    check("nginx refuses a caller without the system certificate: 400, nothing reaches the back end",
          code == "400" and len(Records.icm) == before, f"({code}, {len(Records.icm) - before} requests)")
    code = curl_nginx("--cert", keys.forged, "--key", keys.forged_key, "-H", f"SSL_CLIENT_CERT: {forged_b64}")
    check("nginx refuses a client certificate of another CA (the device's own): 400", code == "400" and len(Records.icm) == before,
          f"({code})")
    code = curl_nginx("--cert", keys.system, "--key", keys.system_key)
    check("nginx lets the system certificate through to the back end (the stand-in works)", code == "200" and len(Records.icm) == before + 1,
          f"({code})")

    # --- 3. Midtier, onboarding ---
    log_path = os.path.join(work, "midtier.log")
    log = open(log_path, "wb")
    midtier = subprocess.Popen([BIN, "serve", "--config", config], cwd=REPO, stdout=log, stderr=log)
    processes.append(midtier)
    ready = wait_for(f"http://127.0.0.1:{mport}/healthz")
    check("midtier starts with the principal-propagation destinations", ready and midtier.poll() is None,
          open(log_path, "rb").read()[-1500:].decode(errors="replace"))

    AUTH = {"alice": basic("alice", "alice-demo-password"), "bob": basic("bob", "bob-demo-password"), "dave": basic("dave", DAVE_PASSWORD)}
    cids = {}
    for user in ("alice", "bob", "dave"):
        status, headers, body = call(mport, "POST", "/odata/applications/v1/demo/Connections",
                                     [("Authorization", AUTH[user]), ("Content-Type", "application/json")], b'{"DeviceType":"iPhone"}')
        cids[user] = headers.get("x-smp-appcid")
        check(f"{user} onboards: 201", status == 201 and cids[user], f"({status} {body[:300]!r})")

    def device(user, path, extra=()):
        status, headers, body = call(mport, "GET", path, [("Authorization", AUTH[user]), ("X-SMP-APPCID", cids[user] or ""), *extra])
        try:
            answer = json.loads(body) if status == 200 else {}
        except ValueError:
            answer = {}
        return status, headers, body, answer

    expected = {user: f"CN={user},OU=Mobile,O=Example,C=DE" for user in ("alice", "bob")}
    system_subject = openssl("x509", "-in", keys.system, "-noout", "-subject", "-nameopt", "RFC2253").stdout.decode().split("=", 1)[1].strip()
    pp_ca_subject = openssl("x509", "-in", keys.pp_ca, "-noout", "-subject", "-nameopt", "RFC2253").stdout.decode().split("=", 1)[1].strip()

    # --- 4. Header mode: each user their own certificate ---
    seen = {"alice": [], "bob": []}
    for round_ in range(3):
        for user in ("alice", "bob"):
            before = len(Records.icm)
            status, _, body, answer = device(user, f"/gw/ZSALES_SRV/Orders?round={round_}&who={user}")
            record = Records.icm[before] if len(Records.icm) == before + 1 else None
            seen[user].append((status, answer, record, body))
    for user, other in (("alice", "bob"), ("bob", "alice")):
        calls = seen[user]
        first = calls[0]
        check(f"header mode: {user}'s call reaches the back end (200) as {user} ({expected[user]}), verified against the PP CA",
              first[0] == 200 and first[1].get("verified") is True and same_subject(first[1].get("subject"), expected[user]),
              f"({first[0]} {first[3][:400]!r}; the back end: {first[2] and {k: first[2][k] for k in ('subject', 'issuer', 'verified', 'verify_output') if k in first[2]}})")
        check(f"header mode: {user}'s 3 calls all verified as {user}, never as {other}",
              all(s == 200 and a.get("verified") is True and same_subject(a.get("subject"), expected[user]) for s, a, _, _ in calls)
              and not any(same_subject((r or {}).get("subject"), expected[other]) for _, _, r, _ in calls),
              f"({[(s, a.get('subject')) for s, a, _, _ in calls]})")
        records = [r for _, _, r, _ in calls if r]
        check(f"header mode: the path reached the back end under the destination's URL path ({user})",
              len(records) == 3 and all(r["path"].startswith(f"/sap/opu/odata/sap/ZSALES_SRV/Orders?round=") for r in records),
              f"({[r['path'] for r in records]})")
        check(f"header mode: SSL_CLIENT_CERT is one line of base64 of a DER certificate issued by the PP CA ({user})",
              records and all(r["one_line"] and r["der"] and r.get("issuer") == pp_ca_subject for r in records),
              f"({[(r['one_line'], bool(r['der']), r.get('issuer')) for r in records]})")
        check(f"header mode: nginx saw Midtier's system certificate ({system_subject}) on {user}'s calls",
              all(a.get("system") == system_subject for _, a, _, _ in calls), f"({[a.get('system') for _, a, _, _ in calls]})")
        ders = {r["der"] for r in records if r["der"]}
        check(f"header mode: {user}'s certificate is cached (one certificate for 3 calls)", len(ders) == 1, f"({len(ders)} certificates)")
        lifetimes = [(r["notAfter"] - r["notBefore"], r["notAfter"] - time.time()) for r in records if r.get("notAfter")]
        check(f"header mode: {user}'s certificate is short-lived (certificateValidityMinutes 10)",
              lifetimes and all(0 < left <= 600 + 60 and span <= 600 + 600 for span, left in lifetimes), f"({lifetimes})")
    # The pattern is a distinguished name as RFC 4514 (LDAP, Java's X500Principal, SAP Cloud
    # Connector's subject pattern) writes it: its first RDN (CN) is the last in the certificate,
    # so that `openssl -nameopt RFC2253` and an ABAP certificate rule read back the pattern.
    first = seen["alice"][0]
    check(f"header mode: the certificate's subject reads back as the pattern in RFC 2253: {expected['alice']}",
          first[1].get("subject") == expected["alice"], f"(the back end's openssl -nameopt RFC2253 reads {first[1].get('subject')!r})")
    alice_der = {r["der"] for _, _, r, _ in seen["alice"] if r}
    bob_der = {r["der"] for _, _, r, _ in seen["bob"] if r}
    check("header mode: alice and bob have different certificates", alice_der and bob_der and not (alice_der & bob_der))

    # Concurrent calls of both users: no certificate crosses users.
    def burst(destination, n=24):
        jobs = [("alice" if i % 2 == 0 else "bob", i) for i in range(n)]
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda job: (job[0], device(job[0], f"/{destination}/burst?i={job[1]}&who={job[0]}")), jobs))
        wrong = [(user, status, answer.get("subject")) for user, (status, _, _, answer) in results
                 if status != 200 or not same_subject(answer.get("subject"), expected[user])]
        return len(jobs), wrong

    total, wrong = burst("gw")
    burst_records = [r for r in Records.icm if "/burst?" in r["path"]]
    crossed = [r["path"] for r in burst_records if f"who={'alice' if 'CN=bob' in (r['subject'] or '') else 'bob'}" in r["path"]]
    check(f"header mode: {total} concurrent calls of alice and bob each carry the caller's own verified certificate",
          not wrong and len(burst_records) == total and all(r["verified"] for r in burst_records) and not crossed,
          f"({wrong[:4]}, {len(burst_records)} at the back end, crossed {crossed[:4]})")

    # --- 5. The .p12 system certificate, the default pattern with userIdSource; ${login_name} and ${mail} ---
    status, _, body, answer = device("alice", "/gwp12/ZSALES_SRV/Orders")
    check("a .p12 KeyStoreLocation: alice's call is verified, with the default pattern CN=${name} and userIdSource sfUserId: CN=100001",
          status == 200 and answer.get("verified") is True and answer.get("subject") == "CN=100001" and answer.get("system") == system_subject,
          f"({status} {body[:400]!r})")
    status, _, body, answer = device("bob", "/gwmail/ZSALES_SRV/Orders")
    check("${login_name} and ${mail}: bob's certificate has CN=bob, OU=bob@example.com, O=Example",
          status == 200 and answer.get("verified") is True and same_subject(answer.get("subject"), "CN=bob,OU=bob@example.com,O=Example"),
          f"({status} {body[:400]!r})")
    check("... and reads back in RFC 2253 as the pattern: CN=bob,OU=bob@example.com,O=Example",
          answer.get("subject") == "CN=bob,OU=bob@example.com,O=Example", f"(the back end reads {answer.get('subject')!r})")

    # --- 6. A user without the attribute the pattern needs ---
    before = len(Records.icm)
    status, headers, body, _ = device("dave", "/gwmail/ZSALES_SRV/Orders")
    text = body.decode(errors="replace")
    check("a user without the mail attribute ${mail} needs: 403 naming ${mail}, nothing reaches the back end",
          status == 403 and "${mail}" in text and len(Records.icm) == before, f"({status} {text[:400]!r}, {len(Records.icm) - before} requests)")
    status, _, body, answer = device("dave", "/gw/ZSALES_SRV/Orders")
    check("... while dave's call on a destination whose pattern he satisfies works (CN=dave)",
          status == 200 and same_subject(answer.get("subject"), "CN=dave,OU=Mobile,O=Example,C=DE") and answer.get("verified") is True,
          f"({status} {body[:300]!r})")

    # --- 7. Certificate headers from the device never reach the back end ---
    # The device's certificate has exactly the subject Midtier gave bob (same RDNs, same order).
    bob_subject = next((r["subject"] for _, _, r, _ in seen["bob"] if r and r["subject"]), expected["bob"])
    keys.forge(bob_subject)
    forged_b64 = base64.b64encode(keys.forged_der).decode()
    forged_subject = openssl("x509", "-in", keys.forged, "-noout", "-subject", "-nameopt", "RFC2253").stdout.decode().split("=", 1)[1].strip()
    check(f"the device's own certificate has bob's subject as Midtier issues it ({bob_subject})", forged_subject == bob_subject,
          f"({forged_subject})")
    variants = [[("SSL_CLIENT_CERT", forged_b64)], [("SSL-Client-Cert", forged_b64)], [("Client-Cert", f":{forged_b64}:")],
                [("ssl_client_cert", forged_b64)], [("X-SSL-Client-Cert", forged_b64), ("X-SSL-Client-S-DN", expected["bob"])],
                [("SSL_CLIENT_CERT", forged_b64), ("SSL-Client-Cert", forged_b64), ("Client-Cert", forged_b64),
                 ("ssl_client_cert", forged_b64), ("X-SSL-Cert", forged_b64)]]

    def leaked(record):
        """The headers of a back-end request that carry the forged certificate or name bob, or
        that are certificate headers other than the one SSL_CLIENT_CERT."""
        bad = []
        for name, value in record["headers"]:
            lower = name.lower()
            if forged_b64[20:80] in value or "CN=bob" in value and lower != "ssl_client_cert":
                bad.append(name)
            elif lower.startswith("x-ssl") or lower in ("ssl-client-cert", "client-cert"):
                bad.append(name)
        cert_values = [value for name, value in record["headers"] if name.lower() == "ssl_client_cert"]
        if len(cert_values) != 1:
            bad.append(f"{len(cert_values)} SSL_CLIENT_CERT")
        return bad

    # The checks can fail: sent straight to nginx with the system certificate, each variant
    # reaches the back end and is flagged (nginx passes them on; only Midtier must not).
    flagged = []
    for extra in variants:
        before = len(Records.icm)
        curl_nginx("--cert", keys.system, "--key", keys.system_key, *[arg for name, value in extra for arg in ("-H", f"{name}: {value}")])
        flagged.append(len(Records.icm) == before + 1 and bool(leaked(Records.icm[before])))
    check(f"the stand-in passes a device's certificate headers on and the check flags them ({sum(flagged)}/{len(variants)} variants)",
          all(flagged), f"({flagged})")

    for extra in variants:
        names = "+".join(name for name, _ in extra)
        before = len(Records.icm)
        status, _, body, answer = device("alice", "/gw/ZSALES_SRV/Orders?forged=1", extra)
        record = Records.icm[before] if len(Records.icm) == before + 1 else None
        check(f"header mode: a device's own {names} (bob's subject, its own CA) never reaches the back end; it sees only alice's",
              status == 200 and same_subject(answer.get("subject"), expected["alice"]) and answer.get("verified") is True and record
              and not leaked(record),
              f"({status} {body[:300]!r}; leaked {record and leaked(record)})")

    # The same without nginx (which keeps one SSL_CLIENT_CERT of several): every header exactly
    # as Midtier sent it, to a TLS server that requires the system certificate.
    before = len(Records.raw)
    status, _, body = device("alice", "/gwraw/ZSALES_SRV/Orders")[:3]
    own = [v for n, v in Records.raw[before]["headers"] if n.lower() == "ssl_client_cert"] if len(Records.raw) == before + 1 else []
    own_subject = inspect_certificate(own[0], work, keys.pp_ca)["subject"] if own else None
    check("header mode without nginx: the server sees the system certificate and exactly one SSL_CLIENT_CERT, alice's",
          status == 200 and len(own) == 1 and same_subject(own_subject, expected["alice"])
          and Records.raw[before]["subject"] == system_subject, f"({status} {body[:200]!r} {len(own)} headers, {own_subject})")
    for extra in variants:
        names = "+".join(name for name, _ in extra)
        before = len(Records.raw)
        status, _, body = device("alice", "/gwraw/ZSALES_SRV/Orders?forged=1", extra)[:3]
        record = Records.raw[before] if len(Records.raw) == before + 1 else None
        values = [v for n, v in record["headers"] if n.lower() == "ssl_client_cert"] if record else []
        check(f"header mode without nginx: the device's own {names} is not among the headers Midtier sends; only alice's SSL_CLIENT_CERT",
              status == 200 and record and values == own and not leaked(record), f"({status} {body[:200]!r}; {record and [n for n, _ in record['headers']]})")

    # --- 8. mutualTLS mode ---
    direct_seen = {"alice": [], "bob": []}
    for round_ in range(3):
        for user in ("alice", "bob"):
            before = len(Records.direct)
            status, _, body, answer = device(user, f"/mtls/ZSALES_SRV/Orders?round={round_}&who={user}")
            record = Records.direct[before] if len(Records.direct) == before + 1 else None
            direct_seen[user].append((status, answer, record, body))
    for user, other in (("alice", "bob"), ("bob", "alice")):
        calls = direct_seen[user]
        check(f"mutualTLS: the TLS server (CERT_REQUIRED, PP CA) sees {user}'s own certificate ({expected[user]}) on all 3 calls",
              all(s == 200 and same_subject(a.get("subject"), expected[user]) and r and r["subject"] == a.get("subject") for s, a, r, _ in calls),
              f"({[(s, a.get('subject'), b[:200]) for s, a, _, b in calls]})")
        check(f"mutualTLS: never {other}'s subject for {user}", not any(same_subject(a.get("subject"), expected[other]) for _, a, _, _ in calls))
        ders = {r["der"] for _, _, r, _ in calls if r}
        check(f"mutualTLS: {user}'s certificate is cached (one for 3 calls)", len(ders) == 1, f"({len(ders)})")
        records = [r for _, _, r, _ in calls if r]
        check(f"mutualTLS: no certificate header reaches the server ({user})",
              records and not any(n.lower() in CERT_HEADERS or n.lower().startswith("x-ssl") for r in records for n, _ in r["headers"]),
              f"({[[n for n, _ in r['headers']] for r in records][:1]})")
    subject = direct_seen["alice"][0][1].get("subject")
    check(f"mutualTLS: the certificate's subject reads back as the pattern in RFC 2253: {expected['alice']}", subject == expected["alice"],
          f"(the TLS server's getpeercert() subject, last RDN first: {subject!r})")
    total, wrong = burst("mtls")
    burst_direct = [r for r in Records.direct if "/burst?" in r["path"]]
    crossed = [r["path"] for r in burst_direct if f"who={'alice' if 'CN=bob' in r['subject'] else 'bob'}" in r["path"]]
    check(f"mutualTLS: {total} concurrent calls of alice and bob each present the caller's own certificate",
          not wrong and len(burst_direct) == total and not crossed, f"({wrong[:4]}, {len(burst_direct)} at the server, crossed {crossed[:4]})")
    before = len(Records.direct)
    status, _, body, answer = device("alice", "/mtls/ZSALES_SRV/Orders?forged=1", variants[-1])
    record = Records.direct[before] if len(Records.direct) == before + 1 else None
    check("mutualTLS: a device's own certificate headers never reach the server; it sees alice's certificate",
          status == 200 and same_subject(answer.get("subject"), expected["alice"]) and record
          and not any(forged_b64[20:80] in v or n.lower() in CERT_HEADERS or n.lower().startswith("x-ssl") for n, v in record["headers"]),
          f"({status} {body[:300]!r}; {record and [n for n, _ in record['headers']]})")

    # --- 9. A blocked user's next call is refused and reaches no back end ---
    admin = [("Authorization", "Bearer " + ADMIN_TOKEN), ("Content-Type", "application/json")]
    status, _, body = call(aport, "PUT", "/admin/v1/users/bob/block", admin, b'{"type":"traffic","reason":"principal propagation test"}')
    check("an admin blocks bob: 200", status == 200, f"({status} {body[:300]!r})")
    icm_before, direct_before = len(Records.icm), len(Records.direct)
    results = [device("bob", path)[:3] for path in ("/gw/ZSALES_SRV/Orders?blocked=1", "/mtls/ZSALES_SRV/Orders?blocked=1",
                                                       "/gwmail/ZSALES_SRV/Orders?blocked=1")]
    check("bob's next calls (header mode, mutualTLS) are refused: 403 TRAFFIC_BLOCKED",
          all(s == 403 and h.get("x-message-code") == "TRAFFIC_BLOCKED" for s, h, _ in results),
          f"({[(s, h.get('x-message-code'), b[:150]) for s, h, b in results]})")
    check("... and no request of bob reaches a back end after the block",
          len(Records.icm) == icm_before and len(Records.direct) == direct_before
          and not any("CN=bob" in (r["subject"] or "") for r in Records.icm[icm_before:] + Records.direct[direct_before:]),
          f"({len(Records.icm) - icm_before} at nginx's back end, {len(Records.direct) - direct_before} at the TLS server)")
    status, _, body, answer = device("alice", "/gw/ZSALES_SRV/Orders?after-block=1")
    status2, _, body2, answer2 = device("alice", "/mtls/ZSALES_SRV/Orders?after-block=1")
    check("alice still gets through after bob's block (both modes)",
          status == 200 and same_subject(answer.get("subject"), expected["alice"]) and status2 == 200
          and same_subject(answer2.get("subject"), expected["alice"]),
          f"({status} {body[:200]!r} {status2} {body2[:200]!r})")
    check("midtier is still running", midtier.poll() is None)
    credentials = [r["path"] for r in Records.icm + Records.direct + Records.raw
                   if any(n.lower() in ("authorization", "cookie") or "demo-password" in v or DAVE_PASSWORD in v for n, v in r["headers"])]
    check(f"no back-end request carried the device's Authorization or cookies ({len(Records.icm) + len(Records.direct) + len(Records.raw)} requests)",
          not credentials, f"({credentials[:3]})")

    # --- 10. The log holds no private key ---
    midtier.send_signal(signal.SIGTERM)
    try:
        midtier.wait(timeout=15)
    except subprocess.TimeoutExpired:
        midtier.kill()
    log.close()
    text = open(log_path, "rb").read().decode(errors="replace")
    lines = text.count("\n")
    check(f"the log ({lines} lines, debug) has no 'PRIVATE KEY'", "PRIVATE KEY" not in text.upper(), "")
    known = {"the system key": pem_body(keys.system_key), "the PP CA key": pem_body(keys.pp_ca_key),
             "the encrypted PP CA key": pem_body(keys.pp_ca_key_encrypted),
             "the system .p12": [base64.b64encode(open(keys.system_p12, "rb").read()).decode()[i:i + 64] for i in range(0, 640, 64)],
             "the .p12 password": [P12_PASSWORD], "the CA key passphrase": [CA_PASSPHRASE]}
    hits = [label for label, needles in known.items() if any(needle in text for needle in needles)]
    check("the log holds none of the system key, the PP CA key, the .p12 or their passwords", not hits, f"({hits})")
    found = find_private_keys(text)
    check("no base64 in the log decodes to a private key (the users' keys included)", not found, f"({found[:3]})")
    # The detector finds a user-like key logged as one line of base64 of its DER.
    planted_key = openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-outform", "DER").stdout
    planted_ec = openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-outform", "DER").stdout
    planted = [find_private_keys(text + '\n{"level":"debug","message":"key=' + base64.b64encode(k).decode() + '"}') for k in (planted_key, planted_ec)]
    check("... the detector finds a planted RSA and EC key (base64 of the DER in a log line)", all(planted), f"({planted})")
    print(f"\n# {len(Records.icm)} requests at the ICM back end, {len(Records.direct)} at the mutual-TLS server, "
          f"{len(Records.raw)} at the raw header-mode server; "
          f"{time.monotonic() - started:.1f} s")
except Exception:
    import traceback
    check("the test ran to the end", False, "\n" + traceback.format_exc())
finally:
    kill_all(processes)
    for server in servers:
        server.shutdown()
    if os.environ.get("PP_KEEP"):
        print(f"# kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)

check.finish()
