#!/usr/bin/env python3
"""The measurements of `Benchmarks/instances.sh` (run by it, inside `Tests/e2e/postgres.py run`,
which provides a throwaway PostgreSQL as MIDTIER_TEST_POSTGRES). Starts instances A and B of
Midtier on that PostgreSQL with the benchmark configuration Benchmarks/setup.sh made, next to
its instance on SQLite, and prints:

- hot-path throughput (wrk, c=64) of the SQLite instance and of A, alternated twice;
- block-to-refused: `BLOCKS` times, a block made on A (PUT, keep-alive) and B called in a
  tight loop until it refuses the user; the time from A's acknowledgement to B's first refusal,
  p50/p99/max; then the unblock, until B serves again;
- the block storm (issue 38): `USERS` users (user0.., written into A's and B's users.json),
  each with one registration of app `demo` onboarded over HTTP on A and called once through B
  (so that B holds them in memory), are blocked on A at a steady pace of `USERS` per
  `BLOCK_SECONDS`, from 8 keep-alive connections (the admin token verified once before); for
  each, from A's 200, one of 32 threads calls B with that user's registration, again 5 ms after
  each 200, until it answers 403 TRAFFIC_BLOCKED. Prints the rate achieved and how late blocks
  left, A's answer time, the time from acknowledgement (and from the request) to refusal
  (p50/p99/max, how many over 1 s), the CPU seconds of A, B, PostgreSQL and this script
  meanwhile, the machine's load, and B's log lines about the change feed or worse than a
  notice; every block in storm-blocks.csv. Any answer of B but 200 or 403 TRAFFIC_BLOCKED is a
  failure. `--storm-only` skips the two measurements above; `--users 0` skips the storm.
"""
import argparse, base64, http.client, json, os, queue, shutil, statistics, subprocess, sys, threading, time

parser = argparse.ArgumentParser()
for name in ["bin", "bench", "config", "work", "out", "path"]:
    parser.add_argument(f"--{name}", required=True)
for name in ["duration", "blocks", "sqlite-port"]:
    parser.add_argument(f"--{name}", type=int, required=True)
parser.add_argument("--users", type=int, default=10_000, help="users of the block storm (0: no storm)")
parser.add_argument("--block-seconds", type=float, default=60, help="the storm sends its blocks over this many seconds")
parser.add_argument("--storm-only", action="store_true", help="only the block storm")
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


def quantiles(values):
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return f"p50 {pick(0.5) * 1000:.1f} ms, p99 {pick(0.99) * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"


def in_threads(count, work):
    """Runs `work(index)` in `count` threads and waits for them; raises the first failure."""
    failures = []

    def run(index):
        try:
            work(index)
        except BaseException as error:  # noqa: B036 (reported below)
            failures.append(error)

    threads = [threading.Thread(target=run, args=(index,), daemon=True) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def cpu_seconds(pid):
    """User and system CPU seconds of process `pid` so far (/proc/PID/stat), 0 if it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_pids():
    """The throwaway PostgreSQL's processes: the postmaster whose configuration names the
    store's port, and its children (the connections' backends, the writers)."""
    port = URL.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
                table[int(entry)] = (stat[stat.index("(") + 1:stat.rindex(")")], int(stat.rsplit(")", 1)[1].split()[1]))
            except (OSError, ValueError):
                pass
    for pid, (name, _) in table.items():
        if name != "postgres":
            continue
        try:
            arguments = open(f"/proc/{pid}/cmdline").read().split("\0")
            data = arguments[arguments.index("-D") + 1]
            if f"port = {port}" in open(os.path.join(data, "postgresql.conf")).read():
                return [pid] + [child for child, (_, parent) in table.items() if parent == pid]
        except (OSError, ValueError, IndexError):
            pass
    return []


def machine_busy():
    """(busy, total) jiffies of every core so far (/proc/stat)."""
    values = [int(value) for value in open("/proc/stat").readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


instances, processes = [], []
try:
    # The storm's users: users.json of A and B gets at least `USERS` of them (same form and
    # password as setup.sh's, bcrypt cost 4), the SQLite instance keeps setup.sh's.
    users_file = json.load(open(os.path.join(args.config, "users.json")))
    if len(users_file["users"]) < args.users:
        made = subprocess.run([args.bench, "make-users", "--count", str(args.users)], capture_output=True, text=True, check=True).stdout
        users_file = json.loads(made)
    for name in ["a", "b"]:
        config = os.path.join(args.work, f"config-{name}")
        shutil.copytree(args.config, config)
        json.dump(users_file, open(os.path.join(config, "users.json"), "w"))
        settings = json.load(open(os.path.join(config, "midtier.json")))
        mport, aport = free_port(), free_port()
        settings.update({"listen": f"127.0.0.1:{mport}", "adminListen": f"127.0.0.1:{aport}", "store": URL, "adminTokenHashes": [admin_hash]})
        json.dump(settings, open(os.path.join(config, "midtier.json"), "w"))
        log = open(os.path.join(args.out, f"midtier-{name}.log"), "wb")
        processes.append(subprocess.Popen([args.bin, "serve", "--config", config], stdout=log, stderr=log))
        instances.append({"port": mport, "admin": aport, "pid": processes[-1].pid, "log": log.name})
    A, B = instances
    for instance in instances:
        if not wait_for(f"http://127.0.0.1:{instance['admin']}/readyz", 60):
            sys.exit("an instance on PostgreSQL did not become ready; see midtier-*.log")

    def register(port, user, client=None):
        status, _, appcid, _ = (client or Client(port))("POST", "/odata/applications/v1/demo/Connections", {"Authorization": basic(user)}, b"{}")
        assert status == 201, f"registration of {user}: {status}"
        return appcid

    bearer = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
    print(f"machine: {os.cpu_count()} cores; PostgreSQL {subprocess.run(['psql', '--version'], capture_output=True, text=True).stdout.split()[2]}"
          f" on loopback (throwaway, fsync on)" + ("" if args.storm_only else f"; {args.duration}s per wrk run, c=64"))
    if not args.storm_only:
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

        print(f"hot path  SQLite {', '.join(f'{r:.0f}' for r in rates['sqlite'])} req/s, "
              f"PostgreSQL {', '.join(f'{r:.0f}' for r in rates['postgres'])} req/s: PostgreSQL / SQLite {pg_rate / sqlite_rate:.2f}")
        print(f"block on A to refused by B, {args.blocks} blocks: {quantiles(block_times)} (target: within 1 s)")
        print(f"unblock on A to served by B, {args.blocks} unblocks: {quantiles(unblock_times)}")
        print(f"({calls} calls to B while waiting)")
    # --- 3. The block storm: USERS blocks on A over BLOCK_SECONDS, each timed to B's refusal. ---
    if args.users > 0:
        users = [f"user{n}" for n in range(args.users)]
        appcids = [None] * args.users
        workers = 8

        # Registrations over HTTP on A, as devices onboard (8 keep-alive connections).
        def onboard(worker):
            client = Client(A["port"])
            for n in range(worker, args.users, workers):
                appcids[n] = register(A["port"], users[n], client)

        print(f"block storm: onboarding {args.users} users on A", file=sys.stderr, flush=True)
        started = time.monotonic()
        in_threads(workers, onboard)
        onboarded = time.monotonic() - started

        # Every user calls once through B: B holds their registration, that they are not
        # blocked, their credential and their token in memory.
        def warm(worker):
            client = Client(B["port"])
            for n in range(worker, args.users, workers):
                status, *_ = client("GET", args.path, {"Authorization": basic(users[n]), "X-SMP-APPCID": appcids[n]})
                assert status == 200, f"warm-up call of {users[n]} through B: {status}"

        print("block storm: warming B", file=sys.stderr, flush=True)
        started = time.monotonic()
        in_threads(workers, warm)
        warmed = time.monotonic() - started

        # Pollers call B again 5 ms after each 200 (a user's own calls are far rarer; a tight
        # loop of 32 threads would load B with the measurement itself when blocks queue up).
        senders, pollers, pause = 8, 32, 0.005
        interval = args.block_seconds / args.users
        body = json.dumps({"type": "traffic", "reason": "benchmark"}).encode()
        acknowledged = queue.Queue()
        lock = threading.Lock()
        next_block = [0]
        late, answered_by_a, enforced, from_request, waited, polls, failures = [], [], [], [], [], [], []
        # Per block: user, sent, acknowledged, refused by B (seconds from the storm's start; empty if never), calls to B.
        rows = []

        def send(_):
            client = Client(A["admin"])
            while True:
                with lock:
                    n = next_block[0]
                    next_block[0] += 1
                if n >= args.users:
                    return
                due = start + n * interval
                if due > time.monotonic():
                    time.sleep(due - time.monotonic())
                sent = time.monotonic()
                late.append(sent - due)
                try:
                    status, *_ = client("PUT", f"/admin/v1/users/{users[n]}/block", bearer, body)
                except (OSError, http.client.HTTPException) as error:
                    failures.append(f"block of {users[n]} on A: {error!r}")
                    client = Client(A["admin"])
                    continue
                ack = time.monotonic()
                answered_by_a.append(ack - sent)
                if status != 200:
                    failures.append(f"block of {users[n]} on A: {status}")
                    continue
                acknowledged.put((n, sent, ack))

        def poll(_):
            client = Client(B["port"])
            while True:
                item = acknowledged.get()
                if item is None:
                    return
                n, sent, ack = item
                headers = {"Authorization": basic(users[n]), "X-SMP-APPCID": appcids[n]}
                waited.append(time.monotonic() - ack)
                calls, refused = 0, None
                while True:
                    try:
                        status, code, _, _ = client("GET", args.path, headers)
                    except (OSError, http.client.HTTPException) as error:
                        failures.append(f"{users[n]} through B: {error!r}")
                        client = Client(B["port"])
                        break
                    calls += 1
                    answered = time.monotonic()
                    if status == 403 and code == "TRAFFIC_BLOCKED":
                        refused = answered
                        enforced.append(answered - ack)
                        from_request.append(answered - sent)
                        break
                    if status != 200:
                        failures.append(f"{users[n]} through B: {status} {code or ''}".strip())
                        break
                    if answered - ack > 30:
                        failures.append(f"{users[n]} still served by B 30 s after the block")
                        break
                    time.sleep(pause)
                polls.append(calls)
                rows.append((users[n], sent - start, ack - start, None if refused is None else refused - start, calls))

        # A verifies the admin token once (bcrypt, cost 10) and then remembers it for five
        # minutes: verified here, not by the storm's first eight blocks at once.
        status, *_ = Client(A["admin"])("GET", "/admin/v1/destinations", bearer)
        assert status == 200, f"admin call on A: {status}"
        poll_threads = [threading.Thread(target=poll, args=(index,), daemon=True) for index in range(pollers)]
        for thread in poll_threads:
            thread.start()
        log_offset = os.path.getsize(B["log"])
        pg = postgres_pids()
        cpu_before = {"A": cpu_seconds(A["pid"]), "B": cpu_seconds(B["pid"]), "PostgreSQL": sum(map(cpu_seconds, pg)),
                      "this script": sum(os.times()[:2])}
        busy_before, load_before = machine_busy(), os.getloadavg()
        print(f"block storm: blocking for {args.block_seconds:g} s", file=sys.stderr, flush=True)
        start = time.monotonic()
        in_threads(senders, send)
        sending = time.monotonic() - start
        for _ in poll_threads:
            acknowledged.put(None)
        for thread in poll_threads:
            thread.join()
        elapsed = time.monotonic() - start
        busy_after, load_after = machine_busy(), os.getloadavg()
        cpu_after = {"A": cpu_seconds(A["pid"]), "B": cpu_seconds(B["pid"]), "PostgreSQL": sum(map(cpu_seconds, pg)),
                     "this script": sum(os.times()[:2])}
        with open(os.path.join(args.out, "storm-blocks.csv"), "w") as raw:
            raw.write("user,sent_s,acknowledged_s,refused_by_b_s,calls_to_b\n")
            for user, sent, ack, refused, calls in sorted(rows, key=lambda row: row[1]):
                raw.write(f"{user},{sent:.4f},{ack:.4f},{'' if refused is None else f'{refused:.4f}'},{calls}\n")
        with open(B["log"], "rb") as log:
            log.seek(log_offset)
            b_lines = log.read().decode(errors="replace").splitlines()

        def noteworthy(line):
            try:
                entry = json.loads(line)
            except ValueError:
                return True
            message = str(entry.get("message", ""))
            return "change feed" in message or "changes were missed" in message or entry.get("level") in ("warning", "error", "critical")

        feed_lines = [line for line in b_lines if noteworthy(line)]

        blocked = len(waited)
        over = sum(1 for seconds in enforced if seconds > 1)
        busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
        print(f"block storm: {args.users} users with one registration each (onboarded over HTTP on A in {onboarded:.0f} s, "
              f"warmed through B in {warmed:.0f} s); {senders} connections to A's admin port, {pollers} polling B "
              f"(each call {pause * 1000:.0f} ms after the last 200)")
        print(f"  blocks acknowledged {blocked} of {args.users} in {sending:.1f} s: {blocked / sending:.1f}/s "
              f"(asked {args.users / args.block_seconds:.1f}/s)")
        print(f"  sent after the schedule by {quantiles(late)}; A answered each in {quantiles(answered_by_a) if answered_by_a else '-'}")
        if enforced:
            print(f"  block on A to refused by B: {quantiles(enforced)}; over 1 s: {over} (target: none)")
            print(f"  (from the block's request instead of its acknowledgement: {quantiles(from_request)}; "
                  f"over 1 s: {sum(1 for seconds in from_request if seconds > 1)})")
        if waited:
            print(f"  ack to B's first call: {quantiles(waited)}; calls to B per block: mean {statistics.mean(polls):.1f}, max {max(polls)}")
        print(f"  CPU seconds over the {elapsed:.0f} s: " + ", ".join(f"{name} {cpu_after[name] - cpu_before[name]:.1f}" for name in cpu_before)
              + f"; machine busy {busy * 100:.0f}% of {os.cpu_count()} cores; load {load_before[0]:.2f} before, {load_after[0]:.2f} after")
        print(f"  failures: {len(failures)}" + "".join(f"\n    {failure}" for failure in failures[:10]))
        print(f"  B's log meanwhile: {len(feed_lines)} lines about the change feed or worse than a notice"
              + "".join(f"\n    {line}" for line in feed_lines[:10]))
finally:
    kill_all(processes)
