#!/usr/bin/env python3
"""Token-service destinations through the real `midtier` binary (docs/forwarding.md,
docs/configuration.md), each against a stand-in of Tests/e2e/standins/oauth_services.py that
checks what it gets and a data back end that answers whom a bearer token belongs to:

1. `OAuth2SAMLBearerAssertion` for the ABAP OAuth 2.0 server (`/sap/bc/sec/oauth2/token`,
   no `companyId`): Basic client authentication with tokenServiceUser/-Password (a secret from
   the environment and from a file), the saml2-bearer form with client_id and scope and
   neither company_id nor new_token, an assertion that verifies with `xmlsec1` against the
   signing certificate (made here with openssl) and carries Audience, Issuer, NameID with its
   NameQualifier, Recipient (the token URL without its query), `mail` and no `api_key`;
   `userIdSource` mail with the e-mail NameID format.
2. `OAuth2ClientCredentials`: client_id/client_secret in the body, or as Basic with
   `tokenService.addClientCredentialsInBody: false`; `scope` and `tokenService.body.resource`
   arrive; one token for every user, taken once for concurrent first calls of two users.
3. `OAuth2JWTBearer`, `OAuth2UserTokenExchange` (the same JWT bearer grant) and
   `OAuth2TokenExchange` (RFC 8693): users of a `jwt` app (the IdP's RS256 tokens, made with
   openssl); the token service verifies the user's JWT with PyJWT and issues a token for its
   `sub`. Each call reaches the back end as its caller (also 20 concurrent mixed calls, cold
   and warm), one exchange per user, and a users.json user gets 403 without an exchange.
4. `ClientCertificateAuthentication`: a Python `ssl` server with CERT_REQUIRED answers the
   client certificate's subject; a `.pem` and a `.p12` KeyStoreLocation with
   `trustedCertificates`; without them, or with another CA's certificate, 502.
5. After the back end rejects a token once (revoked), Midtier renews it once and the GET
   succeeds; a token service's 400/401 is a 502 naming its reason, never a secret, the
   assertion or the user's JWT, even when the token service echoes them.
6. A blocked user's next call is refused; neither token service nor back end sees it.
7. The log (debug level) holds no client secret, password, signing key, access token or JWT.
8. `check-config` names file and key for what is missing or not allowed.

Usage: token_services.py PATH-TO-MIDTIER. Prints `token-services: N passed, M failed`; exits
1 on failure. Standard library, PyJWT and the `openssl` and `xmlsec1` commands; every process
is killed at the end.
"""
import base64, http.client, json, os, re, shutil, signal, subprocess, sys, tempfile, time, urllib.parse
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "standins"))
from harness import Checks, basic, call, demo_config, free_port, hash_secret, idp_key, jwt, kill_all, wait_for, write_json  # noqa: E402
from pki import PKI, openssl, pem_body  # noqa: E402
import oauth_services as stand  # noqa: E402  (Tests/e2e/standins/oauth_services.py)

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
ISSUER = "https://idp.tokens.test"
ADMIN_TOKEN = "ts-admin-" + os.urandom(12).hex()
S4_PASSWORD = "s4pw-" + os.urandom(9).hex()          # Basic of MOBILE_OAUTH:<this> is under 64 base64 characters
WRONG_S4_PASSWORD = "s4wrong-" + os.urandom(8).hex()
CC_SECRET = "cc-secret-" + os.urandom(10).hex()
CCB_SECRET = "ccb-secret-" + os.urandom(10).hex()
JWT_SECRET = "jwt-secret-" + os.urandom(10).hex()
UTE_SECRET = "ute-secret-" + os.urandom(10).hex()
TX_SECRET = "tx-secret-" + os.urandom(10).hex()
P12_PASSWORD = "p12-" + os.urandom(8).hex()
MAIL = {"alice": "alice@example.com", "bob": "bob@example.com"}
processes = []
check = Checks("token-services")

class Keys(PKI):
    """The SAML signing pair and the TLS keys, all made here with openssl."""

    def __init__(self, folder):
        super().__init__(folder)
        self.signing_key, self.signing_cert = self.path("saml.key"), self.path("saml.crt")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", self.signing_key, "-out", self.signing_cert, "-days", "2",
                "-subj", "/CN=midtier.example.com/O=Example", "-config", self.cnf)
        self.server_ca, self.server_ca_key = self.ca("server-ca", "/CN=Back-end Server CA/O=Example")
        self.server, self.server_key = self.leaf("server", "/CN=127.0.0.1", self.server_ca, self.server_ca_key, "server")
        self.client_ca, self.client_ca_key = self.ca("client-ca", "/CN=Partner Client CA/O=Example")
        cert, key = self.leaf("client-pem", "/O=Example/CN=midtier-pem", self.client_ca, self.client_ca_key, "client")
        self.client_pem = self.path("client-keystore.pem")
        open(self.client_pem, "w").write(open(cert).read() + open(key).read())
        self.client_pem_key = key
        cert, key = self.leaf("client-p12", "/O=Example/CN=midtier-p12", self.client_ca, self.client_ca_key, "client")
        self.client_p12 = self.path("client-keystore.p12")
        openssl("pkcs12", "-export", "-in", cert, "-inkey", key, "-name", "midtier", "-out", self.client_p12, "-passout", "pass:" + P12_PASSWORD)
        self.client_p12_key = key
        other_ca, other_ca_key = self.ca("other-ca", "/CN=Partner Client CA/O=Example")
        cert, key = self.leaf("stranger", "/O=Example/CN=midtier-stranger", other_ca, other_ca_key, "client")
        self.stranger_pem = self.path("stranger-keystore.pem")
        open(self.stranger_pem, "w").write(open(cert).read() + open(key).read())




def text_of(body):
    return body.decode(errors="replace") if isinstance(body, bytes) else str(body)


work = tempfile.mkdtemp(prefix="midtier-tokens-")
servers = []
started = time.monotonic()
ledger = stand.Ledger()
try:
    keys = Keys(work)
    idp_private, jwks = idp_key(work)
    json.dump(jwks, open(os.path.join(work, "jwks.json"), "w"))
    idp_public = openssl("rsa", "-in", idp_private, "-pubout").stdout.decode()

    # --- Stand-ins ---
    tport, bport, tlsport, mport, aport = free_port(), free_port(), free_port(), free_port(), free_port()
    token_base, backend_base = f"http://127.0.0.1:{tport}", f"http://127.0.0.1:{bport}"
    S4_PATH = "/sap/bc/sec/oauth2/token"
    saml_common = dict(user="MOBILE_OAUTH", password=S4_PASSWORD, client_id="MOBILE_OAUTH", scope="ZSALES_0001", audience="S4HCLNT100",
                       issuer="midtier.example.com", certificate=keys.signing_cert)
    oauth_idp = dict(idp_public_key=idp_public, issuer=ISSUER, audience="midtier")
    services = {
        S4_PATH: stand.SAMLBearerService("s4", ledger, work, recipient=token_base + S4_PATH, name_qualifier="EXAMPLE.COM", **saml_common),
        "/s4mail" + S4_PATH: stand.SAMLBearerService(
            "s4mail", ledger, work, recipient=token_base + "/s4mail" + S4_PATH, query="sap-client=100",
            name_id_format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress", **saml_common),
        "/oauth/cc/token": stand.OAuthService("cc", ledger, grant="client_credentials", client_id="cc-client", client_secret=CC_SECRET,
                                              scope="orders.read", extra={"resource": "urn:orders-api"}, delay=0.3),
        "/oauth/ccbasic/token": stand.OAuthService("ccbasic", ledger, grant="client_credentials", client_id="ccb-client",
                                                   client_secret=CCB_SECRET, credentials="basic"),
        "/oauth/jwt/token": stand.OAuthService("jwtb", ledger, grant="jwt_bearer", client_id="jwt-client", client_secret=JWT_SECRET, **oauth_idp),
        "/oauth/ute/token": stand.OAuthService("ute", ledger, grant="jwt_bearer", client_id="ute-client", client_secret=UTE_SECRET,
                                               delay=0.3, **oauth_idp),
        "/oauth/tx/token": stand.OAuthService("tx", ledger, grant="token_exchange", client_id="tx-client", client_secret=TX_SECRET, **oauth_idp),
        "/oauth/strict/token": stand.OAuthService("jwtaud", ledger, grant="jwt_bearer", client_id="jwt-client", client_secret=JWT_SECRET,
                                                  idp_public_key=idp_public, issuer=ISSUER, audience="another-audience"),
        "/selftest/jwt/token": stand.OAuthService("selftest", ledger, grant="jwt_bearer", client_id="jwt-client", client_secret=JWT_SECRET,
                                                  **oauth_idp),
        "/echo/plain/token": stand.EchoService("echo-plain", ledger, "plain"),
        "/echo/header/token": stand.EchoService("echo-header", ledger, "header"),
    }
    servers.append(stand.token_server(tport, services))
    servers.append(stand.backend_server(bport, ledger))
    servers.append(stand.client_cert_server(tlsport, ledger, keys.server, keys.server_key, keys.client_ca))

    # The stand-in's JWT check can fail: another key's JWT, an expired one, a wrong issuer.
    other_key = os.path.join(work, "other-idp.key")
    openssl("genrsa", "-out", other_key, "2048")
    now = int(time.time())
    good_claims = {"iss": ISSUER, "aud": "midtier", "sub": "alice", "iat": now, "exp": now + 600}
    probes = {"a JWT of another key": jwt(other_key, good_claims), "an expired JWT": jwt(idp_private, dict(good_claims, exp=now - 60)),
              "a JWT of another issuer": jwt(idp_private, dict(good_claims, iss="https://elsewhere.test")),
              "a good JWT": jwt(idp_private, good_claims)}
    answers = {}
    for label, probe in probes.items():
        form = urllib.parse.urlencode({"grant_type": stand.JWT_BEARER, "assertion": probe, "client_id": "jwt-client",
                                       "client_secret": JWT_SECRET}).encode()
        answers[label] = call(tport, "POST", "/selftest/jwt/token", [("Content-Type", "application/x-www-form-urlencoded")], form)[0]
    check("the stand-in token service refuses another key's, an expired and another issuer's JWT (400) and takes a good one (200)",
          answers == {"a JWT of another key": 400, "an expired JWT": 400, "a JWT of another issuer": 400, "a good JWT": 200}, f"({answers})")

    # --- Configuration ---
    os.environ["TS_S4_PASSWORD"] = S4_PASSWORD
    os.environ["TS_CC_SECRET"] = CC_SECRET
    config = demo_config(REPO, work, mport, aport, adminTokenHashes=[hash_secret(BIN, ADMIN_TOKEN)], logLevel="debug")
    users_file = os.path.join(config, "users.json")
    users = json.load(open(users_file))
    for user in users["users"]:
        if user["id"] in MAIL:
            user["attributes"]["mail"] = MAIL[user["id"]]
    write_json(users_file, users)
    secrets_dir = os.path.join(work, "secrets")
    os.mkdir(secrets_dir)

    def secret_file(name, value):
        path = os.path.join(secrets_dir, name)
        open(path, "w").write(value + "\n")
        return path

    s4 = {"Name": "s4", "URL": f"{backend_base}/s4", "Authentication": "OAuth2SAMLBearerAssertion", "ProxyType": "Internet",
          "tokenServiceURL": token_base + S4_PATH, "clientKey": "MOBILE_OAUTH", "tokenServiceUser": "MOBILE_OAUTH",
          "tokenServicePassword": {"env": "TS_S4_PASSWORD"}, "scope": "ZSALES_0001", "audience": "S4HCLNT100",
          "assertionIssuer": "midtier.example.com", "nameQualifier": "EXAMPLE.COM", "assertionAttributes": ["mail"],
          "signingKey": keys.signing_key, "signingCertificate": keys.signing_cert, "timeout": 10000}
    s4mail = dict(s4, Name="s4mail", URL=f"{backend_base}/s4mail", tokenServiceURL=token_base + "/s4mail" + S4_PATH + "?sap-client=100",
                  tokenServicePassword={"file": secret_file("s4-password", S4_PASSWORD)}, userIdSource="mail",
                  nameIdFormat="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress")
    s4mail.pop("nameQualifier")
    s4bad = dict(s4, Name="s4bad", URL=f"{backend_base}/s4bad", tokenServicePassword=WRONG_S4_PASSWORD)
    s4echo = dict(s4, Name="s4echo", URL=f"{backend_base}/s4echo", tokenServiceURL=token_base + "/echo/plain/token")
    s4echohdr = dict(s4, Name="s4echohdr", URL=f"{backend_base}/s4echohdr", tokenServiceURL=token_base + "/echo/header/token")
    cc = {"Name": "cc", "URL": f"{backend_base}/cc", "Authentication": "OAuth2ClientCredentials", "tokenServiceURL": token_base + "/oauth/cc/token",
          "clientId": "cc-client", "clientSecret": {"env": "TS_CC_SECRET"}, "scope": "orders.read",
          "tokenService.body.resource": "urn:orders-api", "timeout": 10000}
    ccbasic = {"Name": "ccbasic", "URL": f"{backend_base}/ccbasic", "Authentication": "OAuth2ClientCredentials",
               "tokenServiceURL": token_base + "/oauth/ccbasic/token", "clientId": "ccb-client", "clientSecret": CCB_SECRET,
               "tokenService.addClientCredentialsInBody": False}
    ccbad = dict(cc, Name="ccbad", URL=f"{backend_base}/ccbad", clientSecret="cc-wrong-" + os.urandom(8).hex())
    ccecho = dict(cc, Name="ccecho", URL=f"{backend_base}/ccecho", tokenServiceURL=token_base + "/echo/plain/token")
    ccbasicecho = dict(ccbasic, Name="ccbasicecho", URL=f"{backend_base}/ccbasicecho", tokenServiceURL=token_base + "/echo/header/token")
    jwtb = {"Name": "jwtb", "URL": f"{backend_base}/jwtb", "Authentication": "OAuth2JWTBearer", "tokenServiceURL": token_base + "/oauth/jwt/token",
            "clientId": "jwt-client", "clientSecret": {"file": secret_file("jwt-secret", JWT_SECRET)}, "timeout": 10000}
    ute = dict(jwtb, Name="ute", URL=f"{backend_base}/ute", Authentication="OAuth2UserTokenExchange",
               tokenServiceURL=token_base + "/oauth/ute/token", clientId="ute-client", clientSecret=UTE_SECRET)
    tx = dict(jwtb, Name="tx", URL=f"{backend_base}/tx", Authentication="OAuth2TokenExchange", tokenServiceURL=token_base + "/oauth/tx/token",
              clientId="tx-client", clientSecret=TX_SECRET)
    jwtaud = dict(jwtb, Name="jwtaud", URL=f"{backend_base}/jwtaud", tokenServiceURL=token_base + "/oauth/strict/token")
    jwtecho = dict(jwtb, Name="jwtecho", URL=f"{backend_base}/jwtecho", tokenServiceURL=token_base + "/echo/plain/token")
    tls_url = f"https://127.0.0.1:{tlsport}/api"
    certpem = {"Name": "certpem", "URL": tls_url, "Authentication": "ClientCertificateAuthentication", "KeyStoreLocation": keys.client_pem,
               "trustedCertificates": keys.server_ca, "timeout": 10000}
    certp12 = dict(certpem, Name="certp12", KeyStoreLocation=keys.client_p12,
                   KeyStorePassword={"file": secret_file("p12-password", P12_PASSWORD)})
    certnotrust = dict(certpem, Name="certnotrust")
    certnotrust.pop("trustedCertificates")
    certstranger = dict(certpem, Name="certstranger", KeyStoreLocation=keys.stranger_pem)
    all_destinations = [s4, s4mail, s4bad, s4echo, s4echohdr, cc, ccbasic, ccbad, ccecho, ccbasicecho, jwtb, ute, tx, jwtaud, jwtecho,
                        certpem, certp12, certnotrust, certstranger]
    destinations_dir = os.path.join(config, "destinations")
    for destination in all_destinations:
        write_json(os.path.join(destinations_dir, destination["Name"] + ".json"), destination)
    app_file = os.path.join(config, "apps", "demo.json")
    app = json.load(open(app_file))
    app["destinations"] = ["sf", "s4", "s4mail", "s4bad", "s4echo", "s4echohdr", "cc", "ccbasic", "ccbad", "ccecho", "ccbasicecho", "jwtb",
                           "certpem", "certp12", "certnotrust", "certstranger"]
    write_json(app_file, app)
    write_json(os.path.join(config, "apps", "corp.json"),
               {"authentication": {"type": "jwt", "issuer": ISSUER, "audience": "midtier", "jwks": {"file": os.path.join(work, "jwks.json")},
                                   "userClaim": "sub"},
                "destinations": ["jwtb", "ute", "tx", "jwtaud", "jwtecho", "cc"]})

    # --- 8. check-config ---
    def check_config(folder):
        result = subprocess.run([BIN, "check-config", "--config", folder], cwd=REPO, capture_output=True, text=True, timeout=60)
        return result.returncode, result.stdout + result.stderr

    status, output = check_config(config)
    check("check-config accepts the configuration (SAML for ABAP, client credentials, JWT bearer, token exchange, client certificates)",
          status == 0, f"({status} {output[-800:]})")
    every_secret = [S4_PASSWORD, WRONG_S4_PASSWORD, CC_SECRET, CCB_SECRET, JWT_SECRET, UTE_SECRET, TX_SECRET, P12_PASSWORD]

    # A JWKS with no key a token can be checked with (here only a symmetric one): the server
    # would start and refuse every token of the app, so check-config refuses it.
    unusable = os.path.join(work, "config-unusable-jwks")
    shutil.copytree(config, unusable)
    write_json(os.path.join(work, "unusable-jwks.json"), {"keys": [{"kty": "oct", "kid": "k", "k": "c2VjcmV0", "alg": "HS256"}]})
    corp = json.load(open(os.path.join(unusable, "apps", "corp.json")))
    corp["authentication"]["jwks"] = {"file": os.path.join(work, "unusable-jwks.json")}
    write_json(os.path.join(unusable, "apps", "corp.json"), corp)
    status, output = check_config(unusable)
    check("check-config refuses an app whose JWKS file has no usable signing key, naming apps/corp.json and authentication.jwks.file",
          status == 1 and "apps/corp.json: authentication.jwks.file:" in output and "no usable" in output, f"({status} {output[-600:]!r})")

    # `midtier token-request`: what a destination would send, secrets and the user's token named only.
    def token_request(name):
        result = subprocess.run([BIN, "token-request", "--config", config, "--destination", name], cwd=REPO,
                                capture_output=True, text=True, timeout=60)
        return result.returncode, result.stdout + result.stderr
    status, shown = token_request("jwtb")
    check("midtier token-request shows the JWT bearer request without its secret or a user's token",
          status == 0 and "grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer" in shown and "assertion=<the user's identity-provider token>" in shown
          and "client_secret=<clientSecret>" in shown and not any(secret in shown for secret in every_secret), shown[-400:])
    status, shown = token_request("ccbasic")
    check("midtier token-request shows client credentials sent as Basic, by name only",
          status == 0 and "grant_type=client_credentials" in shown and "Authorization: Basic base64(ccb-client:<clientSecret>)" in shown
          and CCB_SECRET not in shown, shown[-400:])
    status, shown = token_request("s4")
    check("midtier token-request refuses a destination that is not OAuth2", status != 0 and "not an OAuth2 destination" in shown, shown[-200:])

    def broken(label, name, change, keys_named):
        variant = os.path.join(work, "config-" + re.sub(r"\W+", "-", label))
        shutil.copytree(config, variant)
        path = os.path.join(variant, "destinations", name + ".json")
        destination = json.load(open(path))
        change(destination)
        write_json(path, destination)
        status, output = check_config(variant)
        named = [line for line in output.splitlines() if any(f"destinations/{name}.json: {key}:" in line for key in keys_named)]
        check(f"check-config refuses {label}, naming {name}.json and {' or '.join(keys_named)}", status == 1 and named,
              f"({status} {output[-600:]!r})")
        leaked = [s for s in every_secret if s in output]
        if leaked:
            check(f"... without repeating a secret ({label})", False, f"({len(leaked)} secrets in {output[-300:]!r})")
        return output

    wrong_p12 = secret_file("wrong-p12-password", "not-the-password")
    broken("an OAuth2ClientCredentials destination without clientSecret", "cc", lambda d: d.pop("clientSecret"), ("clientSecret",))
    broken("a SAML destination with tokenServiceUser but no tokenServicePassword", "s4", lambda d: d.pop("tokenServicePassword"),
           ("tokenServicePassword",))
    broken("an OAuth2 destination with tokenServiceUser but no tokenServicePassword", "jwtb",
           lambda d: d.update(tokenServiceUser="jwt-user"), ("tokenServicePassword",))
    broken("tokenService.body.grant_type", "cc", lambda d: d.update({"tokenService.body.grant_type": "password"}),
           ("tokenService.body.grant_type",))
    broken("an OAuth2SAMLBearerAssertion without companyId and without audience", "s4", lambda d: d.pop("audience"), ("audience",))
    broken("a .p12 KeyStoreLocation with a wrong KeyStorePassword", "certp12", lambda d: d.update(KeyStorePassword={"file": wrong_p12}),
           ("KeyStorePassword", "KeyStoreLocation"))

    # --- Midtier, onboarding ---
    log_path = os.path.join(work, "midtier.log")
    log = open(log_path, "wb")
    midtier = subprocess.Popen([BIN, "serve", "--config", config], cwd=REPO, stdout=log, stderr=log)
    processes.append(midtier)
    ready = wait_for(f"http://127.0.0.1:{mport}/healthz")
    check("midtier starts with the token-service destinations", ready and midtier.poll() is None,
          open(log_path, "rb").read()[-1500:].decode(errors="replace"))

    now = int(time.time())
    JWTS = {user: jwt(idp_private, {"iss": ISSUER, "aud": "midtier", "sub": user, "mail": f"{user}@idp.example.com", "iat": now,
                                    "exp": now + 3600}) for user in ("alice", "bob", "carol")}
    AUTH = {"alice": basic("alice", "alice-demo-password"), "bob": basic("bob", "bob-demo-password"),
            "carol": basic("carol", "carol-demo-password")}
    AUTH.update({"idp:" + user: "Bearer " + token for user, token in JWTS.items()})
    cids = {}
    for user in AUTH:
        app_id = "corp" if user.startswith("idp:") else "demo"
        status, headers, body = call(mport, "POST", f"/odata/applications/v1/{app_id}/Connections",
                                     [("Authorization", AUTH[user]), ("Content-Type", "application/json")], b'{"DeviceType":"iPhone"}')
        cids[user] = headers.get("x-smp-appcid")
        check(f"{user} onboards on {app_id}: 201", status == 201 and cids[user], f"({status} {body[:300]!r})")

    def device(user, path, method="GET", body=None):
        headers = [("Authorization", AUTH[user]), ("X-SMP-APPCID", cids.get(user) or "")]
        if body is not None:
            headers.append(("Content-Type", "application/json"))
        status, headers, raw = call(mport, method, path, headers, body)
        try:
            answer = json.loads(raw) if status == 200 else {}
        except ValueError:
            answer = {}
        return status, headers, raw, answer

    def burst(jobs, workers=10):
        """Runs (user, path) jobs at once; the wrong answers as (user, path, status, who the back end saw)."""
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda job: (job, device(*job)), jobs))
        return [(user, path, status, answer.get("user")) for (user, path), (status, _, _, answer) in results
                if status != 200 or answer.get("user") != expected_user(user, path)]

    def expected_user(user, path):
        name = path.split("/")[1]
        if name in ("cc", "ccbasic"):
            return "client:" + {"cc": "cc-client", "ccbasic": "ccb-client"}[name]
        if name == "s4mail":
            return MAIL[user]
        return user.split(":")[-1]

    # --- 1. OAuth2SAMLBearerAssertion for the ABAP OAuth 2.0 server ---
    saml_calls = {}
    for round_ in range(3):
        for user in ("alice", "bob"):
            saml_calls.setdefault(user, []).append(device(user, f"/s4/ZSALES_SRV/Orders?round={round_}&who={user}"))
    for user, other in (("alice", "bob"), ("bob", "alice")):
        calls = saml_calls[user]
        exchanges = ledger.exchanges_of("s4", subject=user)
        first = exchanges[0] if exchanges else {}
        check(f"SAML (ABAP): {user}'s 3 calls reach the back end as {user}, never as {other}",
              all(s == 200 and a.get("user") == user for s, _, _, a in calls),
              f"({[(s, b[:200]) for s, _, b, _ in calls]}; the token service saw {[(e['status'], e['problems']) for e in ledger.exchanges_of('s4')]})")
        check(f"SAML (ABAP): one exchange for {user}'s 3 calls (the token is cached)", len(exchanges) == 1 and first.get("status") == 200,
              f"({[(e['status'], e['problems']) for e in exchanges]})")
        check(f"SAML (ABAP): the token service accepted {user}'s request with no problem (Basic MOBILE_OAUTH, saml2-bearer, "
              "client_id, scope, no company_id or new_token, Issuer, Audience, NameID and NameQualifier, Recipient)",
              first.get("status") == 200 and not first.get("problems"), f"({first.get('problems')})")
    first = (ledger.exchanges_of("s4", subject="alice") or [{}])[0]
    form = first.get("form", {})
    check("SAML (ABAP): the form is exactly grant_type saml2-bearer, client_id MOBILE_OAUTH, scope ZSALES_0001 and assertion",
          sorted(form) == ["assertion", "client_id", "grant_type", "scope"] and form.get("grant_type") == stand.SAML2_BEARER
          and form.get("client_id") == "MOBILE_OAUTH" and form.get("scope") == "ZSALES_0001", f"({sorted(form)})")
    check("SAML (ABAP): no company_id and no new_token", "company_id" not in form and "new_token" not in form, f"({sorted(form)})")
    check("SAML (ABAP): the client authenticates with Basic MOBILE_OAUTH:<tokenServicePassword from the environment>",
          stand.parse_basic(first.get("authorization")) == ("MOBILE_OAUTH", S4_PASSWORD), f"({first.get('authorization') and 'another Basic'})")
    check("SAML (ABAP): the assertion verifies with xmlsec1 against the signing certificate", first.get("xmlsec1") is True, "")
    check("SAML (ABAP): Audience S4HCLNT100, Issuer midtier.example.com, NameID alice with NameQualifier EXAMPLE.COM, Recipient the token URL",
          first.get("audiences") == ["S4HCLNT100"] and first.get("subject") == "alice" and first.get("name_qualifier") == "EXAMPLE.COM"
          and first.get("recipient") == token_base + S4_PATH and "<saml2:Issuer>midtier.example.com</saml2:Issuer>" in first.get("assertion_xml", ""),
          f"({first.get('audiences')} {first.get('subject')} {first.get('name_qualifier')} {first.get('recipient')})")
    bob_first = (ledger.exchanges_of("s4", subject="bob") or [{}])[0]
    check("SAML (ABAP): the assertion carries mail = the user's mail (alice@example.com, bob@example.com) and no api_key",
          first.get("attributes") == {"mail": ["alice@example.com"]} and bob_first.get("attributes") == {"mail": ["bob@example.com"]},
          f"({first.get('attributes')} {bob_first.get('attributes')})")
    # The stand-in's checks can fail: a tampered assertion does not verify.
    tampered = os.path.join(work, "tampered.xml")
    open(tampered, "w").write(first.get("assertion_xml", "").replace(">alice<", ">bob<"))
    verdict = subprocess.run(["xmlsec1", "--verify", "--pubkey-cert-pem", keys.signing_cert, "--enabled-key-data", "key-name",
                              "--id-attr:ID", f"{stand.SAML}:Assertion", tampered], capture_output=True).returncode
    check("... the stand-in's xmlsec1 check refuses the same assertion with bob's NameID",
          first.get("assertion_xml") and ">bob<" in open(tampered).read() and verdict != 0, f"({verdict})")
    status, _, body, answer = device("carol", "/s4/ZSALES_SRV/Orders?who=carol")
    carol = (ledger.exchanges_of("s4", subject="carol") or [{}])[0]
    check("SAML (ABAP): carol (no mail attribute) gets through as carol, her assertion without a mail attribute",
          status == 200 and answer.get("user") == "carol" and carol.get("status") == 200 and carol.get("attributes") == {},
          f"({status} {body[:200]!r} {carol.get('attributes')} {carol.get('problems')})")

    status, _, body, answer = device("alice", "/s4mail/ZSALES_SRV/Orders?who=alice")
    mail_exchange = (ledger.exchanges_of("s4mail") or [{}])[-1]
    check("SAML userIdSource mail: alice reaches the back end as alice@example.com (NameID in emailAddress format, no NameQualifier)",
          status == 200 and answer.get("user") == "alice@example.com" and mail_exchange.get("status") == 200,
          f"({status} {body[:200]!r}; the token service: {mail_exchange.get('problems')})")
    check("SAML userIdSource mail: Recipient is tokenServiceURL without its query; the query (sap-client=100) reaches the token service",
          mail_exchange.get("recipient") == token_base + "/s4mail" + S4_PATH and not mail_exchange.get("problems"),
          f"({mail_exchange.get('recipient')} {mail_exchange.get('problems')})")
    check("SAML userIdSource mail: tokenServicePassword from a file authenticates",
          stand.parse_basic(mail_exchange.get("authorization")) == ("MOBILE_OAUTH", S4_PASSWORD), "")
    before = len(ledger.exchanges)
    status, _, body, _ = device("carol", "/s4mail/ZSALES_SRV/Orders?who=carol")
    check("SAML userIdSource mail: carol, without mail, gets 403 naming mail, and no exchange happens",
          status == 403 and b"mail" in body and len(ledger.exchanges) == before, f"({status} {body[:300]!r})")

    wrong = burst([("alice" if i % 2 == 0 else "bob", f"/s4/burst?i={i}") for i in range(20)])
    check("SAML (ABAP): 20 concurrent calls of alice and bob each reach the back end as the caller, with no new exchange",
          not wrong and len(ledger.exchanges_of("s4", subject="alice")) == 1 and len(ledger.exchanges_of("s4", subject="bob")) == 1,
          f"({wrong[:4]})")

    # --- 2. OAuth2ClientCredentials ---
    before_backend = len(ledger.backend_of("/cc/"))
    wrong = burst([("alice" if i % 2 == 0 else "bob", f"/cc/Orders?first={i}") for i in range(10)])
    exchanges = ledger.exchanges_of("cc")
    check("client credentials: 10 concurrent first calls of alice and bob all reach the back end as the client (cc-client)",
          not wrong and len(ledger.backend_of("/cc/")) == before_backend + 10, f"({wrong[:4]}; {[(e['status'], e['problems']) for e in exchanges]})")
    check("client credentials: the token service was called once for them (one token for every user)", len(exchanges) == 1,
          f"({len(exchanges)} exchanges)")
    for i in range(4):
        device("alice" if i % 2 else "bob", f"/cc/Orders?more={i}")
    check("client credentials: still one exchange after 4 more calls", len(ledger.exchanges_of("cc")) == 1, f"({len(ledger.exchanges_of('cc'))})")
    first = exchanges[0] if exchanges else {}
    check("client credentials: grant_type client_credentials, client_id and client_secret in the body, no Authorization header",
          first.get("status") == 200 and first["form"].get("grant_type") == "client_credentials" and first["form"].get("client_id") == "cc-client"
          and first["form"].get("client_secret") == CC_SECRET and first.get("authorization") is None,
          f"({sorted(first.get('form', {}))} {first.get('credentials_in')} {first.get('problems')})")
    check("client credentials: scope orders.read and tokenService.body.resource urn:orders-api arrive",
          first.get("form", {}).get("scope") == "orders.read" and first.get("form", {}).get("resource") == "urn:orders-api",
          f"({first.get('form', {}).get('scope')} {first.get('form', {}).get('resource')})")
    status, _, body, answer = device("alice", "/ccbasic/Orders")
    status2, _, _, answer2 = device("bob", "/ccbasic/Orders")
    basic_exchange = (ledger.exchanges_of("ccbasic") or [{}])[0]
    check("client credentials with addClientCredentialsInBody false: both users reach the back end as ccb-client with one exchange",
          status == 200 and answer.get("user") == "client:ccb-client" and status2 == 200 and answer2.get("user") == "client:ccb-client"
          and len(ledger.exchanges_of("ccbasic")) == 1, f"({status} {body[:200]!r}; {basic_exchange.get('problems')})")
    check("... the client's credentials go as Basic ccb-client:<secret>, no client_secret in the body",
          stand.parse_basic(basic_exchange.get("authorization")) == ("ccb-client", CCB_SECRET) and "client_secret" not in basic_exchange.get("form", {}),
          f"({basic_exchange.get('credentials_in')} {sorted(basic_exchange.get('form', {}))})")

    # --- 3. OAuth2JWTBearer, OAuth2UserTokenExchange, OAuth2TokenExchange ---
    for name in ("jwtb", "tx"):
        results = {user: [device("idp:" + user, f"/{name}/Orders?round={r}&who={user}") for r in range(3)] for user in ("alice", "bob")}
        for user, other in (("alice", "bob"), ("bob", "alice")):
            exchanges = ledger.exchanges_of(name, subject=user)
            check(f"{name}: the IdP's {user} reaches the back end as {user} on all 3 calls, never as {other}",
                  all(s == 200 and a.get("user") == user for s, _, _, a in results[user]),
                  f"({[(s, b[:200]) for s, _, b, _ in results[user]]}; the token service: {[(e['status'], e['problems']) for e in ledger.exchanges_of(name)]})")
            check(f"{name}: one exchange for {user}'s 3 calls", len(exchanges) == 1, f"({len(exchanges)})")
        first = (ledger.exchanges_of(name, subject="alice") or [{}])[0]
        form = first.get("form", {})
        if name == "jwtb":
            check("jwtb: grant_type jwt-bearer with the user's own JWT as assertion (verified: signature, iss, aud, exp), "
                  "client_id and client_secret in the body",
                  form.get("grant_type") == stand.JWT_BEARER and form.get("assertion") == JWTS["alice"] and form.get("client_id") == "jwt-client"
                  and form.get("client_secret") == JWT_SECRET and first.get("authorization") is None and not first.get("problems"),
                  f"({sorted(form)} {first.get('problems')})")
        else:
            check("tx: grant_type token-exchange, subject_token the user's own JWT (verified), subject_token_type jwt, "
                  "client_id and client_secret in the body",
                  form.get("grant_type") == stand.TOKEN_EXCHANGE and form.get("subject_token") == JWTS["alice"]
                  and form.get("subject_token_type") == stand.JWT_TOKEN_TYPE and form.get("client_id") == "tx-client"
                  and form.get("client_secret") == TX_SECRET and not first.get("problems"), f"({sorted(form)} {first.get('problems')})")

    # OAuth2UserTokenExchange: cold, 20 concurrent first calls of alice and bob.
    jobs = [("idp:alice" if i % 2 == 0 else "idp:bob", f"/ute/Orders?cold={i}") for i in range(20)]
    wrong = burst(jobs)
    ute_alice, ute_bob = ledger.exchanges_of("ute", subject="alice"), ledger.exchanges_of("ute", subject="bob")
    check("ute (OAuth2UserTokenExchange): 20 concurrent first calls of alice and bob each reach the back end as the caller",
          not wrong, f"({wrong[:4]})")
    check("ute: sent as the JWT bearer grant with the caller's own JWT", ute_alice and ute_bob
          and all(e["form"].get("grant_type") == stand.JWT_BEARER and e["form"].get("assertion") == JWTS[e["subject"]] and not e["problems"]
                  for e in ute_alice + ute_bob), f"({[(e['form'].get('grant_type'), e['problems']) for e in ute_alice + ute_bob]})")
    check("ute: one exchange per user for the concurrent first calls", len(ute_alice) == 1 and len(ute_bob) == 1,
          f"(alice {len(ute_alice)}, bob {len(ute_bob)})")
    counts = len(ledger.exchanges)
    jobs = [(("idp:alice", "idp:bob")[i % 2], f"/{('jwtb', 'tx', 'ute')[i % 3]}/Orders?warm={i}") for i in range(21)]
    wrong = burst(jobs)
    check("21 concurrent mixed calls of alice and bob over jwtb, tx and ute: each reaches the back end as the caller, no new exchange",
          not wrong and len(ledger.exchanges) == counts, f"({wrong[:4]}; {len(ledger.exchanges) - counts} exchanges)")
    before = len(ledger.exchanges)
    status, _, body, _ = device("alice", "/jwtb/Orders?basic=1")
    check("a users.json (Basic) user calling the JWT-bearer destination: 403 saying to sign in through the identity provider",
          status == 403 and b"identity provider" in body, f"({status} {body[:300]!r})")
    check("... and no exchange happens", len(ledger.exchanges) == before, f"({len(ledger.exchanges) - before})")

    # --- 4. ClientCertificateAuthentication ---
    for name, cn in (("certpem", "midtier-pem"), ("certp12", "midtier-p12")):
        status, _, body, answer = device("alice", f"/{name}/Orders")
        check(f"{name}: the TLS server (CERT_REQUIRED, the client CA) sees the client certificate CN={cn}",
              status == 200 and answer.get("subject") == f"CN={cn},O=Example" and answer.get("issuer") == "O=Example,CN=Partner Client CA",
              f"({status} {body[:300]!r})")
    records = list(ledger.tls)
    check("client certificates: no device Authorization reaches the TLS server",
          records and not any(n.lower() == "authorization" for r in records for n, _ in r["headers"]), f"({len(records)})")
    before = len(ledger.tls)
    status, _, body, _ = device("alice", "/certnotrust/Orders")
    check("without trustedCertificates the stand-in's server certificate is not trusted: 502, nothing reaches it",
          status == 502 and len(ledger.tls) == before, f"({status} {body[:300]!r})")
    status, _, body, _ = device("alice", "/certstranger/Orders")
    check("a client certificate of another CA is refused by the server: 502, nothing reaches it",
          status == 502 and len(ledger.tls) == before, f"({status} {body[:300]!r})")

    # --- 5. Renewal after the back end rejects a token ---
    def renewal(name, user, subject, service=None):
        service = service or name
        done = ledger.exchanges_of(service, subject=subject, status=200)
        if not done:
            check(f"{name}: renewal for {user}", False, "(no token to revoke)")
            return
        old = done[-1]["token"]
        ledger.revoke(old)
        before = len(ledger.exchanges_of(service))
        status, _, body, answer = device(user, f"/{name}/Orders?renew={user}")
        records = ledger.backend_of(f"/{name}/Orders?renew={user}")
        new = ledger.exchanges_of(service)[before:]
        if name == "s4":
            check("s4: the renewal asks without new_token (SuccessFactors' own)", len(new) == 1 and "new_token" not in new[0]["form"],
                  f"({[sorted(e['form']) for e in new]})")
        check(f"{name}: after the back end rejects {user}'s token once, the GET succeeds as {subject}",
              status == 200 and answer.get("user") == subject, f"({status} {body[:300]!r})")
        check(f"{name}: ... with one new exchange, the back end seeing the old token (401) and then the new one (200)",
              len(new) == 1 and new[0]["status"] == 200 and [(r["status"], r["token"]) for r in records] == [(401, old), (200, new[0]["token"])],
              f"({[(e['status'], e['problems']) for e in new]}; back end {[(r['status'], r['token'] == old) for r in records]})")
        status, _, _, answer = device(user, f"/{name}/Orders?after-renew={user}")
        check(f"{name}: ... and the renewed token is cached (next call: no exchange)",
              status == 200 and answer.get("user") == subject and len(ledger.exchanges_of(service)) == before + 1,
              f"({status} {len(ledger.exchanges_of(service)) - before})")

    renewal("s4", "alice", "alice")
    renewal("cc", "bob", "client:cc-client")
    renewal("jwtb", "idp:alice", "alice")
    renewal("ute", "idp:bob", "bob")
    renewal("tx", "idp:bob", "bob")

    # --- 5. The token service refuses: 502 with its reason, never a secret ---
    def refused(name, user, reason, must_not, label):
        before = len(ledger.exchanges)
        status, headers, body, _ = device(user, f"/{name}/Orders?refused=1")
        text = text_of(body) + json.dumps(headers)
        seen = ledger.exchanges[before:]
        hits = [what for what, needle in must_not if needle and needle in text]
        check(f"{name}: {label}: 502" + (f" naming the token service's reason ({reason!r})" if reason else ""),
              status == 502 and (reason is None or reason in text_of(body)) and len(seen) == 1,
              f"({status} {body[:400]!r}; the token service saw {[(e['service'], e['status']) for e in seen]})")
        check(f"{name}: ... the answer carries none of {', '.join(what for what, _ in must_not)}", not hits, f"({hits}: {text[:400]!r})")
        return seen

    def assertion_parts(entries):
        """What of the assertions these exchanges carried must never show: the base64, a run of it, the XML's signature."""
        parts = []
        for e in entries:
            encoded = e["form"].get("assertion") or ""
            if encoded.startswith("eyJ"):  # a JWT bearer grant's assertion is the user's JWT, checked on its own
                continue
            xml = base64.b64decode(encoded).decode(errors="replace") if encoded else ""
            signature = re.search(r"<ds:SignatureValue>([^<]+)<", xml)
            parts += [("the assertion", encoded), ("a run of the assertion", encoded[200:260]),
                      ("the assertion's SignatureValue", signature.group(1)[:40] if signature else None)]
        return parts

    seen = refused("s4bad", "alice", "Client authentication failed for client MOBILE_OAUTH",
                   [("the wrong password", WRONG_S4_PASSWORD), ("the right password", S4_PASSWORD)], "SAML, a wrong tokenServicePassword (401)")
    check("s4bad: ... and the 401 came from the Basic check of the stand-in", [e["status"] for e in seen] == [401], f"({seen and seen[0]['status']})")
    seen = refused("ccbad", "bob", "Client authentication failed for client cc-client",
                   [("the wrong secret", ccbad["clientSecret"]), ("the client secret", CC_SECRET)], "client credentials, a wrong clientSecret (401)")
    refused("jwtaud", "idp:alice", "invalid audience (stand-in ref JB-17)",
            [("the user's JWT", JWTS["alice"]), ("the JWT's signature", JWTS["alice"].rsplit(".", 1)[-1]), ("the client secret", JWT_SECRET)],
            "the token service refuses the user's JWT (400)")
    before = len(ledger.exchanges)
    status, _, body, _ = device("alice", "/s4echo/Orders?refused=1")
    echoed = ledger.exchanges[before:]
    text = text_of(body)
    must_not = [("the tokenServicePassword", S4_PASSWORD), ("the assertion's XML", "saml2:Assertion")] + assertion_parts(echoed)
    hits = [what for what, needle in must_not if needle and needle in text]
    check("s4echo: a token service quoting the password and the assertion in its 400: 502",
          status == 502 and len(echoed) == 1, f"({status} {body[:300]!r})")
    check("s4echo: ... the answer carries neither the password nor any of the assertion", not hits, f"({hits}: {text[:400]!r})")
    refused("s4echohdr", "alice", None,
            [("the Basic credentials (base64 of MOBILE_OAUTH:password)", base64.b64encode(f"MOBILE_OAUTH:{S4_PASSWORD}".encode()).decode()),
             ("the tokenServicePassword", S4_PASSWORD)], "a token service quoting the Authorization header it got (400)")
    refused("ccecho", "alice", None, [("the client secret", CC_SECRET)], "a token service quoting client_secret (400)")
    refused("ccbasicecho", "alice", None,
            [("the Basic credentials (base64 of ccb-client:secret)", base64.b64encode(f"ccb-client:{CCB_SECRET}".encode()).decode()),
             ("the client secret", CCB_SECRET)], "a token service quoting the Authorization header it got (400)")
    refused("jwtecho", "idp:bob", None,
            [("the user's JWT", JWTS["bob"]), ("the JWT's signature", JWTS["bob"].rsplit(".", 1)[-1]),
             ("the JWT's payload", JWTS["bob"].split(".")[1]), ("the client secret", JWT_SECRET)],
            "a token service quoting the user's JWT and client_secret (400)")

    # --- 6. Block ---
    admin = [("Authorization", "Bearer " + ADMIN_TOKEN), ("Content-Type", "application/json")]
    status, _, body = call(aport, "PUT", "/admin/v1/users/bob/block", admin, b'{"type":"traffic","reason":"token services test"}')
    check("an admin blocks bob (users.json): 200", status == 200, f"({status} {body[:300]!r})")
    exchanges_before, backend_before = len(ledger.exchanges), len(ledger.backend)
    results = [device("bob", path)[:3] for path in ("/s4/Orders?blocked=1", "/s4mail/Orders?blocked=1", "/cc/Orders?blocked=1",
                                                    "/ccbasic/Orders?blocked=1")]
    check("bob's next calls (SAML, client credentials) are refused: 403 TRAFFIC_BLOCKED",
          all(s == 403 and h.get("x-message-code") == "TRAFFIC_BLOCKED" for s, h, _ in results),
          f"({[(s, h.get('x-message-code'), b[:150]) for s, h, b in results]})")
    check("... neither a token service nor the back end sees anything of them",
          len(ledger.exchanges) == exchanges_before and len(ledger.backend) == backend_before,
          f"({len(ledger.exchanges) - exchanges_before} exchanges, {len(ledger.backend) - backend_before} back-end requests)")
    status, _, body, answer = device("idp:carol", "/jwtb/Orders?before-block=1")
    check("the IdP's carol reaches jwtb as carol before her block", status == 200 and answer.get("user") == "carol", f"({status} {body[:200]!r})")
    status, _, body = call(aport, "PUT", "/admin/v1/users/carol/block?realm=" + urllib.parse.quote(ISSUER, safe=""),
                           admin, b'{"type":"traffic","reason":"token services test"}')
    check("an admin blocks the IdP's carol (?realm=): 200", status == 200, f"({status} {body[:300]!r})")
    exchanges_before, backend_before = len(ledger.exchanges), len(ledger.backend)
    results = [device("idp:carol", path)[:3] for path in ("/jwtb/Orders?blocked=1", "/tx/Orders?blocked=1", "/ute/Orders?blocked=1")]
    check("carol's next calls (JWT bearer, token exchange) are refused: 403 TRAFFIC_BLOCKED",
          all(s == 403 and h.get("x-message-code") == "TRAFFIC_BLOCKED" for s, h, _ in results),
          f"({[(s, h.get('x-message-code'), b[:150]) for s, h, b in results]})")
    check("... neither a token service nor the back end sees anything of them",
          len(ledger.exchanges) == exchanges_before and len(ledger.backend) == backend_before,
          f"({len(ledger.exchanges) - exchanges_before} exchanges, {len(ledger.backend) - backend_before} back-end requests)")
    results = [device(user, path) for user, path in (("alice", "/s4/Orders?after-block=1"), ("idp:alice", "/jwtb/Orders?after-block=1"),
                                                     ("carol", "/s4/Orders?after-block=1"))]
    check("alice (both realms) and the users.json carol still get through as themselves",
          [(s, a.get("user")) for s, _, _, a in results] == [(200, "alice"), (200, "alice"), (200, "carol")],
          f"({[(s, b[:150]) for s, _, b, _ in results]})")
    check("midtier is still running", midtier.poll() is None)

    # --- 7. The log ---
    midtier.send_signal(signal.SIGTERM)
    try:
        midtier.wait(timeout=15)
    except subprocess.TimeoutExpired:
        midtier.kill()
    log.close()
    logged = open(log_path, "rb").read().decode(errors="replace")
    check(f"the log has debug lines ({logged.count(chr(10))} lines)", '"level":"debug"' in logged and "exchanging a token" in logged, "")
    known = {"the tokenServicePassword": [S4_PASSWORD], "the wrong tokenServicePassword": [WRONG_S4_PASSWORD],
             "a client secret": [CC_SECRET, CCB_SECRET, JWT_SECRET, UTE_SECRET, TX_SECRET, ccbad["clientSecret"]],
             "the .p12 password": [P12_PASSWORD], "the signing key": pem_body(keys.signing_key),
             "a client certificate's key": pem_body(keys.client_pem_key) + pem_body(keys.client_p12_key),
             "the Basic credentials": [base64.b64encode(f"MOBILE_OAUTH:{S4_PASSWORD}".encode()).decode(),
                                       base64.b64encode(f"ccb-client:{CCB_SECRET}".encode()).decode()],
             "an access token": list(ledger.tokens),
             "a user's JWT": [part for token in JWTS.values() for part in (token, token.rsplit(".", 1)[-1])],
             "an assertion": [needle for _, needle in assertion_parts([e for e in ledger.exchanges if e["form"].get("assertion")]) if needle]}
    basic_forms = known.pop("the Basic credentials")
    hits = {label: sum(needle in logged for needle in needles) for label, needles in known.items() if any(needle in logged for needle in needles)}
    check(f"the log holds none of: {', '.join(known)} ({len(ledger.tokens)} access tokens, {len(JWTS)} JWTs)", not hits, f"({hits})")
    lines = [line[:300] for line in logged.splitlines() if any(needle in line for needle in basic_forms)]
    check("the log holds no Basic credentials (base64 of MOBILE_OAUTH:tokenServicePassword, of ccb-client:clientSecret)", not lines,
          f"({len(lines)} lines: {lines[:2]})")
    check("the log holds no PRIVATE KEY", "PRIVATE KEY" not in logged.upper(), "")
    print(f"\n# {len(ledger.exchanges)} token requests, {len(ledger.backend)} back-end requests, {len(ledger.tls)} at the TLS server; "
          f"{time.monotonic() - started:.1f} s")
except Exception:
    import traceback
    check("the test ran to the end", False, "\n" + traceback.format_exc())
finally:
    kill_all(processes)
    for server in servers:
        server.shutdown()
    if os.environ.get("TOKENS_KEEP"):
        with open(os.path.join(work, "ledger.json"), "w") as f:
            json.dump({"exchanges": ledger.exchanges, "backend": ledger.backend, "tls": ledger.tls}, f, indent=1, default=str)
        print(f"# kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)

check.finish()
