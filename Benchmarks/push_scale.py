#!/usr/bin/env python3
"""`make bench-scale`'s push figure (docs/benchmarks.md, "At enterprise size"): one notification
to a whole app of REGISTRATIONS registrations (200 000 by default, half APNs, half FCM tokens),
sent by Midtier (the release binary) to the stand-in APNs and FCM of Tests/e2e/standins/ on this
machine, as push_bench.py does with 50.

The store is filled before Midtier starts, through its bulk path (midtier-bench make-store
--half-android). Prints: how long the sender waited for its 202 and how large the answer was;
the outbox's drain (first delivery to last, deliveries per second, per-10-second progress);
Midtier's CPU per delivery and resident memory (before, after the 202, peak); the status call's
time at the end; deliveries made twice or answered other than 200.

Usage: push_scale.py PATH-TO-MIDTIER PATH-TO-MIDTIER-BENCH [REGISTRATIONS]
"""
import json, os, shutil, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "e2e"))
BENCH = sys.argv[2]
REGISTRATIONS = int(sys.argv[3]) if len(sys.argv) > 3 else 200_000
sys.argv = sys.argv[:2]
import push  # noqa: E402  (push.py reads the binary from sys.argv[1])
from push import StandIn, Midtier, make_config, hash_secret, keys, free_port, kill_all, call, basic  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) // 1024


def main():
    work = tempfile.mkdtemp(prefix="midtier-push-scale-")
    try:
        apns, fcm, k, hashes = push.standins_and_secrets(work)
        assert apns.started and fcm.started, "the stand-ins did not start"
        apns_port, fcm_port = apns.port, fcm.port
        config, mport, aport = make_config(work, k, apns_port, fcm_port, hashes, logLevel="warning")

        started = time.monotonic()
        subprocess.run([BENCH, "make-store", "--config", config, "--registrations", str(REGISTRATIONS), "--app", "demo",
                        "--user", "bench", "--half-android"], check=True, stdout=subprocess.DEVNULL)
        made = time.monotonic() - started
        m = Midtier("bench", config, mport, aport, os.path.join(work, "midtier.log"))
        assert m.start(), "midtier did not start: " + m.log_text()[:3000]
        pid = m.process.pid
        resident_before = memory(pid, "VmRSS")
        cpu_before = cpu_seconds(pid)

        sent = time.time()
        status, _, body = call("POST", f"{m.base}/mobileservices/push/v1/backend/applications/demo/notifications",
                               {"alert": "scale benchmark", "badge": 1}, {"Authorization": basic("wf", push.SENDER_PASSWORD)}, timeout=600)
        accepted = time.time() - sent
        assert status == 202, f"the send answered {status}: {body[:300]!r}"
        answer = json.loads(body)
        notification = answer["notificationId"]
        resident_accepted = memory(pid, "VmRSS")

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
        cpu = cpu_seconds(pid) - cpu_before
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

        print(f"push to a whole app of {REGISTRATIONS} registrations (half APNs, half FCM; store made in {made:.0f} s):")
        print(f"  accepted (202) in {accepted:.2f} s, an answer of {len(body) / 1e6:.1f} MB")
        print(f"  {len(ok)} delivered, from the send to the last delivery {last - sent:.1f} s, first to last {last - first:.1f} s: "
              f"{len(ok) / max(last - sent, 1e-9):.0f} deliveries/s from the send (target >= 1000)")
        print(f"  progress: " + ", ".join(f"{t:.0f} s {c}" for t, c in progress))
        print(f"  midtier CPU {cpu:.1f} s ({cpu / max(len(ok), 1) * 1e6:.0f} us per delivery); resident {resident_before} MiB before, "
              f"{resident_accepted} MiB after the 202, peak {memory(pid, 'VmHWM')} MiB, {memory(pid, 'VmRSS')} MiB at the end")
        print(f"  status call at the end: {status_code} in {status_ms:.0f} ms, {len(status_body) / 1e3:.0f} kB; "
              f"{twice} delivered twice, {len(lines) - len(ok)} answers other than 200")
    finally:
        kill_all(push.processes)
        if os.environ.get("KEEP"):
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
