#!/usr/bin/env python3
"""Contract test of the admin API: the running `midtier` answers exactly as docs/admin-api.yaml says.

Usage: Tests/e2e/admin_api_contract.py PATH-TO-MIDTIER-BINARY

Starts the SuccessFactors sandbox and `midtier serve` on a temporary copy of config/ (free ports
for listen and adminListen, a fresh SQLite store, admin tokens whose bcrypt hashes come from
`midtier hash-secret`, APNs push for the demo app towards a port that refuses connections, a
push sender), onboards devices as the README shows, then calls every operation of the
document, the error cases included. Every answer is checked against the document: the status
must be one the operation declares, the Content-Type one it declares for that status, the JSON
body must validate against the declared schema ($refs resolved), declared headers must be there,
and a request body or query value the document calls invalid must be refused with 400 (and a
valid one must not be). Behaviour the descriptions promise (blocks, locks, wipes, token purges,
reload keeping the old configuration, the audit trail) is checked through the device API, and
the push notifications listed against what a sender and the admin sent.

Prints `ok - ...` / `FAIL - ...` per check and `admin-api: N passed, M failed`; exits non-zero
on any failure. Every HTTP call has a timeout; the processes are stopped in any case.
"""
import http.client
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from base64 import b64encode
from pathlib import Path

import yaml
from harness import idp_key, sandbox_command

sys.path.insert(0, str(Path(__file__).resolve().parent / "standins"))
import keys  # noqa: E402  (Tests/e2e/standins/keys.py: the APNs key, made at test time)
from jsonschema import Draft202012Validator, FormatChecker
from openapi_spec_validator import validate as validate_openapi
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

REPO = Path(__file__).resolve().parents[2]
DOCUMENT = REPO / "docs" / "admin-api.yaml"
DOC_URI = "urn:midtier:admin-api"
TIMEOUT = 10  # seconds, for every HTTP call
METHODS = ("get", "put", "post", "delete", "patch")
ISSUER = "https://idp.contract.test/realms/corp"  # the realm of the contract test's JWT app
JOSE = "Jos\u00e9"  # in users.json as NFC; "Jose\u0301" (NFD) is canonically equivalent, other bytes

# What SPEC §7 and the router (Sources/AdminAPI/AdminRoutes.swift) serve; the document must
# list exactly these (plus the health endpoints the admin listener also serves).
EXPECTED_OPERATIONS = {
    ("GET", "/admin/v1/users/{userId}"),
    ("PUT", "/admin/v1/users/{userId}/block"),
    ("DELETE", "/admin/v1/users/{userId}/block"),
    ("GET", "/admin/v1/registrations"),
    ("GET", "/admin/v1/registrations/{id}"),
    ("DELETE", "/admin/v1/registrations/{id}"),
    ("POST", "/admin/v1/registrations/{id}/lock"),
    ("POST", "/admin/v1/registrations/{id}/unlock"),
    ("POST", "/admin/v1/registrations/{id}/wipe"),
    ("GET", "/admin/v1/destinations"),
    ("POST", "/admin/v1/config/reload"),
    ("DELETE", "/admin/v1/tokens/{userId}"),
    ("GET", "/admin/v1/audit"),
    ("GET", "/admin/v1/client-logs"),
    ("GET", "/admin/v1/client-usage"),
    ("GET", "/admin/v1/push/notifications"),
    ("POST", "/admin/v1/push/notifications"),
    ("GET", "/admin/v1/push/notifications/{id}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
}


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, condition, detail=""):
        if condition:
            self.passed += 1
            print(f"ok   - {name}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL - {name}" + (f"\n       {detail}" if detail else ""), flush=True)
        return condition


class Answer:
    def __init__(self, status, headers, data):
        self.status = status
        self.headers = headers  # lower-cased names
        self.data = data
        try:
            self.json = json.loads(data) if data else None
        except ValueError:
            self.json = None

    def excerpt(self):
        text = self.data.decode("utf-8", "replace")
        return text if len(text) <= 300 else text[:300] + "…"


def request(port, method, path, headers=None, body=None):
    """One HTTP call with a timeout; the path is sent exactly as given."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    finally:
        connection.close()


class Document:
    """docs/admin-api.yaml, with its operations and $ref resolution."""

    def __init__(self, path):
        self.raw = yaml.safe_load(path.read_text())
        self.registry = Registry().with_resource(DOC_URI, Resource.from_contents(self.raw, default_specification=DRAFT202012))
        self.operations = {}
        for template, item in self.raw["paths"].items():
            shared = item.get("parameters", [])
            for method in METHODS:
                if method in item:
                    operation = dict(item[method])
                    operation["parameters"] = [self.resolve(p) for p in shared + operation.get("parameters", [])]
                    self.operations[(method.upper(), template)] = operation
        self.patterns = [(template, re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "/?$"))
                         for template in self.raw["paths"]]

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            pointer = node["$ref"].lstrip("#/").split("/")
            node = self.raw
            for part in pointer:
                node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def template(self, path):
        for template, pattern in self.patterns:
            if pattern.match(path):
                return template
        return None

    def validator(self, schema):
        return Draft202012Validator(schema, registry=self.registry, format_checker=FormatChecker())

    def schema_errors(self, schema, instance):
        # Local $refs ("#/components/...") must resolve against the whole document.
        wrapped = {"$id": DOC_URI + "-instance", "$defs": {}, "allOf": [self.rebase(schema)]}
        return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in self.validator(wrapped).iter_errors(instance)]

    def rebase(self, schema):
        if isinstance(schema, dict):
            return {k: (DOC_URI + v if k == "$ref" and isinstance(v, str) and v.startswith("#") else self.rebase(v)) for k, v in schema.items()}
        if isinstance(schema, list):
            return [self.rebase(v) for v in schema]
        return schema


class Contract:
    def __init__(self, document, results, admin_port, token):
        self.doc = document
        self.results = results
        self.port = admin_port
        self.token = token
        self.seen = {}  # (METHOD, template) -> statuses answered with a valid token

    def call(self, label, method, path, expect, token="default", body=None, headers=None):
        """Calls the admin API and checks the answer against the document and `expect`."""
        headers = dict(headers or {})
        token = self.token if token == "default" else token
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        answer = request(self.port, method, path, headers, data)
        problems = self.problems(method, path, answer, data, authenticated=token == self.token)
        if expect is not None and answer.status != expect:
            problems.insert(0, f"expected {expect}, got {answer.status}")
        self.results.check(f"{method} {path} {label} → {expect if expect is not None else answer.status}", not problems,
                           "; ".join(problems) + f"\n       body: {answer.excerpt()}")
        return answer

    def problems(self, method, path, answer, body, authenticated):
        bare, _, query = path.partition("?")
        template = self.doc.template(bare)
        operation = self.doc.operations.get((method, template))
        if operation is None:
            return [f"{method} {bare} is not in the document"]
        if authenticated or operation.get("security") == []:
            self.seen.setdefault((method, template), set()).add(answer.status)
        problems = []
        responses = operation["responses"]
        declared = responses.get(str(answer.status))
        if declared is None:
            return [f"status {answer.status} is not declared (declared: {', '.join(sorted(responses))})"]
        declared = self.doc.resolve(declared)
        for name, header in (declared.get("headers") or {}).items():
            header = self.doc.resolve(header)
            value = answer.headers.get(name.lower())
            if value is None:
                if header.get("required"):
                    problems.append(f"header {name} is missing")
            elif "schema" in header:
                problems += [f"header {name}: {e}" for e in self.doc.schema_errors(header["schema"], value)]
        content = declared.get("content")
        if not content:
            if answer.data:
                problems.append("a body where the document declares none")
        else:
            media = answer.headers.get("content-type", "").split(";")[0].strip().lower()
            if media not in content:
                problems.append(f"Content-Type {answer.headers.get('content-type')!r} is not declared ({', '.join(content)})")
            elif answer.json is None and answer.data != b"null":
                problems.append("the body is not JSON")
            else:
                problems += self.doc.schema_errors(content[media]["schema"], answer.json)
        # Requests the document calls invalid must be refused with 400; valid ones must not be.
        invalid = self.invalid_request(operation, query, body, template, bare)
        if invalid and answer.status not in (400, 401, 413):
            problems.append(f"the document calls the request invalid ({invalid}) but the server answered {answer.status}")
        malformed_path = re.search(r"%(?![0-9A-Fa-f]{2})", bare) is not None
        if not invalid and answer.status == 400 and not malformed_path:
            problems.append("the document calls the request valid but the server answered 400")
        return problems

    def invalid_request(self, operation, query, body, template, bare):
        # Path parameters, percent-decoded as the server reads them.
        names = re.findall(r"\{([^}]+)\}", template)
        match = re.match("^" + re.sub(r"\\\{[^}]+\\\}", "([^/]+)", re.escape(template)) + "/?$", bare)
        segments = dict(zip(names, match.groups())) if match else {}
        for parameter in operation["parameters"]:
            if parameter.get("in") == "path" and parameter["name"] in segments:
                value = urllib.parse.unquote(segments[parameter["name"]])
                errors = self.doc.schema_errors(parameter["schema"], value)
                if errors:
                    return f"{parameter['name']}={value!r}: {errors[0]}"
        values = urllib.parse.parse_qs(query, keep_blank_values=True)
        for parameter in operation["parameters"]:
            if parameter.get("in") != "query" or parameter["name"] not in values:
                continue
            for value in values[parameter["name"]]:
                instance = value
                if self.doc.resolve(parameter["schema"]).get("type") == "integer":
                    try:
                        instance = int(value)
                    except ValueError:
                        return f"{parameter['name']}={value!r} is not an integer"
                errors = self.doc.schema_errors(parameter["schema"], instance)
                if errors:
                    return f"{parameter['name']}={value!r}: {errors[0]}"
        request_body = operation.get("requestBody")
        if request_body is not None:
            request_body = self.doc.resolve(request_body)
            if body is None:
                return "no body" if request_body.get("required") else ""
            try:
                instance = json.loads(body)
            except ValueError:
                return "the body is not JSON"
            errors = self.doc.schema_errors(request_body["content"]["application/json"]["schema"], instance)
            if errors:
                return errors[0]
        return ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, path, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if request(port, "GET", path).status < 500:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def hash_secret(binary, secret):
    out = subprocess.run([binary, "hash-secret", "--cost", "10"], input=secret + "\n", capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def main():
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    binary = str(Path(sys.argv[1]).resolve())
    results = Results()
    work = Path(tempfile.mkdtemp(prefix="midtier-admin-api-"))
    processes = []
    try:
        run(binary, work, processes, results)
    except Exception as error:  # a crash of the test is a failure, never a pass
        results.check("the contract test ran to the end", False, f"{type(error).__name__}: {error}")
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if results.failed:
            for log in ("midtier.log", "sandbox.log"):
                path = work / log
                if path.exists():
                    tail = path.read_text(errors="replace").splitlines()[-15:]
                    print(f"# last lines of {log}:", *("#   " + line for line in tail), sep="\n")
        shutil.rmtree(work, ignore_errors=True)
    print(f"admin-api: {results.passed} passed, {results.failed} failed")
    return 0 if results.failed == 0 else 1


def run(binary, work, processes, results):
    check = results.check

    # ---- The document itself.
    try:
        validate_openapi(yaml.safe_load(DOCUMENT.read_text()))
        check("docs/admin-api.yaml is a valid OpenAPI document", True)
    except Exception as error:
        check("docs/admin-api.yaml is a valid OpenAPI document", False, str(error)[:500])
    doc = Document(DOCUMENT)
    documented = set(doc.operations)
    check("the document lists exactly the operations the admin listener serves (SPEC §7, /healthz, /readyz)",
          documented == EXPECTED_OPERATIONS,
          f"missing: {sorted(EXPECTED_OPERATIONS - documented)}; not served: {sorted(documented - EXPECTED_OPERATIONS)}")
    schemes = doc.raw.get("components", {}).get("securitySchemes", {})
    bearer = {name for name, s in schemes.items() if s.get("type") == "http" and s.get("scheme", "").lower() == "bearer"}
    unprotected = [f"{m} {t}" for (m, t), op in sorted(doc.operations.items()) if t.startswith("/admin/")
                   and not any(set(requirement) & bearer for requirement in op.get("security", doc.raw.get("security", [])))]
    check("the document requires the bearer token for every admin operation", bearer and not unprotected, f"unprotected: {unprotected}")

    # ---- A configuration of our own: free ports, a fresh store, two admin tokens (one in force).
    token1 = "adm1-" + secrets.token_urlsafe(24)
    token2 = "adm2-" + secrets.token_urlsafe(24)
    hash1, hash2 = hash_secret(binary, token1), hash_secret(binary, token2)
    config = work / "config"
    shutil.copytree(REPO / "config", config)
    listen, admin, sandbox = free_port(), free_port(), free_port()
    server_file = config / "midtier.json"

    def write_server(hashes, **extra):
        settings = json.loads((REPO / "config" / "midtier.json").read_text())
        # Room for the 250 registrations of one user that the listing's pages are walked over.
        settings.update(listen=f"127.0.0.1:{listen}", adminListen=f"127.0.0.1:{admin}", publicURL=f"http://localhost:{listen}",
                        store=f"sqlite:{work}/midtier.sqlite", adminTokenHashes=hashes, maxRegistrationsPerUser=300, **extra)
        server_file.write_text(json.dumps(settings, indent=2))

    write_server([hash1])
    sf = config / "destinations" / "sf.json"
    sf.write_text(sf.read_text().replace("localhost:8081", f"127.0.0.1:{sandbox}"))
    # A users.json user with a non-ASCII id, and an app whose users come from an identity provider.
    users = json.loads((config / "users.json").read_text())
    users["users"].append({"id": JOSE, "passwordHash": hash1, "attributes": {"sfUserId": "100004"}})
    (config / "users.json").write_text(json.dumps(users, ensure_ascii=False))
    _, jwks = idp_key(str(work))
    (work / "jwks.json").write_text(json.dumps(jwks))
    (config / "apps" / "corp.json").write_text(json.dumps({
        "authentication": {"type": "jwt", "issuer": ISSUER, "audience": "midtier", "jwks": {"file": str(work / "jwks.json")}, "userClaim": "sub"},
        "destinations": ["sf"]}))
    # Push for the demo app: APNs at a port that is bound and never listens while this test
    # runs (every attempt is refused: deliveries stay pending, with a reason), and a sender of
    # push-senders.json.
    refusing = socket.socket()
    refusing.bind(("127.0.0.1", 0))
    work_keys = keys.generate(str(work / "push-keys"))
    demo_file = config / "apps" / "demo.json"
    demo = json.loads(demo_file.read_text())
    demo["push"] = {"apns": {"teamId": work_keys["team"], "keyId": work_keys["apns_key_id"], "key": {"file": work_keys["apns_p8"]},
                             "topic": "com.example.contract", "environment": "sandbox",
                             "endpoint": f"https://127.0.0.1:{refusing.getsockname()[1]}", "caFile": work_keys["ca"]}}
    demo_file.write_text(json.dumps(demo, indent=2))
    sender_password = "sender-" + secrets.token_urlsafe(18)
    (config / "push-senders.json").write_text(json.dumps(
        {"senders": [{"name": "erp", "passwordHash": hash_secret(binary, sender_password), "apps": ["demo"]}]}))
    check("check-config accepts the contract test's configuration",
          subprocess.run([binary, "check-config", "--config", str(config)], cwd=REPO, capture_output=True, timeout=60).returncode == 0)

    with open(work / "sandbox.log", "wb") as log:
        processes.append(subprocess.Popen(sandbox_command(binary) + ["--port", str(sandbox)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
    with open(work / "midtier.log", "wb") as log:
        processes.append(subprocess.Popen([binary, "serve", "--config", str(config)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
    up = wait_for(sandbox, "/sandbox/stats") and wait_for(listen, "/healthz") and wait_for(admin, "/healthz")
    if not check("sandbox and midtier start (listen and adminListen answer)", up):
        return

    api = Contract(doc, results, admin, token1)
    call = api.call

    # ---- Devices, as the README onboards them.
    def onboard(user, password):
        answer = request(listen, "POST", "/odata/applications/v1/demo/Connections",
                         {"Authorization": "Basic " + b64encode(f"{user}:{password}".encode()).decode(), "Content-Type": "application/json"},
                         json.dumps({"DeviceType": "iOS", "DeviceModel": "iPhone15,2"}).encode())
        return answer.status, answer.headers.get("x-smp-appcid")

    def device_call(user, password, appcid):
        answer = request(listen, "GET", "/sf/odata/v2/User('100001')" if user == "alice" else "/sf/odata/v2/User('100002')",
                         {"Authorization": "Basic " + b64encode(f"{user}:{password}".encode()).decode(), "X-SMP-APPCID": appcid})
        return answer.status, answer.headers.get("x-message-code")

    alice = ("alice", "alice-demo-password")
    status, device_a = onboard(*alice)
    check("alice onboards device A (201)", status == 201 and device_a, f"status {status}")
    status, device_b = onboard(*alice)
    check("alice onboards device B (201)", status == 201 and device_b, f"status {status}")
    status, device_bob = onboard("bob", "bob-demo-password")
    check("bob onboards a device (201)", status == 201 and device_bob, f"status {status}")
    check("alice's device A reads through Midtier (200)", device_call(*alice, device_a) == (200, None))

    # ---- Health, without a token.
    call("(no token)", "GET", "/healthz", 200, token=None)
    call("(no token)", "GET", "/readyz", 200, token=None)

    # ---- Every documented admin operation exists and wants a token: without one, 401 (a route
    # that did not exist would answer the router's 404 before any token check).
    concrete = {"{userId}": "alice", "{id}": device_a}

    def fill(template):
        for placeholder, value in concrete.items():
            template = template.replace(placeholder, urllib.parse.quote(value, safe=""))
        return template

    for method, template in sorted(doc.operations):
        if template.startswith("/admin/"):
            call("without a token", method, fill(template), 401, token=None)
    call("with a wrong token", "GET", "/admin/v1/destinations", 401, token="wrong-" + token1)
    call("with the token plus one character", "GET", "/admin/v1/destinations", 401, token=token1 + "x")
    call("with an empty bearer token", "GET", "/admin/v1/destinations", 401, token="")
    call("with Basic credentials", "GET", "/admin/v1/destinations", 401, token=None,
         headers={"Authorization": "Basic " + b64encode(f"admin:{token1}".encode()).decode()})
    call("with the second token, not (yet) in force", "GET", "/admin/v1/destinations", 401, token=token2)
    # RFC 7235 §2.1 / RFC 6750: the scheme name is case-insensitive.
    call("with the scheme written 'bearer' (case-insensitive, RFC 7235)", "GET", "/admin/v1/destinations", 200, token=None,
         headers={"Authorization": f"bearer {token1}"})

    # ---- Nothing undocumented: any other method on a documented path (QUERY too) answers
    # 405 with Allow naming the documented ones (RFC 9110), before the token is looked at (no
    # 401), with the error body.
    for template in doc.raw["paths"]:
        documented_methods = sorted(m for m, t in doc.operations if t == template)
        allowed = set(documented_methods)
        others = [m for m in ("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "TRACE", "QUERY") if m not in allowed]
        answers = {m: request(admin, m, fill(template)) for m in others}
        wrong = {m: (a.status, a.headers.get("allow"), (a.json or {}).get("error", {}).get("code") if m != "HEAD" else "-")
                 for m, a in answers.items()
                 if a.status != 405 or {v.strip() for v in a.headers.get("allow", "").split(",")} != allowed
                 or (m != "HEAD" and (doc.schema_errors({"$ref": "#/components/schemas/Error"}, a.json)
                                      or a.json["error"]["code"] != "METHOD_NOT_ALLOWED"))}
        check(f"{fill(template)}: undocumented methods answer 405, Allow: {', '.join(sorted(allowed))} ({', '.join(others)})",
              not wrong, f"answers: {wrong}")
    unknown = request(admin, "GET", "/admin/v1/nothing-here", {"Authorization": f"Bearer {token1}"})
    check("an unknown admin path answers 404 with the documented error body (code NOT_FOUND)",
          unknown.status == 404 and unknown.headers.get("content-type", "").startswith("application/json")
          and not doc.schema_errors({"$ref": "#/components/schemas/Error"}, unknown.json)
          and (unknown.json or {}).get("error", {}).get("code") == "NOT_FOUND",
          f"status {unknown.status}, Content-Type {unknown.headers.get('content-type')!r}, body {unknown.excerpt()!r}")

    # ---- Users and blocks.
    user = call("(known user with devices)", "GET", "/admin/v1/users/alice", 200).json or {}
    check("alice: known, not blocked, both devices listed",
          user.get("known") is True and user.get("block") is None
          and {device_a, device_b} <= {r.get("id") for r in user.get("registrations", [])})
    call("(unknown user)", "GET", "/admin/v1/users/nobody-at-all", 404)
    call("(malformed percent-encoding)", "GET", "/admin/v1/users/%zz", 400)

    block = "/admin/v1/users/alice/block"
    call("bad block type", "PUT", block, 400, body={"type": "everything", "reason": "x"})
    call("without a type", "PUT", block, 400, body={"reason": "x"})
    call("with an unknown member", "PUT", block, 400, body={"type": "all", "until": "tomorrow"})
    call("with reason null", "PUT", block, 400, body={"type": "all", "reason": None})
    call("with a reason of 1001 characters", "PUT", block, 400, body={"type": "all", "reason": "r" * 1001})
    call("with a body that is not JSON", "PUT", block, 400, body=b"type=all")
    call("with a JSON array", "PUT", block, 400, body=b'["all"]')
    call("with a body over 64 KiB", "PUT", block, 413, body=json.dumps({"type": "all", "reason": "r" * 70000}).encode())
    call("(malformed percent-encoding)", "PUT", "/admin/v1/users/%zz/block", 400, body={"type": "all"})

    purged = call("(alice has called sf)", "DELETE", "/admin/v1/tokens/alice", 200).json or {}
    check("purging alice's tokens drops the one she used", purged.get("purged", 0) >= 1 and purged.get("userId") == "alice", str(purged))
    check("after the purge alice still reads (a new token is exchanged)", device_call(*alice, device_a) == (200, None))

    blocked = call("type traffic", "PUT", block, 200, body={"type": "traffic", "reason": "phone reported stolen"}).json or {}
    check("the block answer names type, reason and the admin",
          blocked.get("block", {}).get("type") == "traffic" and blocked["block"].get("reason") == "phone reported stolen"
          and blocked["block"].get("by") == "admin#1", str(blocked))
    purged = call("(right after the block)", "DELETE", "/admin/v1/tokens/alice", 200).json or {}
    check("blocking dropped alice's cached tokens (nothing left to purge)", purged.get("purged") == 0, str(purged))
    check("traffic block: alice's next call is refused (403 TRAFFIC_BLOCKED)", device_call(*alice, device_a) == (403, "TRAFFIC_BLOCKED"))
    status, device_c = onboard(*alice)
    check("traffic block: onboarding still works (201)", status == 201, f"status {status}")
    user = call("(blocked)", "GET", "/admin/v1/users/alice", 200).json or {}
    check("the user shows the block", (user.get("block") or {}).get("type") == "traffic", str(user.get("block")))

    call("type registration (replaces the block)", "PUT", block, 200, body={"type": "registration"})
    check("registration block: onboarding is refused (403 REG_BLOCKED)", onboard(*alice)[0] == 403)
    check("registration block: existing devices work (200)", device_call(*alice, device_a) == (200, None))
    call("type all", "PUT", block, 200, body={"type": "all", "reason": ""})
    check("block all: calls are refused (403 TRAFFIC_REG_BLOCKED)", device_call(*alice, device_a) == (403, "TRAFFIC_REG_BLOCKED"))
    call("(lift the block)", "DELETE", block, 204)
    check("after the block is lifted alice reads again (200)", device_call(*alice, device_a) == (200, None))
    call("(not blocked)", "DELETE", block, 404)
    call("(malformed percent-encoding)", "DELETE", "/admin/v1/users/%zz/block", 400)

    # ---- Who can be blocked (docs/admin.md): a users.json id byte for byte; an IdP user also
    # before their first sign-in, in a realm an app names.
    check("alice's block answer says she has been seen (she owns registrations)", blocked.get("seen") is True, str(blocked))
    nfd, nfc = urllib.parse.quote("Jose\u0301"), urllib.parse.quote(JOSE)
    refused = call("(José in NFD; users.json has NFC)", "PUT", f"/admin/v1/users/{nfd}/block", 404, body={"type": "all", "reason": "left"})
    message = ((refused.json or {}).get("error") or {}).get("message", {}).get("value", "")
    check("the 404 names the id, says ids compare by bytes and points at the canonically equivalent users.json id",
          "Jose\u0301" in message and "exact bytes" in message and "Jos<U+00E9>" in message and "Jose<U+0301>" in message, message)
    jose = call("(José in NFC, after the NFD block)", "GET", f"/admin/v1/users/{nfc}", 200).json or {}
    check("the NFD block changed nothing: José is not blocked", jose.get("known") is True and jose.get("block") is None, str(jose))
    call("(José in NFD, not blocked)", "GET", f"/admin/v1/users/{nfd}", 404)
    jose = call("(José in NFC: in users.json, no device yet)", "PUT", f"/admin/v1/users/{nfc}/block", 200, body={"type": "all"}).json or {}
    check("José is blocked, not seen yet (no registration)", jose.get("userId") == JOSE and jose.get("seen") is False, str(jose))
    call("(José in NFC)", "DELETE", f"/admin/v1/users/{nfc}/block", 204)
    ghost = "/admin/v1/users/ghost%20user"
    refused = call("(an id users.json does not have)", "PUT", ghost + "/block", 404, body={"type": "all", "reason": "left the company"})
    message = ((refused.json or {}).get("error") or {}).get("message", {}).get("value", "")
    check("the 404 names the id and users.json", '"ghost user"' in message and "users.json" in message, message)
    call("(not blocked by the refused call)", "GET", ghost, 404)
    realm = "?realm=" + urllib.parse.quote(ISSUER, safe="")
    leaver = "/admin/v1/users/leaver"
    early = call("(an IdP user who never signed in)", "PUT", leaver + "/block" + realm, 200, body={"type": "all", "reason": "left the company"}).json or {}
    check("the IdP user's block is stored and the answer says they have not been seen",
          early.get("seen") is False and early.get("realm") == ISSUER and (early.get("block") or {}).get("type") == "all", str(early))
    user = call("(blocked before the first sign-in)", "GET", leaver + realm, 200).json or {}
    check("the blocked IdP user is found, known: false", user.get("known") is False and user.get("realm") == ISSUER, str(user))
    call("(blocked again: replaces the block)", "PUT", leaver + "/block" + realm, 200, body={"type": "traffic"})
    call("(the IdP user)", "DELETE", leaver + "/block" + realm, 204)
    call("(the IdP user, unblocked again)", "GET", leaver + realm, 404)
    other = "?realm=" + urllib.parse.quote(ISSUER + "/", safe="")
    refused = call("(a realm no app names: the issuer with a trailing slash)", "PUT", leaver + "/block" + other, 404, body={"type": "all"})
    message = ((refused.json or {}).get("error") or {}).get("message", {}).get("value", "")
    check("the 404 names the realm and the realms in force", f'"{ISSUER}/"' in message and f'"{ISSUER}"' in message, message)

    # ---- Registrations.
    everything = call("(all)", "GET", "/admin/v1/registrations", 200).json or {}
    ids = {r.get("id") for r in everything.get("registrations", [])}
    check("the list holds every registration", {device_a, device_b, device_c, device_bob} <= ids, str(ids))
    mine = call("filtered by user", "GET", "/admin/v1/registrations?user=alice", 200).json or {}
    check("user=alice lists alice's three and only hers",
          {r["id"] for r in mine.get("registrations", [])} == {device_a, device_b, device_c}
          and all(r["userId"] == "alice" for r in mine["registrations"]))
    call("filtered by app", "GET", "/admin/v1/registrations?app=demo", 200)
    nothing = call("filtered by an unknown app", "GET", "/admin/v1/registrations?app=no-such-app", 200).json or {}
    check("an unknown app lists nothing", nothing.get("registrations") == [])
    call("filtered by state", "GET", "/admin/v1/registrations?state=active&user=alice&app=demo", 200)
    call("with a bad state", "GET", "/admin/v1/registrations?state=deleted", 400)

    one = call("(exists)", "GET", f"/admin/v1/registrations/{device_a}", 200).json or {}
    check("the registration is alice's, active, app demo",
          one.get("id") == device_a and one.get("userId") == "alice" and one.get("state") == "active" and one.get("appId") == "demo", str(one))
    call("(unknown registration)", "GET", "/admin/v1/registrations/no-such-registration", 404)
    call("(malformed percent-encoding)", "GET", "/admin/v1/registrations/%zz", 400)

    def action(name, registration, expect, label):
        return call(label, "POST", f"/admin/v1/registrations/{registration}/{name}", expect).json or {}

    check("lock answers the registration, locked", action("lock", device_a, 200, "(active)").get("state") == "locked")
    check("a locked registration is refused (403 TRAFFIC_REG_LOCKED)", device_call(*alice, device_a) == (403, "TRAFFIC_REG_LOCKED"))
    check("locking again changes nothing", action("lock", device_a, 200, "(already locked)").get("state") == "locked")
    locked = call("filtered by state locked", "GET", "/admin/v1/registrations?state=locked", 200).json or {}
    check("state=locked lists exactly the locked one", [r["id"] for r in locked.get("registrations", [])] == [device_a])
    check("unlock answers the registration, active", action("unlock", device_a, 200, "(locked)").get("state") == "active")
    check("an unlocked registration calls again (200)", device_call(*alice, device_a) == (200, None))
    check("unlocking again changes nothing", action("unlock", device_a, 200, "(already active)").get("state") == "active")

    check("wipe answers the registration, wiped", action("wipe", device_b, 200, "(active)").get("state") == "wiped")
    check("a wiped registration is refused (403 TRAFFIC_REG_WIPED)", device_call(*alice, device_b) == (403, "TRAFFIC_REG_WIPED"))
    action("unlock", device_b, 409, "after wipe")
    action("lock", device_b, 409, "after wipe")
    check("wiping again changes nothing", action("wipe", device_b, 200, "(already wiped)").get("state") == "wiped")
    check("the wipe is for ever: still wiped, still refused",
          (call("(wiped)", "GET", f"/admin/v1/registrations/{device_b}", 200).json or {}).get("state") == "wiped"
          and device_call(*alice, device_b) == (403, "TRAFFIC_REG_WIPED"))
    for name in ("lock", "unlock", "wipe"):
        action(name, "no-such-registration", 404, "(unknown registration)")
        action(name, "%zz", 400, "(malformed percent-encoding)")

    call("(bob's)", "DELETE", f"/admin/v1/registrations/{device_bob}", 204)
    check("a deleted registration is unknown to its device (403)", device_call("bob", "bob-demo-password", device_bob)[0] == 403)
    call("(deleted)", "GET", f"/admin/v1/registrations/{device_bob}", 404)
    call("(deleted already)", "DELETE", f"/admin/v1/registrations/{device_bob}", 404)
    call("(malformed percent-encoding)", "DELETE", "/admin/v1/registrations/%zz", 400)

    own = request(listen, "DELETE", f"/odata/applications/v1/demo/Connections('{device_c}')",
                  {"Authorization": "Basic " + b64encode(b"alice:alice-demo-password").decode(), "X-SMP-APPCID": device_c})
    check("alice deletes her device C herself (self-service, for the audit trail)", 200 <= own.status < 300, f"status {own.status}")

    # ---- Text with a control character names nothing Midtier holds (docs/identity.md, "Stored
    # text"): a registration id is unknown, a user id, realm or filter a 400 naming the parameter.
    for method, path in [("GET", "/admin/v1/registrations/a%00b"), ("DELETE", "/admin/v1/registrations/a%00b"),
                         ("POST", "/admin/v1/registrations/a%00b/lock"), ("POST", "/admin/v1/registrations/a%00b/unlock"),
                         ("POST", "/admin/v1/registrations/a%00b/wipe"), ("GET", "/admin/v1/registrations/a%0Ab")]:
        call("(a registration id with a control character)", method, path, 404)
    for method, path, body, parameter in [
            ("GET", "/admin/v1/users/a%00b", None, "userId"), ("GET", "/admin/v1/users/alice?realm=x%00y", None, "realm"),
            ("GET", "/admin/v1/users/a%C2%85b", None, "userId"),
            ("PUT", "/admin/v1/users/a%00b/block", {"type": "all"}, "userId"),
            ("PUT", "/admin/v1/users/alice/block?realm=x%1By", {"type": "all"}, "realm"),
            ("DELETE", "/admin/v1/users/a%00b/block", None, "userId"), ("DELETE", "/admin/v1/users/alice/block?realm=x%7Fy", None, "realm"),
            ("DELETE", "/admin/v1/tokens/a%00b", None, "userId"), ("DELETE", "/admin/v1/tokens/alice?realm=x%00y", None, "realm"),
            ("GET", "/admin/v1/registrations?user=a%00b", None, "user"), ("GET", "/admin/v1/registrations?user=alice&realm=x%0Ay", None, "realm"),
            ("GET", "/admin/v1/registrations?app=de%00mo", None, "app")]:
        answer = call(f"({parameter} with a control character)", method, path, 400, body=body)
        message = ((answer.json or {}).get("error") or {}).get("message", {}).get("value")
        check(f"{method} {path}: the 400 names {parameter}", message == f"{parameter} contains control characters", str(message))
    check("alice was not blocked by a refused call", (call("(after the refused calls)", "GET", "/admin/v1/users/alice", 200).json or {})
          .get("block") is None)

    # ---- Destinations and tokens.
    listed = call("", "GET", "/admin/v1/destinations", 200).json or {}
    check("the shipped destination sf is listed as a SAML bearer destination",
          [(d.get("name"), d.get("authentication")) for d in listed.get("destinations", [])] == [("sf", "OAuth2SAMLBearerAssertion")], str(listed))
    check("destinations carry no key material", "BEGIN" not in json.dumps(listed) and "signingKey" not in json.dumps(listed))
    carol = call("(user who never called)", "DELETE", "/admin/v1/tokens/carol", 200).json or {}
    check("purging a user without tokens answers 0", carol == {"userId": "carol", "realm": "", "purged": 0}, str(carol))
    call("(malformed percent-encoding)", "DELETE", "/admin/v1/tokens/%zz", 400)

    # ---- Reload: a broken configuration changes nothing; a good one is put in force whole.
    users_file = config / "users.json"
    good_users = users_file.read_text()
    users_file.write_text('{"users": [')
    rejected = call("(users.json is not JSON)", "POST", "/admin/v1/config/reload", 422).json or {}
    check("the rejection is CONFIG_INVALID and names users.json",
          rejected.get("error", {}).get("code") == "CONFIG_INVALID" and any("users.json" in p for p in rejected.get("problems", [])), str(rejected))
    check("after a rejected reload admin calls still work", call("(after a rejected reload)", "GET", "/admin/v1/destinations", 200).status == 200)
    check("after a rejected reload alice (old users.json) still reads", device_call(*alice, device_a) == (200, None))
    users_file.write_text(good_users)
    demo_app = config / "apps" / "demo.json"
    good_demo = demo_app.read_text()
    demo_app.write_text(json.dumps({**json.loads(good_demo), "destinations": ["sf", "missing-destination"]}))
    write_server([hash1], colour="blue")
    rejected = call("(two problems)", "POST", "/admin/v1/config/reload", 422).json or {}
    problems = rejected.get("problems", [])
    check("every problem is listed as file: key: what",
          len(problems) >= 2 and any("midtier.json: colour" in p for p in problems) and any("demo.json: destinations[1]" in p for p in problems), str(problems))
    demo_app.write_text(good_demo)

    (config / "destinations" / "hr.json").write_text(json.dumps({
        "Name": "hr", "Type": "HTTP", "URL": f"http://127.0.0.1:{sandbox}/hr", "Authentication": "BasicAuthentication",
        "User": "technical-user", "Password": "hr-secret-password-4711", "timeout": 5000,
        "URL.headers.X-Tenant": "tenant-secret-value", "URL.queries.client": "client-secret-value"}))
    (config / "destinations" / "open.json").write_text(json.dumps({
        "Name": "open", "URL": f"http://127.0.0.1:{sandbox}/open", "Authentication": "NoAuthentication"}))
    write_server([hash1, hash2])
    reloaded = call("(good configuration, two more destinations, a second admin token)", "POST", "/admin/v1/config/reload", 200).json or {}
    check("the reload counts what is now in force", reloaded == {"status": "reloaded", "apps": 2, "destinations": 3, "users": 4}, str(reloaded))
    listed = call("(after the reload)", "GET", "/admin/v1/destinations", 200)
    by_name = {d.get("name"): d for d in (listed.json or {}).get("destinations", [])}
    check("the new destinations are listed, sorted, each with its own members",
          list(by_name) == ["hr", "open", "sf"] and by_name["hr"].get("user") == "technical-user"
          and by_name["hr"].get("headers") == ["X-Tenant"] and by_name["hr"].get("queries") == ["client"]
          and by_name["hr"].get("timeout") == 5000 and by_name["open"].get("authentication") == "NoAuthentication", str(by_name))
    check("no password, header or query value is shown",
          not any(s.encode() in listed.data for s in ("hr-secret-password-4711", "tenant-secret-value", "client-secret-value")))
    check("the reload dropped the cached tokens", (call("(after the reload)", "DELETE", "/admin/v1/tokens/alice", 200).json or {}).get("purged") == 0)
    call("with the second token, now in force", "DELETE", "/admin/v1/tokens/carol", 200, token=token2)
    write_server([hash2])
    call("(removes the first token) by the second admin", "POST", "/admin/v1/config/reload", 200, token=token2)
    call("with the first token, removed by the reload", "GET", "/admin/v1/destinations", 401)
    write_server([hash1])
    call("(restores the first token) by the second admin", "POST", "/admin/v1/config/reload", 200, token=token2)
    call("with the first token again", "GET", "/admin/v1/destinations", 200)

    # ---- The audit trail.
    trail = (call("(everything)", "GET", "/admin/v1/audit", 200).json or {}).get("entries", [])
    sequences = [e.get("sequence") for e in trail]
    check("audit entries come oldest first with increasing sequence numbers", sequences == sorted(set(sequences)) and len(sequences) > 0)

    def has(actor, action, target, detail=None):
        return any(e.get("actor") == actor and e.get("action") == action and e.get("target") == target
                   and (detail is None or e.get("detail") == detail) and e.get("source") == "127.0.0.1" for e in trail)

    expectations = [
        ("user:alice", "registration.create", device_a, None),
        ("admin#1", "user.block", "alice", "traffic: phone reported stolen"),
        ("admin#1", "user.block", f"leaver@{ISSUER}", "all: left the company"),
        ("admin#1", "user.block", JOSE, "all: "),
        ("admin#1", "user.unblock", "alice", None),
        ("admin#1", "registration.lock", device_a, None),
        ("admin#1", "registration.unlock", device_a, None),
        ("admin#1", "registration.wipe", device_b, None),
        ("admin#1", "registration.delete", device_bob, None),
        ("user:alice", "registration.delete", device_c, None),
        ("admin#1", "tokens.purge", "carol", "0 token(s)"),
        ("admin#2", "tokens.purge", "carol", "0 token(s)"),
        ("admin#2", "config.reload", str(config), "reloaded"),
    ]
    missing = [e for e in expectations if not has(*e)]
    check("the audit trail records who did what to what, from where", not missing, f"missing: {missing}")
    check("a rejected reload is audited, saying the old configuration stays",
          any(e.get("action") == "config.reload" and e.get("detail", "").startswith("rejected") for e in trail))
    check("refused changes leave no entry (no lock or unlock of the wiped registration)",
          not any(e.get("action") in ("registration.lock", "registration.unlock") and e.get("target") == device_b for e in trail))
    check("reads leave no entry", {e.get("action") for e in trail} <= {
        "registration.create", "registration.update", "registration.delete", "registration.lock", "registration.unlock",
        "registration.wipe", "user.block", "user.unblock", "tokens.purge", "config.reload"}, str({e.get("action") for e in trail}))

    first = (call("with limit=1", "GET", "/admin/v1/audit?limit=1", 200).json or {}).get("entries", [])
    check("limit=1 gives the oldest entry", [e.get("sequence") for e in first] == sequences[:1])
    call("with limit=10000", "GET", "/admin/v1/audit?limit=10000", 200)
    call("with limit=0", "GET", "/admin/v1/audit?limit=0", 400)
    call("with limit=10001", "GET", "/admin/v1/audit?limit=10001", 400)
    call("with limit=many", "GET", "/admin/v1/audit?limit=many", 400)
    future_ms = int(time.time() * 1000) + 3_600_000
    check("since in the future (milliseconds) gives nothing",
          (call("with since in milliseconds", "GET", f"/admin/v1/audit?since={future_ms}", 200).json or {}).get("entries") == [])
    check("since=0 gives everything",
          len((call("with since=0", "GET", "/admin/v1/audit?since=0", 200).json or {}).get("entries", [])) == len(trail))
    check("since as ISO 8601 in the past gives everything",
          len((call("with since as ISO 8601", "GET", "/admin/v1/audit?since=2000-01-01T00:00:00Z", 200).json or {}).get("entries", [])) == len(trail))
    check("since as ISO 8601 in the future gives nothing",
          (call("with since as ISO 8601 in the future", "GET", "/admin/v1/audit?since=2999-01-01T00:00:00Z", 200).json or {}).get("entries") == [])
    last_at = trail[-1]["at"] if trail else "2000-01-01T00:00:00Z"
    tail = (call("with since = the last entry's at", "GET", "/admin/v1/audit?since=" + urllib.parse.quote(last_at), 200).json or {}).get("entries", [])
    check("since is inclusive: the last entry comes again", tail and tail[-1].get("sequence") == sequences[-1])
    call("with since as a time with an offset", "GET", "/admin/v1/audit?since=" + urllib.parse.quote("2000-01-01T02:00:00+02:00"), 200)
    # The same instant at a -09:30 and a +18:45 offset, and a second later.
    from datetime import datetime, timedelta, timezone
    last = datetime.fromisoformat(last_at.replace("Z", "+00:00"))
    for offset in (timedelta(hours=-9, minutes=-30), timedelta(hours=18, minutes=45)):
        local = last.astimezone(timezone(offset))
        same = (call("with since = the last entry's at, at another offset", "GET", "/admin/v1/audit?since="
                     + urllib.parse.quote(local.isoformat(timespec="milliseconds")), 200).json or {}).get("entries", [])
        later = (call("with since a second after the last entry's at, at another offset", "GET", "/admin/v1/audit?since="
                      + urllib.parse.quote((local + timedelta(seconds=1)).isoformat(timespec="milliseconds")), 200).json or {}).get("entries", [])
        check(f"since at offset {local.isoformat()[-6:]} is the same instant: the last entry comes, a second later it does not",
              same and same[-1].get("sequence") == sequences[-1] and not any(e.get("sequence") == sequences[-1] for e in later),
              f"{[e.get('sequence') for e in same][-3:]} / {[e.get('sequence') for e in later][-3:]}")
    call("with since as a date only", "GET", "/admin/v1/audit?since=2020-01-01", 400)
    # The document's date-time as JSON Schema checks it (RFC 3339): any offset up to ±23:59, t
    # and z in lower case; no 30 February, no year 0, no leap second; no sign on milliseconds
    # (found by schemathesis).
    for since in ["2000-01-01T00:00:00+18:45", "2000-01-01T00:00:00-23:59", "2000-01-01t00:00:00z", "0839-05-15T19:53:17.123456+01:00",
                  "2000-02-29T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "-5", "0"]:
        call(f"with since={since}", "GET", "/admin/v1/audit?since=" + urllib.parse.quote(since), 200)
    for since in ["2020-02-30T00:00:00Z", "2100-02-29T00:00:00Z", "0000-01-01T00:00:00Z", "2000-01-01T24:00:00Z",
                  "2000-01-01T00:00:00+24:00", "2016-12-31T23:59:60Z", "2000-01-01T00:00:00.Z",
                  "2000-01-01T00:00:00", "2000-01-01 00:00:00Z", "+5", "1234567890123456789", " 5"]:
        call(f"with since={since}", "GET", "/admin/v1/audit?since=" + urllib.parse.quote(since), 400)
    call("with since=yesterday", "GET", "/admin/v1/audit?since=yesterday", 400)
    paged, after = [], 0
    for _ in range(len(trail) + 1):
        page = (call("paged with after", "GET", f"/admin/v1/audit?after={after}&limit=2", 200).json or {}).get("entries", [])
        if not page:
            break
        paged += [e.get("sequence") for e in page]
        after = page[-1].get("sequence")
    check("paging with after= (the last sequence seen) gives every entry once, in order", paged == sequences, f"{paged} vs {sequences}")
    check("after = the last sequence gives nothing",
          (call("with after = the last sequence", "GET", f"/admin/v1/audit?after={sequences[-1]}", 200).json or {}).get("entries") == [])
    for bad in ["-1", "x", "1.5", "99999999999999999999"]:
        call(f"with after={bad}", "GET", f"/admin/v1/audit?after={bad}", 400)

    # ---- Client logs and usage reports (this test's apps take no uploads: the pages are empty;
    # the filters and refusals are what is checked here, the listings in ClientUploadAdminTests).
    for path in ["/admin/v1/client-logs", "/admin/v1/client-usage"]:
        key = "entries" if path.endswith("logs") else "reports"
        page = call("(everything)", "GET", path, 200).json or {}
        check(f"{path}: an empty page has no next", page.get(key) == [] and page.get("next") is None, f"{page}")
        filters = "registration=" + urllib.parse.quote(device_a) + "&userId=alice&realm=&app=demo" \
            + "&from=2000-01-01T00:00:00Z&until=" + urllib.parse.quote("2999-01-01T00:00:00+01:00") + "&limit=500"
        call("with every filter", "GET", f"{path}?{filters}", 200)
        call("with a cursor", "GET", f"{path}?cursor=" + ("1700000000000.0.x" if key == "entries" else "1700000000000.x"), 200)
        call("with empty filters", "GET", f"{path}?registration=&userId=&from=&until=&cursor=", 200)
        for bad in ["limit=0", "limit=501", "limit=", "from=yesterday", "until=2025-02-30T00:00:00Z", "cursor=garbage",
                    "registration=a%00b", "userId=a%0Ab", "userId=alice&realm=x%7Fy", "app=" + "a" * 1001]:
            call(f"with {bad[:40]}", "GET", f"{path}?{bad}", 400)
    call("with level=WARN and text", "GET", "/admin/v1/client-logs?level=WARN&text=payroll", 200)
    call("with level=LOUD", "GET", "/admin/v1/client-logs?level=LOUD", 400)
    call("with text and a control character", "GET", "/admin/v1/client-logs?text=a%00b", 400)

    # ---- Push notifications: carol's phone holds an APNs token; a sender and the admin send to
    # her; the list shows both, newest first, with her phone's delivery and no token.
    apns_token = secrets.token_hex(32)
    onboarded = request(listen, "POST", "/odata/applications/v1/demo/Connections",
                        {"Authorization": "Basic " + b64encode(b"carol:carol-demo-password").decode(), "Content-Type": "application/json"},
                        json.dumps({"DeviceType": "iOS", "DeviceModel": "iPhone15,2", "ApnsDeviceToken": apns_token}).encode())
    device_carol = onboarded.headers.get("x-smp-appcid")
    check("carol onboards a phone with an APNs token (201)", onboarded.status == 201 and device_carol, f"status {onboarded.status}")
    sent_by_erp = {"alert": "Your payslip is ready", "data": {"document": "4711"}, "badge": 1}
    accepted = request(listen, "POST", "/mobileservices/push/v1/backend/applications/demo/notifications/users",
                       {"Authorization": "Basic " + b64encode(f"erp:{sender_password}".encode()).decode(), "Content-Type": "application/json"},
                       json.dumps({"users": ["carol"], "notification": sent_by_erp}).encode())
    erp_id = (accepted.json or {}).get("notificationId") if isinstance(accepted.json, dict) else None
    check("the sender erp sends carol a notification (202)", accepted.status == 202 and erp_id, f"{accepted.status} {accepted.excerpt()}")
    time.sleep(0.01)  # the admin's notification is the newer one (by the millisecond)
    test = call("(a test notification to carol)", "POST", "/admin/v1/push/notifications", 201,
                body={"userId": "carol", "app": "demo", "alert": "Test from the contract test"})
    sent = test.json if isinstance(test.json, dict) else {}
    test_id = sent.get("id")
    check("the test notification answers its Location, its sender console:admin#1 and carol's phone, pending",
          test_id and test.headers.get("location") == f"/admin/v1/push/notifications/{test_id}" and sent.get("sender") == "console:admin#1"
          and [(d.get("registration"), d.get("state")) for d in sent.get("deliveries", [])] == [(device_carol, "pending")]
          and sent.get("notification") == {"alert": "Test from the contract test"}, test.excerpt())

    def listed(label, query=""):
        return (call(label, "GET", "/admin/v1/push/notifications" + query, 200).json or {}).get("notifications", [])

    # The delivery worker tries APNs at once and is refused: wait until both have an attempt.
    deadline = time.monotonic() + 30
    notifications = listed("(everything)")
    while time.monotonic() < deadline and not all(d.get("attempts", 0) >= 1 for n in notifications for d in n.get("deliveries", [])):
        time.sleep(0.5)
        notifications = listed("(while the deliveries are tried)")
    check("the list holds the admin's and the sender's notification, newest first",
          [n.get("id") for n in notifications] == [test_id, erp_id], str([n.get("id") for n in notifications]))
    by_id = {n.get("id"): n for n in notifications}
    erp = by_id.get(erp_id, {})
    check("the sender's notification: app, sender, what it sent, carol's phone",
          erp.get("app") == "demo" and erp.get("sender") == "erp" and erp.get("notification") == sent_by_erp
          and erp.get("deliveryCount") == 1 and [d.get("registration") for d in erp.get("deliveries", [])] == [device_carol], str(erp))
    delivery = (erp.get("deliveries") or [{}])[0]
    check("APNs refused: the delivery is pending, tried, with a reason and when it is due again; the status QUEUED",
          erp.get("status") == "QUEUED" and delivery.get("state") == "pending" and delivery.get("attempts", 0) >= 1
          and delivery.get("provider") == "apns" and delivery.get("reason") and delivery.get("nextAttemptAt")
          and erp.get("deliveryStates") == {"pending": 1, "delivered": 0, "failed": 0, "skipped": 0}, str(erp))
    everything = call("(to look for the token)", "GET", "/admin/v1/push/notifications", 200)
    check("no answer holds the phone's APNs token or the sender's password",
          apns_token.encode() not in everything.data and apns_token.encode() not in test.data
          and sender_password.encode() not in everything.data)
    one = call("(the sender's)", "GET", f"/admin/v1/push/notifications/{erp_id}", 200).json or {}
    check("one notification is the list's", {k: one.get(k) for k in ("id", "app", "sender", "notification", "createdAt")}
          == {k: erp.get(k) for k in ("id", "app", "sender", "notification", "createdAt")}, str(one))
    call("(unknown)", "GET", "/admin/v1/push/notifications/00000000-0000-0000-0000-000000000000", 404)
    call("(a control character)", "GET", "/admin/v1/push/notifications/a%00b", 404)
    call("(malformed percent-encoding)", "GET", "/admin/v1/push/notifications/%zz", 400)
    # Its deliveries a page at a time (limit, after, deliveriesNext), the counts whole.
    paged = call("(the sender's, limit=1)", "GET", f"/admin/v1/push/notifications/{erp_id}?limit=1&after=", 200).json or {}
    check("limit=1 lists carol's one delivery, counts it and has no deliveriesNext",
          [d.get("registration") for d in paged.get("deliveries", [])] == [device_carol] and paged.get("deliveryCount") == 1
          and "deliveriesNext" not in paged, str(paged))
    beyond = call("(the sender's, after carol's)", "GET",
                  f"/admin/v1/push/notifications/{erp_id}?after=" + urllib.parse.quote(f"r1.{device_carol}"), 200).json or {}
    check("after the last delivery: none listed, still counted",
          beyond.get("deliveries") == [] and beyond.get("deliveryCount") == 1 and "deliveriesNext" not in beyond, str(beyond))
    for bad in ["limit=0", "limit=501", "limit=", "limit=x", "after=nonsense", "after=r1.", "after=r1.a%00b"]:
        answer = call(f"(the sender's) with {bad}", "GET", f"/admin/v1/push/notifications/{erp_id}?{bad}", 400)
        message = ((answer.json or {}).get("error") or {}).get("message", {}).get("value", "")
        check(f"the notification's 400 for {bad} names {bad.split('=')[0]}", message.startswith(bad.split("=")[0] + " "), message)
    check("app=demo lists both", [n.get("id") for n in listed("filtered by app", "?app=demo")] == [test_id, erp_id])
    check("app=corp (no push) lists none", listed("filtered by an app without push", "?app=corp") == [])
    check("app=Demo lists none (exact bytes)", listed("filtered by another spelling", "?app=Demo") == [])
    check("app= (empty) is no filter", len(listed("with an empty app", "?app=")) == 2)
    check("limit=1 gives the newest", [n.get("id") for n in listed("with limit=1", "?limit=1&app=demo")] == [test_id])
    listed("with limit=100", "?limit=100")
    for bad in ["limit=0", "limit=101", "limit=", "limit=many", "app=de%00mo", "app=de%C2%85mo"]:
        answer = call(f"with {bad}", "GET", f"/admin/v1/push/notifications?{bad}", 400)
        message = ((answer.json or {}).get("error") or {}).get("message", {}).get("value", "")
        check(f"the 400 for {bad} names {bad.split('=')[0]}", message.startswith(bad.split("=")[0] + " "), message)
    for label, body, status in [
            ("(an app without push)", {"userId": "carol", "app": "corp", "alert": "hi"}, 404),
            ("(an app not configured)", {"userId": "carol", "app": "nope", "alert": "hi"}, 404),
            ("(a user without a phone with a token)", {"userId": "alice", "app": "demo", "alert": "hi"}, 404),
            ("(another realm's carol)", {"userId": "carol", "realm": ISSUER, "app": "demo", "alert": "hi"}, 404),
            ("(an alert of 201 characters)", {"userId": "carol", "app": "demo", "alert": "x" * 201}, 400),
            ("(an alert with a line break)", {"userId": "carol", "app": "demo", "alert": "a\nb"}, 400),
            ("(an alert of white space)", {"userId": "carol", "app": "demo", "alert": " \u00a0 "}, 400),
            ("(without an alert)", {"userId": "carol", "app": "demo"}, 400),
            ("(an unknown member)", {"userId": "carol", "app": "demo", "alert": "hi", "title": "x"}, 400),
            ("(userId a number)", {"userId": 7, "app": "demo", "alert": "hi"}, 400),
            ("(a user id with a control character)", {"userId": "ca\u0000rol", "app": "demo", "alert": "hi"}, 400),
            ("(a body that is not JSON)", b"userId=carol", 400),
            ("(a body over 64 KiB)", json.dumps({"userId": "carol", "app": "demo", "alert": "x" * 70000}).encode(), 413)]:
        call(label, "POST", "/admin/v1/push/notifications", status, body=body)
    trail = (call("(after the push calls)", "GET", f"/admin/v1/audit?after={sequences[-1]}", 200).json or {}).get("entries", [])
    pushed = [e for e in trail if e.get("action") == "push.test"]
    check("the test notification is audited once (push.test by admin#1, carol the target, from 127.0.0.1); no refusal is",
          len(pushed) == 1 and pushed[0].get("actor") == "admin#1" and pushed[0].get("target") == "carol"
          and pushed[0].get("source") == "127.0.0.1" and test_id in pushed[0].get("detail", ""), str(pushed))
    check("the refused test notifications stored nothing", len(listed("(after the refusals)")) == 2)

    # ---- The registrations list a page at a time (docs/admin.md, "Listing registrations"):
    # bob onboards 250 devices; pages of 100 are 100, 100 and 50, each registration once, in the
    # order of the ids' bytes, `next` on every page but the last; the filters hold from page to page.
    before = (call("(bob's, before his devices)", "GET", "/admin/v1/registrations?user=bob&app=demo", 200).json or {})
    check("bob holds no registration before his 250 devices", before.get("registrations") == [] and "next" not in before, str(before))
    bobs = []
    for _ in range(250):
        status, appcid = onboard("bob", "bob-demo-password")
        if status == 201 and appcid:
            bobs.append(appcid)
    check("bob onboards 250 devices (201 each)", len(bobs) == 250, f"{len(bobs)} onboarded")
    sizes, walked, after = [], [], None
    while len(sizes) < 10:
        page = call(f"(bob's, page {len(sizes) + 1} of 100)", "GET",
                    "/admin/v1/registrations?user=bob&app=demo&state=active&limit=100" + (f"&after={urllib.parse.quote(after)}" if after else ""),
                    200).json or {}
        sizes.append(len(page.get("registrations", [])))
        walked += [r.get("id") for r in page.get("registrations", [])]
        after = page.get("next")
        if not after:
            break
    check("pages of 100 over 250 registrations are 100, 100, 50, and the last has no next", sizes == [100, 100, 50], str(sizes))
    check("the pages list each of bob's registrations once, in the order of their ids' bytes",
          walked == sorted(bobs, key=lambda i: i.encode()), f"{len(walked)} listed, {len(set(walked))} distinct")
    default = call("(no limit: 100)", "GET", "/admin/v1/registrations?user=bob", 200).json or {}
    check("without limit, a page is 100 and has a next", len(default.get("registrations", [])) == 100 and default.get("next"), str(len(default.get("registrations", []))))
    whole = call("(limit=1000)", "GET", "/admin/v1/registrations?user=bob&limit=1000", 200).json or {}
    check("limit=1000 holds all 250 and no next", len(whole.get("registrations", [])) == 250 and "next" not in whole)
    for bad in ["limit=0", "limit=1001", "limit=", "limit=ten", "limit=1.5", "after=garbage", "after=r1.", "after=r1.a%00b", "after=r9.x"]:
        answer = call(f"with {bad}", "GET", f"/admin/v1/registrations?user=bob&{bad}", 400)
        message = ((answer.json or {}).get("error") or {}).get("message", {}).get("value", "")
        check(f"the 400 for {bad} names {bad.split('=')[0]}", message.startswith(bad.split("=")[0] + " "), message)
    call("with an empty after (the first page)", "GET", "/admin/v1/registrations?user=bob&limit=1&after=", 200)
    # The push list's pages: the two notifications one at a time.
    first = call("(push, a page of 1)", "GET", "/admin/v1/push/notifications?app=demo&limit=1", 200).json or {}
    second = call("(push, the next page)", "GET", "/admin/v1/push/notifications?app=demo&limit=1&after="
                  + urllib.parse.quote(first.get("next") or ""), 200).json or {}
    check("the push list pages newest first: the admin's, then the sender's, then no next",
          [n.get("id") for n in first.get("notifications", [])] == [test_id] and first.get("next")
          and [n.get("id") for n in second.get("notifications", [])] == [erp_id] and "next" not in second, f"{first.get('next')} {second}")
    call("(push, a malformed after)", "GET", "/admin/v1/push/notifications?after=nonsense", 400)

    # ---- Every documented operation was exercised with a valid token and served (2xx).
    for key in sorted(doc.operations):
        statuses = api.seen.get(key, set())
        check(f"{key[0]} {key[1]} is served: answered 2xx to a valid call", any(200 <= s < 300 for s in statuses),
              f"answers seen: {sorted(statuses)}")
    for key in sorted(doc.operations):
        unexercised = sorted(set(doc.operations[key]["responses"]) - {str(s) for s in api.seen.get(key, set())} - {"401"})
        if unexercised:
            print(f"#    not provoked: {key[0]} {key[1]} {', '.join(unexercised)}")


if __name__ == "__main__":
    sys.exit(main())
