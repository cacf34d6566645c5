#!/usr/bin/env python3
"""The admin API fuzzed with schemathesis against docs/admin-api.yaml, on the real binary.

Usage: Tests/e2e/admin_fuzz.py PATH-TO-MIDTIER [--max-examples N]

Starts the SuccessFactors sandbox and `midtier serve` on a copy of config/ (free ports, a fresh
SQLite store, an admin token whose bcrypt hash comes from `midtier hash-secret`, a users.json
user with a non-ASCII id, an identity provider's app so that a realm other than users.json
exists, APNs push for the demo app towards a port that refuses connections and a push sender),
onboards twelve devices so that the registration operations have something to find, and one
with an APNs token that a sender and the admin API send a notification to, so that the push
listing has deliveries to show, then runs `schemathesis run` on the
document with the admin token: generated valid and invalid path and query parameters, bodies
and headers (examples, coverage and fuzzing phases), and call sequences along the document's
`links` (stateful phase: registrations list → get, lock, unlock, wipe, delete; block → user →
unblock). Every check schemathesis has runs: no 5xx other than a documented 503, no status,
Content-Type, header or body outside the document, invalid requests refused, valid ones
accepted, no answer without the token, deleted things gone.

The run is bounded (a fixed number of examples per operation) and deterministic
(`--generation-deterministic`: no seed, no example database), so it generates the same
requests every time; it takes about half a minute, a minute or two on a busy machine. Prints schemathesis's report and `admin-fuzz: N passed, M failed`; exits 1 on
any failure, schemathesis's own included. Requires schemathesis 4.32.5 (scripts/install-deps.sh).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from base64 import b64encode

from harness import Checks, basic, demo_config, free_port, idp_key, kill_all, start_sandbox_and_midtier, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "standins"))
import keys  # noqa: E402  (Tests/e2e/standins/keys.py: the APNs key, made at test time)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCUMENT = os.path.join(REPO, "docs", "admin-api.yaml")
SCHEMATHESIS = "4.32.5"
ADMIN_TOKEN = "fuzz-admin-token-" + b64encode(os.urandom(18)).decode().replace("/", "_").replace("+", "-")
SENDER_PASSWORD = "fuzz-sender-" + os.urandom(12).hex()
ISSUER = "https://idp.fuzz.test/realms/corp"
JOSE = "Jos\u00e9"  # in users.json as NFC


def main():
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("binary")
    arguments.add_argument("--max-examples", type=int, default=100, help="test cases per operation (default 100)")
    options = arguments.parse_args()
    binary = os.path.abspath(options.binary)
    check = Checks("admin-fuzz")

    try:
        import schemathesis
        version = schemathesis.__version__
    except ImportError:
        version = None
    if not version == SCHEMATHESIS:
        check(f"schemathesis {SCHEMATHESIS} is installed (scripts/install-deps.sh)", False, f"(found {version})")
        check.finish()

    work = tempfile.mkdtemp(prefix="midtier-admin-fuzz-")
    processes = []
    try:
        run(binary, work, processes, check, options)
    except Exception as error:  # a crash of the test is a failure, never a pass
        check("the fuzz test ran to the end", False, f"({type(error).__name__}: {error})")
    finally:
        kill_all(processes)
        if check.failed:
            log = os.path.join(work, "midtier.log")
            if os.path.exists(log):
                print("# last lines of midtier.log:", *("#   " + line for line in open(log, errors="replace").read().splitlines()[-20:]), sep="\n")
        shutil.rmtree(work, ignore_errors=True)
    check.finish()


def run(binary, work, processes, check, options):
    mport, aport, sport = free_port(), free_port(), free_port()
    token_hash = subprocess.run([binary, "hash-secret", "--cost", "10"], input=ADMIN_TOKEN + "\n", capture_output=True, text=True,
                                timeout=60, check=True).stdout.strip()
    config = demo_config(REPO, work, mport, aport, adminTokenHashes=[token_hash])
    sf = os.path.join(config, "destinations", "sf.json")
    text = open(sf).read()
    open(sf, "w").write(text.replace("localhost:8081", f"127.0.0.1:{sport}"))
    _, jwks = idp_key(work)
    json.dump(jwks, open(os.path.join(work, "jwks.json"), "w"))
    json.dump({"authentication": {"type": "jwt", "issuer": ISSUER, "audience": "midtier", "jwks": {"file": os.path.join(work, "jwks.json")},
                                  "userClaim": "sub"}, "destinations": ["sf"]}, open(os.path.join(config, "apps", "corp.json"), "w"))
    users = json.load(open(os.path.join(config, "users.json")))
    users["users"].append({"id": JOSE, "passwordHash": token_hash, "attributes": {"sfUserId": "100004"}})
    json.dump(users, open(os.path.join(config, "users.json"), "w"), ensure_ascii=False)
    # Push for the demo app: APNs at a port bound and never listening while the test runs (every
    # attempt is refused; deliveries stay pending with a reason), and a sender.
    refusing = socket.socket()
    refusing.bind(("127.0.0.1", 0))
    push_keys = keys.generate(os.path.join(work, "push-keys"))
    demo_path = os.path.join(config, "apps", "demo.json")
    demo = json.load(open(demo_path))
    demo["push"] = {"apns": {"teamId": push_keys["team"], "keyId": push_keys["apns_key_id"], "key": {"file": push_keys["apns_p8"]},
                             "topic": "com.example.fuzz", "environment": "sandbox",
                             "endpoint": f"https://127.0.0.1:{refusing.getsockname()[1]}", "caFile": push_keys["ca"]}}
    json.dump(demo, open(demo_path, "w"))
    sender_hash = subprocess.run([binary, "hash-secret", "--cost", "10"], input=SENDER_PASSWORD + "\n", capture_output=True, text=True,
                                 timeout=60, check=True).stdout.strip()
    json.dump({"senders": [{"name": "erp", "passwordHash": sender_hash, "apps": ["demo"]}]},
              open(os.path.join(config, "push-senders.json"), "w"))
    checked = subprocess.run([binary, "check-config", "--config", config], cwd=REPO, capture_output=True, text=True, timeout=60)
    check("check-config accepts the fuzz test's configuration", checked.returncode == 0, checked.stdout[-500:] + checked.stderr[-500:])

    start_sandbox_and_midtier(binary, REPO, work, config, sport, processes)
    up = wait_for(f"http://127.0.0.1:{mport}/healthz") and wait_for(f"http://127.0.0.1:{aport}/healthz")
    check("midtier starts (listen and adminListen answer)", up)
    if not up:
        return

    # Devices to find, lock, wipe and delete: the registrations list feeds the stateful links.
    registrations = []
    for user, password in [("alice", "alice-demo-password"), ("bob", "bob-demo-password"), ("carol", "carol-demo-password")] * 4:
        request = urllib.request.Request(f"http://127.0.0.1:{mport}/odata/applications/v1/demo/Connections", method="POST",
                                         data=json.dumps({"DeviceType": "iOS", "DeviceModel": "iPhone15,2"}).encode(),
                                         headers={"Authorization": basic(user, password), "Content-Type": "application/json"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as answer:
            if answer.status == 201:
                registrations.append(answer.headers["X-SMP-APPCID"])
    check("twelve devices onboard (201)", len(registrations) == 12)

    # A phone with an APNs token, a sender's notification and a test notification to it.
    def post(url, body, authorization):
        request = urllib.request.Request(url, method="POST", data=json.dumps(body).encode(),
                                         headers={"Authorization": authorization, "Content-Type": "application/json"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as answer:
            return answer.status
    phone = {"DeviceType": "iOS", "DeviceModel": "iPhone15,2", "ApnsDeviceToken": os.urandom(32).hex()}
    sent = [post(f"http://127.0.0.1:{mport}/odata/applications/v1/demo/Connections", phone, basic("carol", "carol-demo-password")),
            post(f"http://127.0.0.1:{mport}/mobileservices/push/v1/backend/applications/demo/notifications/users",
                 {"users": ["carol"], "notification": {"alert": "payslip", "data": {"document": "4711"}}}, basic("erp", SENDER_PASSWORD)),
            post(f"http://127.0.0.1:{aport}/admin/v1/push/notifications", {"userId": "carol", "app": "demo", "alert": "test"},
                 f"Bearer {ADMIN_TOKEN}")]
    check("carol's phone onboards with an APNs token, a sender and the admin API send it a notification", sent == [201, 202, 201], str(sent))

    # Half of the generated users, apps and registration ids are real ones, so that the
    # operations reach existing things, not only 404s; the other half stays generated. Two
    # thirds of the registrations are left out of this, for the stateful phase's lists to
    # find after the earlier phases deleted the named ones.
    settings = os.path.join(work, "schemathesis.toml")
    with open(settings, "w") as toml:
        toml.write(f"""
[dictionaries.users]
values = {json.dumps(["alice", "bob", "carol", JOSE, "leaver"], ensure_ascii=False)}
[dictionaries.realms]
values = {json.dumps(["", ISSUER])}
[dictionaries.apps]
values = ["demo", "corp"]
[dictionaries.registrations]
values = {json.dumps(registrations[:4])}

[parameters]
"path.userId" = {{ dictionary = "users", probability = 0.5 }}
"query.user" = {{ dictionary = "users", probability = 0.5 }}
"query.realm" = {{ dictionary = "realms", probability = 0.5 }}
"query.app" = {{ dictionary = "apps", probability = 0.5 }}
"path.id" = {{ dictionary = "registrations", probability = 0.5 }}
""")

    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", settings, "run", DOCUMENT,
        "--url", f"http://127.0.0.1:{aport}",
        "--header", f"Authorization: Bearer {ADMIN_TOKEN}",
        "--checks", "all",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--max-examples", str(options.max_examples),
        "--generation-deterministic",
        "--request-timeout", "20",
        "--workers", "1",
        "--no-color",
    ]
    # No proxy from the environment: loopback only.
    environment = {key: value for key, value in os.environ.items() if not key.lower().endswith("_proxy")}
    fuzz = subprocess.run(command, cwd=work, env=environment, timeout=900)
    check("schemathesis finds no server error and no answer outside docs/admin-api.yaml", fuzz.returncode == 0,
          f"(schemathesis exited {fuzz.returncode}; its report is above)")
    # The server is still there afterwards.
    check("midtier still answers after the fuzzing", wait_for(f"http://127.0.0.1:{aport}/healthz", 10))


if __name__ == "__main__":
    main()
