#!/usr/bin/env python3
"""Lifecycle tests of the real `midtier` binary: durability under SIGKILL, state across
restarts, configuration reload by SIGHUP and by the admin API.

Usage: lifecycle.py PATH-TO-MIDTIER. Prints `lifecycle: N passed, M failed`; exits 1 on failure.
Standard library only; every HTTP call has a timeout and every process is killed at the end.
"""
import base64, json, os, random, shutil, signal, socket, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.request
from harness import Checks, free_port, wait_for, demo_config, kill_all, sandbox_command

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ADMIN_TOKEN = "lifecycle-admin-token-" + os.urandom(8).hex()
processes = []


check = Checks("lifecycle")


def call(method, url, body=None, headers=None, timeout=10):
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


ADMIN = {"Authorization": "Bearer " + ADMIN_TOKEN}


work = tempfile.mkdtemp(prefix="midtier-lifecycle-")
try:
    mport, aport, sport = free_port(), free_port(), free_port()
    admin_hash = subprocess.run([BIN, "hash-secret", "--cost", "10"], input=ADMIN_TOKEN + "\n", capture_output=True, text=True, check=True).stdout.strip()
    config = demo_config(REPO, work, mport, aport, adminTokenHashes=[admin_hash])
    destination_file = os.path.join(config, "destinations", "sf.json")
    destination = json.load(open(destination_file))
    destination["URL"] = f"http://127.0.0.1:{sport}"
    destination["tokenServiceURL"] = f"http://127.0.0.1:{sport}/oauth/token"
    json.dump(destination, open(destination_file, "w"))

    base, admin = f"http://127.0.0.1:{mport}", f"http://127.0.0.1:{aport}"
    processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(sport)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    log = open(os.path.join(work, "midtier.log"), "ab")

    def start_midtier():
        process = subprocess.Popen([BIN, "serve", "--config", config], cwd=REPO, stdout=log, stderr=log)
        processes.append(process)
        ok = wait_for(base + "/healthz") and wait_for(admin + "/healthz")
        return process, ok

    wait_for(f"http://127.0.0.1:{sport}/sandbox/stats")
    midtier, ok = start_midtier()
    check("midtier starts with an admin listener", ok)

    # Devices to change: 12 for alice, 12 for bob.
    registrations = []
    for user in ["alice", "bob"] * 12:
        status, headers, body = call("POST", base + "/odata/applications/v1/demo/Connections", b"{}", basic(user, f"{user}-demo-password"))
        registrations.append((user, json.loads(body)["d"]["ApplicationConnectionId"]))
    check("24 devices registered", len(registrations) == 24)

    # --- Durability: a stream of admin writes, SIGKILL in the middle, restart, check. ---
    final_states = {registration_id: "active" for _, registration_id in registrations}
    in_flight = {}          # id -> state of the one request without an answer (at most one)
    acknowledged = []       # (kind, target, value)
    user_blocks = {"alice": None, "bob": None}
    blocks_in_flight = {}
    stop = threading.Event()

    def writer():
        rng = random.Random(7)
        while not stop.is_set():
            if rng.random() < 0.2:
                user = rng.choice(["alice", "bob"])
                kind = rng.choice(["traffic", "registration", "all", None])
                blocks_in_flight[user] = kind
                try:
                    if kind is None:
                        status, _, _ = call("DELETE", f"{admin}/admin/v1/users/{user}/block", headers=ADMIN, timeout=3)
                        ok = status in (204, 404)
                    else:
                        status, _, _ = call("PUT", f"{admin}/admin/v1/users/{user}/block", {"type": kind, "reason": "stream"}, ADMIN, timeout=3)
                        ok = status == 200
                except Exception:
                    return  # the server died with this request in flight
                blocks_in_flight.pop(user, None)
                if ok:
                    user_blocks[user] = kind
                    acknowledged.append(("block", user, kind))
                continue
            _, registration_id = rng.choice(registrations)
            action = rng.choice(["lock", "unlock", "lock", "unlock", "wipe"])
            target = {"lock": "locked", "unlock": "active", "wipe": "wiped"}[action]
            in_flight[registration_id] = target
            try:
                status, _, _ = call("POST", f"{admin}/admin/v1/registrations/{registration_id}/{action}", headers=ADMIN, timeout=3)
            except Exception:
                return
            in_flight.pop(registration_id, None)
            if status == 200:
                final_states[registration_id] = target
                acknowledged.append(("registration", registration_id, target))
            elif status == 409:
                pass  # unlock or lock of a wiped registration: refused, nothing changed

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(1.5)
    midtier.send_signal(signal.SIGKILL)
    midtier.wait()
    stop.set()
    thread.join(timeout=10)
    check("the write stream was acknowledged many times before SIGKILL", len(acknowledged) >= 20, f"({len(acknowledged)} acknowledged)")

    midtier, ok = start_midtier()
    check("midtier restarts after SIGKILL", ok)
    lost = []
    for _, registration_id in registrations:
        status, _, body = call("GET", f"{admin}/admin/v1/registrations/{registration_id}", headers=ADMIN)
        state = json.loads(body)["state"] if status == 200 else None
        expected = {final_states[registration_id]}
        if registration_id in in_flight:
            expected.add(in_flight[registration_id])
        if state not in expected:
            lost.append((registration_id, state, expected))
    check(f"every acknowledged registration change survived SIGKILL ({len(acknowledged)} writes)", not lost, str(lost[:3]))
    for user, kind in user_blocks.items():
        status, _, body = call("GET", f"{admin}/admin/v1/users/{user}", headers=ADMIN)
        block = json.loads(body).get("block") if status == 200 else "?"
        actual = block["type"] if block else None
        allowed = {kind} | ({blocks_in_flight[user]} if user in blocks_in_flight else set())
        check(f"{user}'s acknowledged block state survived SIGKILL", actual in allowed, f"(found {actual}, expected one of {allowed})")

    # --- Restart: what an admin decided still holds for devices. ---
    call("DELETE", f"{admin}/admin/v1/users/alice/block", headers=ADMIN)
    call("DELETE", f"{admin}/admin/v1/users/bob/block", headers=ADMIN)
    status, headers, body = call("POST", base + "/odata/applications/v1/demo/Connections", b"{}", basic("alice", "alice-demo-password"))
    fresh = json.loads(body)["d"]["ApplicationConnectionId"]
    call("POST", f"{admin}/admin/v1/registrations/{fresh}/wipe", headers=ADMIN)
    call("PUT", f"{admin}/admin/v1/users/carol/block", {"type": "traffic", "reason": "restart test"}, ADMIN)
    status, _, body = call("POST", base + "/odata/applications/v1/demo/Connections", b"{}", basic("carol", "carol-demo-password"))
    carol = json.loads(body)["d"]["ApplicationConnectionId"]
    midtier.send_signal(signal.SIGTERM)
    midtier.wait(timeout=20)
    midtier, ok = start_midtier()
    status, headers, _ = call("GET", base + "/sf/odata/v2/User('100001')", headers={**basic("alice", "alice-demo-password"), "X-SMP-APPCID": fresh})
    check("after a restart a wiped registration is still wiped", status == 403 and headers.get("x-message-code") == "TRAFFIC_REG_WIPED", f"({status} {headers.get('x-message-code')})")
    status, headers, _ = call("GET", base + "/sf/odata/v2/User('100003')", headers={**basic("carol", "carol-demo-password"), "X-SMP-APPCID": carol})
    check("after a restart a blocked user is still blocked", status == 403 and headers.get("x-message-code") == "TRAFFIC_BLOCKED", f"({status} {headers.get('x-message-code')})")

    # --- Reload: a broken set keeps the old one; a good one takes over. ---
    users_file = os.path.join(config, "users.json")
    users = json.load(open(users_file))
    dave_hash = subprocess.run([BIN, "hash-secret", "--cost", "10"], input="dave-demo-password\n", capture_output=True, text=True, check=True).stdout.strip()
    open(users_file, "w").write("{ this is not json")
    status, _, body = call("POST", f"{admin}/admin/v1/config/reload", headers=ADMIN)
    problems = json.loads(body).get("problems", []) if body else []
    check("reload of a broken set answers 422 naming the file", status == 422 and any("users.json" in p for p in problems), f"({status} {problems})")
    status, _, _ = call("GET", base + "/sf/odata/v2/User('100002')", headers={**basic("bob", "bob-demo-password"), "X-SMP-APPCID": registrations[1][1]})
    def sighup_rejections():
        status, _, body = call("GET", f"{admin}/admin/v1/audit?limit=10000", headers=ADMIN)
        entries = json.loads(body)["entries"] if status == 200 else []
        return sum(1 for e in entries if e["actor"] == "system" and e["action"] == "config.reload" and e["detail"].startswith("rejected"))
    rejections = sighup_rejections()
    midtier.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while sighup_rejections() == rejections and time.time() < deadline:
        time.sleep(0.05)
    check("a broken SIGHUP reload is rejected (audited)", sighup_rejections() == rejections + 1)
    check("after a broken reload the old configuration still serves", wait_for(base + "/healthz") and call("GET", base + "/config/v1/demo")[0] == 200)
    status, _, _ = call("POST", base + "/odata/applications/v1/demo/Connections", b"{}", basic("bob", "bob-demo-password"))
    check("after a broken reload the old users still sign in", status == 201, f"({status})")
    users["users"].append({"id": "dave", "passwordHash": dave_hash, "attributes": {"sfUserId": "100003"}})
    json.dump(users, open(users_file, "w"))
    status, _, _ = call("POST", base + "/odata/applications/v1/demo/Connections", b"{}", basic("dave", "dave-demo-password"))
    check("a user added to the files is unknown before reload", status == 401, f"({status})")
    midtier.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline:
        status, _, _ = call("POST", base + "/odata/applications/v1/demo/Connections", b"{}", basic("dave", "dave-demo-password"))
        if status == 201:
            break
        time.sleep(0.1)
    check("SIGHUP reloads the files: the new user signs in", status == 201, f"({status})")
    status, _, body = call("POST", f"{admin}/admin/v1/config/reload", headers=ADMIN)
    check("reload by the admin API answers 200", status == 200 and json.loads(body).get("status") == "reloaded", f"({status})")
    status, _, body = call("GET", f"{admin}/admin/v1/audit", headers=ADMIN)
    actions = [(e["actor"], e["action"], e["detail"]) for e in json.loads(body)["entries"]]
    check("reloads are audited (SIGHUP as system, API as the admin)",
          any(a == "system" and act == "config.reload" for a, act, _ in actions) and any(a.startswith("admin#") and act == "config.reload" for a, act, _ in actions))
    log.flush()
    text = open(os.path.join(work, "midtier.log"), encoding="utf-8", errors="replace").read()
    check("the admin token never reaches the log", ADMIN_TOKEN not in text)
finally:
    kill_all(processes)
    shutil.rmtree(work, ignore_errors=True)

print()
check.finish()
