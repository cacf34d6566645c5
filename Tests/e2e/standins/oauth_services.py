"""Stand-ins for Tests/e2e/token_services.py: OAuth 2.0 token services that check what they
get, a data back end that answers who a bearer token belongs to, and a TLS server that
requires a client certificate. Threads on loopback; everything they see goes into a `Ledger`
the test reads.

- `SAMLBearerService`: an ABAP OAuth 2.0 server (`/sap/bc/sec/oauth2/token`). Client
  authentication by HTTP Basic (401 otherwise); the form `grant_type` saml2-bearer,
  `client_id`, `scope`, `assertion` and nothing else (no `company_id`, no `new_token`); the
  assertion is verified with `xmlsec1` against the registered certificate only, its signature
  must reference the assertion itself, and Issuer, Audience, NameID (Format, NameQualifier),
  bearer Recipient and the validity window are checked; an assertion ID is taken once.
- `OAuthService`: `client_credentials`, RFC 7523 JWT bearer or RFC 8693 token exchange, with
  the client's credentials in the body or as Basic (as configured: the other way is refused);
  the user's JWT is verified with PyJWT against the IdP's public key (signature, iss, aud,
  exp); `scope` and extra parameters must be exactly as expected.
- `EchoService`: a token service that refuses every request, quoting in its reason what it
  was sent (`plain`: the form values decoded and the Basic password; `header`: the
  Authorization header as received).
- `Backend`: `{"user": ...}` for a token a service issued, 401 for an unknown or revoked one.
- `ClientCertServer`: HTTPS with CERT_REQUIRED against a client CA; answers the peer
  certificate's subject (RFC 2253).

Tokens are random, each recorded with the subject it was issued for.
"""
import base64, binascii, http.server, json, os, secrets, socketserver, ssl, subprocess, threading, time
import urllib.parse
import xml.etree.ElementTree as ET

SAML = "urn:oasis:names:tc:SAML:2.0:assertion"
DSIG = "http://www.w3.org/2000/09/xmldsig#"
SAML2_BEARER = "urn:ietf:params:oauth:grant-type:saml2-bearer"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


class Ledger:
    """What the stand-ins saw and issued."""

    def __init__(self):
        self.lock = threading.Lock()
        self.exchanges = []   # one dict a token request: service, status, subject, problems, form, basic, token, ...
        self.tokens = {}      # access token -> {"service", "user"}
        self.revoked = set()
        self.backend = []     # one dict a back-end request: path, method, token, user, status, headers
        self.tls = []         # one dict a request at the client-certificate server

    def issue(self, service, user):
        token = "at-" + secrets.token_urlsafe(24)
        with self.lock:
            self.tokens[token] = {"service": service, "user": user}
        return token

    def revoke(self, token):
        with self.lock:
            self.revoked.add(token)

    def record(self, entry):
        with self.lock:
            self.exchanges.append(entry)

    def exchanges_of(self, service, subject=None, status=None):
        with self.lock:
            return [e for e in self.exchanges if e["service"] == service and (subject is None or e.get("subject") == subject)
                    and (status is None or e["status"] == status)]

    def backend_of(self, prefix):
        with self.lock:
            return [r for r in self.backend if r["path"].startswith(prefix)]


def parse_basic(value):
    """(user, password) of an `Authorization: Basic` value, else None."""
    if not value or not value.lower().startswith("basic "):
        return None
    try:
        raw = base64.b64decode(value[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    if ":" not in raw:
        return None
    user, password = raw.split(":", 1)
    return user, password


def parse_form(handler):
    """The request's form as a dict of lists, and problems with its framing."""
    problems = []
    length = int(handler.headers.get("Content-Length") or 0)
    raw = handler.rfile.read(length).decode("utf-8", "replace")
    content_type = (handler.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        problems.append(f"Content-Type is {content_type!r}, not a form")
    form = urllib.parse.parse_qs(raw, keep_blank_values=True)
    for name, values in form.items():
        if len(values) != 1:
            problems.append(f"parameter {name} given {len(values)} times")
    return raw, form, problems


def one(form, name):
    values = form.get(name)
    return values[0] if values else None


def iso(text):
    """Seconds since the epoch of a SAML dateTime (UTC, `Z`)."""
    import datetime
    text = text.rstrip("Z").split(".")[0]
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()


class SAMLBearerService:
    """An ABAP OAuth 2.0 server's SAML bearer grant (see the module's comment)."""

    def __init__(self, name, ledger, work, *, user, password, client_id, scope, audience, issuer, recipient, certificate,
                 name_qualifier=None, name_id_format="urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified", query=None):
        self.name, self.ledger, self.work = name, ledger, work
        self.user, self.password, self.client_id, self.scope = user, password, client_id, scope
        self.audience, self.issuer, self.recipient, self.certificate = audience, issuer, recipient, certificate
        self.name_qualifier, self.name_id_format, self.query = name_qualifier, name_id_format, query
        self.seen_ids = set()
        self.lock = threading.Lock()

    def handle(self, handler, query):
        raw, form, problems = parse_form(handler)
        authorization = handler.headers.get("Authorization")
        entry = {"service": self.name, "form": {k: v[0] for k, v in form.items()}, "raw": raw, "authorization": authorization,
                 "problems": problems, "subject": None, "mail": None, "attributes": {}, "time": time.time()}
        if self.query is not None and query != self.query:
            problems.append(f"query {query!r}, expected {self.query!r}")
        if parse_basic(authorization) != (self.user, self.password):
            entry["status"] = 401
            self.ledger.record(entry)
            return 401, {"error": "invalid_client", "error_description": f"Client authentication failed for client {self.user}"}, \
                [("WWW-Authenticate", 'Basic realm="SAP NetWeaver Application Server"')]
        expected = {"grant_type": SAML2_BEARER, "client_id": self.client_id, "scope": self.scope}
        for name, value in expected.items():
            if one(form, name) != value:
                problems.append(f"{name} is {one(form, name)!r}, expected {value!r}")
        for name in form:
            if name not in ("grant_type", "client_id", "scope", "assertion"):
                problems.append(f"unexpected parameter {name}")
        assertion = one(form, "assertion")
        entry["assertion_b64"] = assertion
        if not assertion:
            problems.append("no assertion")
        else:
            self.check_assertion(assertion, entry, problems)
        if problems:
            entry["status"] = 400
            self.ledger.record(entry)
            return 400, {"error": "invalid_grant", "error_description": "assertion rejected: " + "; ".join(problems)[:200]}, []
        token = self.ledger.issue(self.name, entry["subject"])
        entry.update(status=200, token=token)
        self.ledger.record(entry)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600}, []

    def check_assertion(self, encoded, entry, problems):
        try:
            xml = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            problems.append("the assertion is not base64")
            return
        entry["assertion_xml"] = xml.decode("utf-8", "replace")
        path = os.path.join(self.work, f"assertion-{secrets.token_hex(8)}.xml")
        with open(path, "wb") as f:
            f.write(xml)
        verify = subprocess.run(["xmlsec1", "--verify", "--pubkey-cert-pem", self.certificate, "--enabled-key-data", "key-name",
                                 "--id-attr:ID", f"{SAML}:Assertion", path], capture_output=True, text=True, timeout=20)
        entry["xmlsec1"] = verify.returncode == 0
        if verify.returncode != 0:
            problems.append("the signature does not verify (xmlsec1: " + verify.stderr.strip().splitlines()[-1][:120] + ")"
                            if verify.stderr.strip() else "the signature does not verify")
        try:
            root = ET.fromstring(xml)
        except ET.ParseError as error:
            problems.append(f"not XML: {error}")
            return
        n = {"saml": SAML, "ds": DSIG}
        if root.tag != f"{{{SAML}}}Assertion":
            problems.append(f"the root is {root.tag}, not a SAML Assertion")
            return
        assertion_id = root.get("ID")
        references = root.findall("ds:Signature/ds:SignedInfo/ds:Reference", n)
        if len(references) != 1 or references[0].get("URI") != "#" + (assertion_id or "?"):
            problems.append("the signature does not reference the assertion itself")
        with self.lock:
            if assertion_id in self.seen_ids:
                problems.append(f"assertion ID {assertion_id} replayed")
            self.seen_ids.add(assertion_id)
        issuer = root.findtext("saml:Issuer", namespaces=n)
        if issuer != self.issuer:
            problems.append(f"Issuer {issuer!r}, expected {self.issuer!r}")
        name_id = root.find("saml:Subject/saml:NameID", n)
        if name_id is None or not (name_id.text or "").strip():
            problems.append("no NameID")
        else:
            entry["subject"] = name_id.text
            entry["name_qualifier"] = name_id.get("NameQualifier")
            if name_id.get("Format") != self.name_id_format:
                problems.append(f"NameID Format {name_id.get('Format')!r}, expected {self.name_id_format!r}")
            if name_id.get("NameQualifier") != self.name_qualifier:
                problems.append(f"NameQualifier {name_id.get('NameQualifier')!r}, expected {self.name_qualifier!r}")
        confirmation = root.find("saml:Subject/saml:SubjectConfirmation", n)
        data = confirmation.find("saml:SubjectConfirmationData", n) if confirmation is not None else None
        now = time.time()
        if confirmation is None or confirmation.get("Method") != "urn:oasis:names:tc:SAML:2.0:cm:bearer" or data is None:
            problems.append("no bearer SubjectConfirmation")
        else:
            entry["recipient"] = data.get("Recipient")
            if data.get("Recipient") != self.recipient:
                problems.append(f"Recipient {data.get('Recipient')!r}, expected {self.recipient!r}")
            if not data.get("NotOnOrAfter") or iso(data.get("NotOnOrAfter")) <= now:
                problems.append("SubjectConfirmationData has expired")
        conditions = root.find("saml:Conditions", n)
        if conditions is None:
            problems.append("no Conditions")
        else:
            if iso(conditions.get("NotBefore", "2999-01-01T00:00:00Z")) > now + 5 or iso(conditions.get("NotOnOrAfter", "1970-01-01T00:00:00Z")) <= now:
                problems.append("the assertion is not valid now")
            audiences = [a.text for a in conditions.findall("saml:AudienceRestriction/saml:Audience", n)]
            entry["audiences"] = audiences
            if audiences != [self.audience]:
                problems.append(f"Audience {audiences!r}, expected [{self.audience!r}]")
        attributes = {}
        for attribute in root.findall("saml:AttributeStatement/saml:Attribute", n):
            attributes[attribute.get("Name")] = [v.text for v in attribute.findall("saml:AttributeValue", n)]
        entry["attributes"] = attributes
        entry["mail"] = (attributes.get("mail") or [None])[0]
        if "api_key" in attributes:
            problems.append("an api_key attribute (SuccessFactors') for the ABAP OAuth server")


class OAuthService:
    """client_credentials, JWT bearer (RFC 7523) or token exchange (RFC 8693)."""

    def __init__(self, name, ledger, *, grant, client_id, client_secret, credentials="body", scope=None, extra=None,
                 idp_public_key=None, issuer=None, audience=None, delay=0.0):
        self.name, self.ledger, self.grant = name, ledger, grant
        self.client_id, self.client_secret, self.credentials = client_id, client_secret, credentials
        self.scope, self.extra = scope, dict(extra or {})
        self.idp_public_key, self.issuer, self.audience, self.delay = idp_public_key, issuer, audience, delay

    def handle(self, handler, query):
        raw, form, problems = parse_form(handler)
        authorization = handler.headers.get("Authorization")
        entry = {"service": self.name, "form": {k: v[0] for k, v in form.items()}, "raw": raw, "authorization": authorization,
                 "problems": problems, "subject": None, "time": time.time()}
        basic = parse_basic(authorization)
        entry["credentials_in"] = "basic" if basic else "body" if "client_secret" in form else "none"
        if self.credentials == "body":
            good = one(form, "client_id") == self.client_id and one(form, "client_secret") == self.client_secret and authorization is None
        else:
            good = basic == (self.client_id, self.client_secret) and "client_secret" not in form \
                and one(form, "client_id") in (None, self.client_id)
        if not good:
            entry["status"] = 401
            self.ledger.record(entry)
            return 401, {"error": "invalid_client", "error_description": f"Client authentication failed for client {self.client_id}"}, []
        allowed = {"grant_type", "client_id", "client_secret", "scope", *self.extra}
        if self.grant == "client_credentials":
            if one(form, "grant_type") != "client_credentials":
                problems.append(f"grant_type {one(form, 'grant_type')!r}")
            subject = "client:" + self.client_id
        elif self.grant == "jwt_bearer":
            allowed.add("assertion")
            if one(form, "grant_type") != JWT_BEARER:
                problems.append(f"grant_type {one(form, 'grant_type')!r}")
            subject = self.verify(one(form, "assertion"), entry, problems)
        else:
            allowed |= {"subject_token", "subject_token_type", "requested_token_type"}
            if one(form, "grant_type") != TOKEN_EXCHANGE:
                problems.append(f"grant_type {one(form, 'grant_type')!r}")
            if one(form, "subject_token_type") != JWT_TOKEN_TYPE:
                problems.append(f"subject_token_type {one(form, 'subject_token_type')!r}")
            if one(form, "requested_token_type") not in (None, ACCESS_TOKEN_TYPE):
                problems.append(f"requested_token_type {one(form, 'requested_token_type')!r}")
            subject = self.verify(one(form, "subject_token"), entry, problems)
        if one(form, "scope") != self.scope:
            problems.append(f"scope {one(form, 'scope')!r}, expected {self.scope!r}")
        for name, value in self.extra.items():
            if one(form, name) != value:
                problems.append(f"{name} {one(form, name)!r}, expected {value!r}")
        for name in form:
            if name not in allowed:
                problems.append(f"unexpected parameter {name}")
        entry["subject"] = subject
        if self.delay:
            time.sleep(self.delay)
        if problems:
            entry["status"] = 400
            self.ledger.record(entry)
            reason = "assertion rejected: " + problems[0] if self.grant != "client_credentials" else "; ".join(problems)
            return 400, {"error": "invalid_grant", "error_description": reason[:200]}, []
        token = self.ledger.issue(self.name, subject)
        entry.update(status=200, token=token)
        self.ledger.record(entry)
        return 200, {"access_token": token, "token_type": "bearer", "expires_in": 3600}, []

    def verify(self, token, entry, problems):
        """The `sub` of the user's JWT, verified against the IdP's key; None (and a problem) if not."""
        import jwt
        entry["user_jwt"] = token
        if not token:
            problems.append("no user token")
            return None
        try:
            claims = jwt.decode(token, self.idp_public_key, algorithms=["RS256"], audience=self.audience, issuer=self.issuer,
                                options={"require": ["exp", "iss", "aud", "sub"]})
        except jwt.InvalidAudienceError:
            problems.append("invalid audience (stand-in ref JB-17)")
            return None
        except jwt.PyJWTError as error:
            problems.append(f"{type(error).__name__}: {error}")
            return None
        entry["claims"] = claims
        return claims["sub"]


class EchoService:
    """Refuses every request, quoting what it got (see the module's comment)."""

    def __init__(self, name, ledger, mode):
        self.name, self.ledger, self.mode = name, ledger, mode

    def handle(self, handler, query):
        raw, form, problems = parse_form(handler)
        authorization = handler.headers.get("Authorization") or ""
        self.ledger.record({"service": self.name, "form": {k: v[0] for k, v in form.items()}, "raw": raw, "authorization": authorization,
                            "problems": problems, "subject": None, "status": 400, "time": time.time()})
        if self.mode == "header":
            reason = f"the credentials {authorization} are not accepted"
        else:
            words = [f"{name} {values[0]}" for name, values in form.items()]
            basic = parse_basic(authorization)
            if basic:
                words.append(f"user {basic[0]} password {basic[1]}")
            reason = "request refused: " + " ".join(words)
        return 400, {"error": "invalid_request", "error_description": reason}, []


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, value, headers=()):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, text in headers:
            self.send_header(name, text)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def token_server(port, services):
    """A token server on `port`; `services` maps a path to a service object."""

    class Handler(_Handler):
        def do_POST(self):
            path, _, query = self.path.partition("?")
            service = services.get(path)
            if service is None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                return self.answer(404, {"error": "not_found"})
            try:
                status, value, headers = service.handle(self, query)
            except Exception as error:  # a stand-in bug must show, not hang the test
                status, value, headers = 500, {"error": "server_error", "error_description": repr(error)[:200]}, []
            self.answer(status, value, headers)

        def do_GET(self):
            self.answer(405, {"error": "invalid_request", "error_description": "POST only"})

    return serve(ThreadingServer(("127.0.0.1", port), Handler))


def backend_server(port, ledger):
    """The data back end: who a bearer token belongs to."""

    class Handler(_Handler):
        def respond(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            authorization = self.headers.get("Authorization") or ""
            token = authorization[7:].strip() if authorization.lower().startswith("bearer ") else None
            with ledger.lock:
                owner = ledger.tokens.get(token) if token and token not in ledger.revoked else None
                record = {"path": self.path, "method": self.command, "token": token, "user": owner and owner["user"],
                          "service": owner and owner["service"], "status": 200 if owner else 401, "headers": list(self.headers.items()),
                          "time": time.time()}
                ledger.backend.append(record)
            if not owner:
                return self.answer(401, {"error": "invalid_token"}, [("WWW-Authenticate", 'Bearer error="invalid_token"')])
            self.answer(200, {"user": owner["user"], "service": owner["service"], "path": self.path})

        do_GET = do_POST = do_PUT = do_DELETE = respond

    return serve(ThreadingServer(("127.0.0.1", port), Handler))


SHORT_NAMES = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "countryName": "C"}


def rfc2253(name):
    return ",".join("+".join(f"{SHORT_NAMES.get(k, k)}={v}" for k, v in rdn) for rdn in reversed(name))


def client_cert_server(port, ledger, certificate, key, client_ca):
    """HTTPS requiring a client certificate of `client_ca`; answers its subject and issuer."""

    class Handler(_Handler):
        def do_GET(self):
            peer = self.connection.getpeercert() or {}
            subject, issuer = rfc2253(peer.get("subject", ())), rfc2253(peer.get("issuer", ()))
            with ledger.lock:
                ledger.tls.append({"path": self.path, "subject": subject, "issuer": issuer, "headers": list(self.headers.items())})
            self.answer(200, {"subject": subject, "issuer": issuer, "path": self.path})

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(client_ca)
    server = ThreadingServer(("127.0.0.1", port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return serve(server)
