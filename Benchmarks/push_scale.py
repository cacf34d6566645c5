#!/usr/bin/env python3
"""`make bench-scale`'s push figure (docs/benchmarks.md, "At enterprise size"): one notification
to a whole app of REGISTRATIONS registrations (200 000 by default, half APNs, half FCM tokens),
sent by Midtier (the release binary) to the stand-in APNs and FCM of Tests/e2e/standins/ on this
machine, as push_bench.py does with 50.

The store is filled before Midtier starts, through its bulk path (midtier-bench make-store
--half-android). Prints: how long the sender waited for its 202 and how large the answer was;
the outbox's drain (first delivery to last, deliveries per second, per-10-second progress);
Midtier's CPU per delivery and resident memory (before, after the 202, peak); the status call's
time at the end; deliveries made twice or answered other than 200; and how long an admin's
block took while the drain ran (one `PUT /admin/v1/users/{id}/block` every half second, each of
another user: an admin must not wait for a push).

With STORE=postgres the store is a throwaway PostgreSQL (Tests/e2e/postgres.py); INSTANCES=2
then starts two instances on it, which drain the outbox together.

Usage: [STORE=postgres [INSTANCES=2]] push_scale.py PATH-TO-MIDTIER PATH-TO-MIDTIER-BENCH [REGISTRATIONS]
"""
import contextlib, json, os, shutil, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "e2e"))
BENCH = sys.argv[2]
REGISTRATIONS = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
sys.argv = sys.argv[:2]
import push  # noqa: E402  (push.py reads the binary from sys.argv[1])
from push import StandIn, Midtier, make_config, hash_secret, keys, free_port, kill_all, call, basic  # noqa: E402
from postgres import ThrowawayPostgres  # noqa: E402

STORE = os.environ.get("STORE", "sqlite")
INSTANCES = int(os.environ.get("INSTANCES", "1"))
# The users an admin blocks during the drain (one each half second: enough for 30 minutes).
PROBES = 3600


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) // 1024


class BlockProbe:
    """Blocks another user every half second through `m`'s admin API while running; the
    latencies, and the answers other than 204."""

    def __init__(self, m):
        self.m, self.latencies, self.failures = m, [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        n = 0
        while not self.stop.wait(0.5) and n < PROBES:
            n += 1
            started = time.monotonic()
            try:
                status, _, body = self.m.admin_call("PUT", f"/admin/v1/users/probe{n}/block", {"type": "all", "reason": "bench"})
            except Exception as error:  # a timeout: the admin waited 30 s
                status, body = 0, str(error).encode()
            self.latencies.append(time.monotonic() - started)
            if status not in (200, 204):
                self.failures.append((status, body[:200]))

    def summary(self):
        if not self.latencies:
            return "no block was made"
        ordered = sorted(self.latencies)
        return (f"{len(ordered)} blocks during the drain: p50 {ordered[len(ordered) // 2] * 1000:.0f} ms, "
                f"max {ordered[-1] * 1000:.0f} ms; {len(self.failures)} not 2xx {self.failures[:3]}")


def main():
    work = tempfile.mkdtemp(prefix="midtier-push-scale-")
    with contextlib.ExitStack() as stack:
        try:
            run(work, stack)
        finally:
            kill_all(push.processes)
            if os.environ.get("KEEP"):
                print(f"kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)


def run(work, stack):
    apns, fcm, k, hashes = push.standins_and_secrets(work)
    assert apns.started and fcm.started, "the stand-ins did not start"
    apns_port, fcm_port = apns.port, fcm.port
    store = {}
    if STORE == "postgres":
        store = {"store": {"url": stack.enter_context(ThrowawayPostgres()).url}}
    instances = []
    for n in range(INSTANCES):
        folder = os.path.join(work, f"i{n}")
        os.makedirs(folder)
        config, mport, aport = make_config(folder, k, apns_port, fcm_port, hashes, logLevel="warning", **store)
        users_path = os.path.join(config, "users.json")
        users = json.load(open(users_path))
        users["users"] += [{"id": f"probe{p}", "passwordHash": hashes["device"]} for p in range(1, PROBES + 1)]
        json.dump(users, open(users_path, "w"))
        instances.append(Midtier(f"bench{n}", config, mport, aport, os.path.join(folder, "midtier.log")))

    started = time.monotonic()
    subprocess.run([BENCH, "make-store", "--config", config, "--registrations", str(REGISTRATIONS), "--app", "demo",
                    "--user", "bench", "--half-android"], check=True, stdout=subprocess.DEVNULL)
    made = time.monotonic() - started
    for m in instances:
        assert m.start(), "midtier did not start: " + m.log_text()[:3000]
    m = instances[0]
    pids = [i.process.pid for i in instances]
    pid = pids[0]
    resident_before = memory(pid, "VmRSS")
    cpu_before = sum(cpu_seconds(p) for p in pids)

    sent = time.time()
    status, _, body = call("POST", f"{m.base}/mobileservices/push/v1/backend/applications/demo/notifications",
                           {"alert": "scale benchmark", "badge": 1}, {"Authorization": basic("wf", push.SENDER_PASSWORD)}, timeout=600)
    accepted = time.time() - sent
    assert status == 202, f"the send answered {status}: {body[:300]!r}"
    answer = json.loads(body)
    notification = answer["notificationId"]
    resident_accepted = memory(pid, "VmRSS")
    probe = BlockProbe(instances[-1])
    probe.thread.start()

    seen = [0]

    def delivered():
        # A stand-in too busy to answer its statistics within 2 s: the count seen last.
        counts = [apns.stats(), fcm.stats()]
        if all(counts):
            seen[0] = sum(c["delivered"] for c in counts)
        return seen[0]
    progress, deadline, last_report = [], time.time() + 1800, sent
    while time.time() < deadline:
        count = delivered()
        if count >= REGISTRATIONS:
            break
        if time.time() - last_report >= 10:
            progress.append((time.time() - sent, count))
            last_report = time.time()
        time.sleep(0.5)
    probe.stop.set()
    probe.thread.join()
    cpu = sum(cpu_seconds(p) for p in pids) - cpu_before
    lines = [e for e in apns.lines() + fcm.lines() if e.get("kind") != "oauth"]
    ok = [e for e in lines if e.get("status") == 200]
    first = min(e["time"] for e in ok) if ok else sent
    last = max(e["time"] for e in ok) if ok else sent

    def key(entry):
        payload = entry.get("payload") or ((entry.get("message") or {}).get("data") or {})
        return (payload.get("notificationId"), entry.get("token"))
    twice = len(ok) - len({key(e) for e in ok})

    status_started = time.time()
    status_code, _, status_body = call("GET", f"{m.base}/mobileservices/push/v1/backend/notifications/{notification}/status",
                                       None, {"Authorization": basic("wf", push.SENDER_PASSWORD)}, timeout=120)
    status_ms = (time.time() - status_started) * 1000

    print(f"push to a whole app of {REGISTRATIONS} registrations (half APNs, half FCM; {STORE}, {INSTANCES} instance(s); "
          f"store made in {made:.0f} s):")
    print(f"  accepted (202) in {accepted:.2f} s, an answer of {len(body) / 1e6:.1f} MB")
    print(f"  {len(ok)} delivered, from the send to the last delivery {last - sent:.1f} s, first to last {last - first:.1f} s: "
          f"{len(ok) / max(last - sent, 1e-9):.0f} deliveries/s from the send (target >= 1000)")
    print(f"  progress: " + ", ".join(f"{t:.0f} s {c}" for t, c in progress))
    print(f"  midtier CPU {cpu:.1f} s ({cpu / max(len(ok), 1) * 1e6:.0f} us per delivery); resident {resident_before} MiB before, "
          f"{resident_accepted} MiB after the 202, peak {memory(pid, 'VmHWM')} MiB, {memory(pid, 'VmRSS')} MiB at the end")
    print(f"  status call at the end: {status_code} in {status_ms:.0f} ms, {len(status_body) / 1e3:.0f} kB; "
          f"{twice} delivered twice, {len(lines) - len(ok)} answers other than 200")
    print(f"  admin: {probe.summary()}")


if __name__ == "__main__":
    main()
