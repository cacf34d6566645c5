#!/usr/bin/env python3
"""`make bench`'s push figures (docs/benchmarks.md, "Push notifications"): Midtier (the release
binary) sending to the stand-in APNs and FCM of Tests/e2e/standins/ on this machine.

- Fan-out: senders' calls to every registration of the app (50 registrations, half APNs, half
  FCM), many at once; deliveries per second from the first 202 to the last delivery the
  stand-ins logged.
- Latency: single notifications to one device, one after another; p50 and p95 from the 202 to
  the stand-in's log line.

It reuses push.py's set-up (stand-ins, configuration, devices). The stand-ins are Python
(hypercorn), so they may be the limit; the report says how busy each process was.
Usage: push_bench.py PATH-TO-MIDTIER [FAN_OUT_CALLS]
"""
import json, os, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(HERE, "..", "Tests", "e2e")
sys.path.insert(0, E2E)
FAN_OUT_CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 100
sys.argv = sys.argv[:2]
import push  # noqa: E402  (push.py reads the binary from sys.argv[1])
from push import StandIn, Midtier, make_config, hash_secret, ios_token, keys, free_port, kill_all  # noqa: E402

USERS, DEVICES_PER_USER = push.USERS[:10], 5


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    import tempfile, shutil
    work = tempfile.mkdtemp(prefix="midtier-push-bench-")
    try:
        apns, fcm, k, hashes = push.standins_and_secrets(work)
        assert apns.started and fcm.started, "the stand-ins did not start"
        apns_port, fcm_port = apns.port, fcm.port
        config, mport, aport = make_config(work, k, apns_port, fcm_port, hashes, logLevel="warning")
        m = Midtier("bench", config, mport, aport, os.path.join(work, "midtier.log"))
        assert m.start(), "midtier did not start"

        devices = []
        for user in USERS:
            for n in range(DEVICES_PER_USER):
                status, cid, _ = m.onboard(user, {"DeviceType": "iOS" if n % 2 == 0 else "Android", "DeviceId": f"{user}-{n}"})
                assert status == 201, status
                os_name, token = ("ios", ios_token()) if n % 2 == 0 else ("android", f"bench-{user}-{n}")
                assert m.set_token(user, cid, os_name, token)[0] in (200, 201)
                devices.append((user, cid))
        registrations = len(devices)

        # Fan-out: FAN_OUT_CALLS notifications to the whole app, 8 senders at once.
        expected = FAN_OUT_CALLS * registrations
        before = {name: cpu_seconds(p.pid) for name, p in (("midtier", m.process), ("apns", apns.process), ("fcm", fcm.process))}
        started = time.time()
        errors = []

        def sender(calls):
            for _ in range(calls):
                status, _, body = m.send("demo/notifications", {"alert": "benchmark", "badge": 1})
                if status != 202:
                    errors.append(status)
        threads = [threading.Thread(target=sender, args=(FAN_OUT_CALLS // 8 + (1 if i < FAN_OUT_CALLS % 8 else 0),)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        accepted = time.time() - started

        def delivered():
            return apns.stats()["delivered"] + fcm.stats()["delivered"]
        deadline = time.time() + 300
        while delivered() < expected and time.time() < deadline:
            time.sleep(0.2)
        last = max([e["time"] for e in apns.lines() + fcm.lines() if e.get("status") == 200] or [started])
        count = delivered()

        # Each (notification, device token) once: a copy would be a delivery made twice.
        def delivery_key(entry):
            payload = entry.get("payload") or ((entry.get("message") or {}).get("data") or {})
            return (payload.get("notificationId"), entry.get("token"))
        sends = [e for e in apns.lines() + fcm.lines() if e.get("kind") != "oauth"]
        delivered_ok = [e for e in sends if e.get("status") == 200]
        twice = len(delivered_ok) - len({delivery_key(e) for e in delivered_ok})
        refused_by_standins = len(sends) - len(delivered_ok)
        seconds = last - started
        cpu = {name: cpu_seconds(p.pid) - before[name] for name, p in (("midtier", m.process), ("apns", apns.process), ("fcm", fcm.process))}
        print(f"push fan-out: {FAN_OUT_CALLS} notifications x {registrations} registrations = {expected} deliveries; "
              f"{count} delivered in {seconds:.2f} s: {count / seconds:.0f} deliveries/s (target >= 1000); "
              f"all accepted in {accepted:.2f} s; {len(errors)} sends refused; {twice} delivered twice; "
              f"{refused_by_standins} answers other than 200")
        print(f"  CPU in that time: midtier {cpu['midtier']:.1f} s ({cpu['midtier'] / max(count, 1) * 1e6:.0f} us per delivery), "
              f"APNs stand-in {cpu['apns']:.1f} s, FCM stand-in {cpu['fcm']:.1f} s (of {seconds * 2:.1f} s on 2 cores)")

        # Latency: one notification at a time to one device.
        user, cid = devices[0]
        waits = []
        for _ in range(100):
            seen = apns.stats()["delivered"]
            sent = time.time()
            status, _, _ = m.send(f"demo/users/{user}/devices/{cid}/notifications", {"alert": "latency"})
            assert status == 202, status
            while apns.stats()["delivered"] == seen and time.time() < sent + 30:
                time.sleep(0.001)
            entry = apns.lines()[-1]
            waits.append((entry["time"] - sent) * 1000)
        waits.sort()
        print(f"push latency, send to delivered at the stand-in (one at a time, 100): p50 {waits[49]:.1f} ms, p95 {waits[94]:.1f} ms")
    finally:
        kill_all(push.processes)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
