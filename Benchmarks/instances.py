#!/usr/bin/env python3
"""The measurements of `Benchmarks/instances.sh` (run by it, inside `Tests/e2e/postgres.py run`,
which provides a throwaway PostgreSQL as MIDTIER_TEST_POSTGRES). Starts instances A and B of
Midtier on that PostgreSQL with the benchmark configuration Benchmarks/setup.sh made, next to
its instance on SQLite, and prints:

- hot-path throughput (wrk, c=64) of the SQLite instance and of A, alternated twice;
- block-to-refused: `BLOCKS` times, a block made on A (PUT, keep-alive) and B called in a
  tight loop until it refuses the user; the time from A's acknowledgement to B's first refusal,
  p50/p99/max; then the unblock, until B serves again.
"""
import argparse, base64, http.client, json, os, shutil, statistics, subprocess, sys, time

parser = argparse.ArgumentParser()
for name in ["bin", "config", "work", "out", "path"]:
    parser.add_argument(f"--{name}", required=True)
for name in ["duration", "blocks", "sqlite-port"]:
    parser.add_argument(f"--{name}", type=int, required=True)
args = parser.parse_args()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "e2e"))
from harness import free_port, kill_all, wait_for  # noqa: E402

URL = os.environ["MIDTIER_TEST_POSTGRES"]
TOKEN = "bench-admin-" + os.urandom(12).hex()
admin_hash = subprocess.run([args.bin, "hash-secret", "--cost", "10"], input=TOKEN + "\n", capture_output=True, text=True, check=True).stdout.strip()


def basic(user):
    return "Basic " + base64.b64encode(f"{user}:bench-password".encode()).decode()


class Client:
    """One keep-alive connection."""

    def __init__(self, port):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def __call__(self, method, path, headers, body=None):
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        return response.status, response.getheader("x-message-code"), response.getheader("X-SMP-APPCID"), response.read()


instances, processes = [], []
try:
    for name in ["a", "b"]:
        config = os.path.join(args.work, f"config-{name}")
        shutil.copytree(args.config, config)
        settings = json.load(open(os.path.join(config, "midtier.json")))
        mport, aport = free_port(), free_port()
        settings.update({"listen": f"127.0.0.1:{mport}", "adminListen": f"127.0.0.1:{aport}", "store": URL, "adminTokenHashes": [admin_hash]})
        json.dump(settings, open(os.path.join(config, "midtier.json"), "w"))
        log = open(os.path.join(args.out, f"midtier-{name}.log"), "wb")
        processes.append(subprocess.Popen([args.bin, "serve", "--config", config], stdout=log, stderr=log))
        instances.append({"port": mport, "admin": aport})
    A, B = instances
    for instance in instances:
        if not wait_for(f"http://127.0.0.1:{instance['admin']}/readyz", 60):
            sys.exit("an instance on PostgreSQL did not become ready; see midtier-*.log")

    def register(port, user):
        status, _, appcid, _ = Client(port)("POST", "/odata/applications/v1/demo/Connections", {"Authorization": basic(user)}, b"{}")
        assert status == 201, f"registration of {user}: {status}"
        return appcid

    sqlite_appcid = register(args.sqlite_port, "user3")
    pg_appcid = register(A["port"], "user3")
    for port, appcid in [(args.sqlite_port, sqlite_appcid), (A["port"], pg_appcid), (B["port"], pg_appcid)]:
        status, *_ = Client(port)("GET", args.path, {"Authorization": basic("user3"), "X-SMP-APPCID": appcid})
        assert status == 200, f"warm-up call: {status}"

    # --- 1. Hot path: SQLite and PostgreSQL instances, alternated. ---
    def wrk(name, port, appcid):
        result = subprocess.run(["wrk", "-c", "64", "-t", "2", "-d", f"{args.duration}s", "--latency",
                                 "-H", f"Authorization: {basic('user3')}", "-H", f"X-SMP-APPCID: {appcid}",
                                 f"http://127.0.0.1:{port}{args.path}"], capture_output=True, text=True, check=True)
        open(os.path.join(args.out, f"wrk-{name}.txt"), "w").write(result.stdout)
        rate = float(next(line.split()[1] for line in result.stdout.splitlines() if line.startswith("Requests/sec")))
        errors = [line for line in result.stdout.splitlines() if "Non-2xx" in line or "Socket errors" in line]
        if errors:
            sys.exit(f"wrk {name}: {errors}")
        return rate

    rates = {"sqlite": [], "postgres": []}
    for round_ in (1, 2):
        rates["sqlite"].append(wrk(f"sqlite-{round_}", args.sqlite_port, sqlite_appcid))
        rates["postgres"].append(wrk(f"postgres-{round_}", A["port"], pg_appcid))
    sqlite_rate, pg_rate = statistics.mean(rates["sqlite"]), statistics.mean(rates["postgres"])

    # --- 2. Block on A, refused by B. ---
    admin = Client(A["admin"])
    device = Client(B["port"])
    headers = {"Authorization": basic("user3"), "X-SMP-APPCID": pg_appcid}
    bearer = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
    block_times, unblock_times, calls = [], [], 0
    for _ in range(args.blocks):
        status, *_ = admin("PUT", "/admin/v1/users/user3/block", bearer, json.dumps({"type": "traffic", "reason": "benchmark"}).encode())
        acknowledged = time.monotonic()
        assert status == 200, f"block: {status}"
        while True:
            status, code, _, _ = device("GET", args.path, headers)
            calls += 1
            if status == 403 and code == "TRAFFIC_BLOCKED":
                break
            assert status == 200, f"while blocking: {status}"
            assert time.monotonic() - acknowledged < 30, "B never refused the blocked user"
        block_times.append(time.monotonic() - acknowledged)
        status, *_ = admin("DELETE", "/admin/v1/users/user3/block", bearer)
        acknowledged = time.monotonic()
        assert status == 204, f"unblock: {status}"
        while True:
            status, *_ = device("GET", args.path, headers)
            calls += 1
            if status == 200:
                break
            assert time.monotonic() - acknowledged < 30, "B never served the unblocked user again"
        unblock_times.append(time.monotonic() - acknowledged)

    def quantiles(values):
        ordered = sorted(values)
        pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
        return f"p50 {pick(0.5) * 1000:.1f} ms, p99 {pick(0.99) * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"

    print(f"machine: {os.cpu_count()} cores; PostgreSQL {subprocess.run(['psql', '--version'], capture_output=True, text=True).stdout.split()[2]}"
          f" on loopback (throwaway, fsync on); {args.duration}s per wrk run, c=64")
    print(f"hot path  SQLite {', '.join(f'{r:.0f}' for r in rates['sqlite'])} req/s, "
          f"PostgreSQL {', '.join(f'{r:.0f}' for r in rates['postgres'])} req/s: PostgreSQL / SQLite {pg_rate / sqlite_rate:.2f}")
    print(f"block on A to refused by B, {args.blocks} blocks: {quantiles(block_times)} (target: within 1 s)")
    print(f"unblock on A to served by B, {args.blocks} unblocks: {quantiles(unblock_times)}")
    print(f"({calls} calls to B while waiting)")
finally:
    kill_all(processes)
