#!/usr/bin/env python3
"""Two Midtier instances on one PostgreSQL through PgBouncer in transaction mode
(docs/operations.md, "Prepared statements" and "Store deadlines"). Debian 12's PgBouncer
(1.18) does not keep prepared statements in this mode (later ones are told not to, with
`max_prepared_statements = 0`): each transaction may get another server connection. Here PgBouncer keeps two server connections and hands them out in turn
(`server_round_robin`), so a statement prepared in one transaction is missing in the next.

1. A runs with `prepared_statements=off` in its store URL, B with the default (on); both start
   (migrations, the change feed's LISTEN) through PgBouncer.
2. Registrations made through A serve through B, whose memory does not hold them (each first
   call reads the registration and its back-end session): every call 200, none 503. B says
   once in its log that a prepared statement was lost and sends them unnamed from then on; A
   never prepares one.
3. A block through B (a write: its statement bounds are set inside its transaction, which
   PgBouncer passes) answers 2xx; B and then A refuse the user (A learns of it through the
   change feed, which also reads the changes every second — a LISTEN through PgBouncer in
   transaction mode may hear nothing). The unblock likewise.
4. Neither log has an error or a server error ("prepared statement … does not exist").

Usage: pgbouncer.py PATH-TO-MIDTIER. Prints `pgbouncer: N passed, M failed`; exits 1 on failure.
"""
import json, os, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from harness import Checks, basic, call, demo_config, free_port, hash_secret, kill_all, sandbox_command, wait_for
from postgres import ThrowawayPostgres

BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else sys.exit("usage: pgbouncer.py PATH-TO-MIDTIER")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ADMIN_TOKEN = "pgbouncer-admin-" + os.urandom(8).hex()
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
check = Checks("pgbouncer")
PAYROLL = "/sf/odata/v2/EmployeePayrollRunResults?$format=json&$top=1"
USERS = [("alice", "alice-demo-password"), ("bob", "bob-demo-password"), ("carol", "carol-demo-password")]


def start_pgbouncer(pg):
    """PgBouncer on a free port in front of `pg`, transaction mode, two server connections
    used in turn; returns (process, port)."""
    version = subprocess.run([PGBOUNCER, "--version"], capture_output=True, text=True).stdout.split()[1]
    # From 1.21 PgBouncer can keep prepared statements in transaction mode, and from 1.24 does
    # by default: told not to here, as Debian 12's 1.18 cannot.
    keeps = tuple(int(part) for part in version.split(".")[:2]) >= (1, 21)
    folder = os.path.join(pg.folder, "pgbouncer")
    os.makedirs(folder)
    port = free_port()
    ini = os.path.join(folder, "pgbouncer.ini")
    with open(ini, "w") as f:
        f.write(f"[databases]\n{pg.database} = host=127.0.0.1 port={pg.port} dbname={pg.database} user={pg.user}\n"
                f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\nauth_type = any\n"
                "pool_mode = transaction\ndefault_pool_size = 2\nmin_pool_size = 2\nserver_round_robin = 1\n"
                f"max_client_conn = 200\nlogfile = {folder}/pgbouncer.log\n" + ("max_prepared_statements = 0\n" if keeps else ""))
    command = [PGBOUNCER, ini]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root
        subprocess.run(["chown", "-R", "postgres", folder], check=True)
        command = ["runuser", "-u", "postgres", "--"] + command
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if subprocess.run(["psql", f"postgres://{pg.user}@127.0.0.1:{port}/{pg.database}?sslmode=disable", "-Atqc", "SELECT 1"],
                          capture_output=True).returncode == 0:
            return process, port
        time.sleep(0.1)
    raise RuntimeError("PgBouncer did not start: " + open(f"{folder}/pgbouncer.log").read()[-1000:])


work = tempfile.mkdtemp(prefix="midtier-pgbouncer-")
processes = []
try:
    with ThrowawayPostgres() as pg:
        bouncer, bport = start_pgbouncer(pg)
        processes.append(bouncer)
        version = subprocess.run([PGBOUNCER, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        print(f"# {version}, transaction mode, 2 server connections in turn")
        sport = free_port()
        processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(sport)], cwd=REPO,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        token_hash = hash_secret(BIN, ADMIN_TOKEN)
        instances = []
        for name, parameters in [("A", "&prepared_statements=off"), ("B", "")]:
            folder = os.path.join(work, name)
            os.makedirs(folder)
            mport, aport = free_port(), free_port()
            config = demo_config(REPO, folder, mport, aport, adminTokenHashes=[token_hash],
                                 store=f"postgres://{pg.user}@127.0.0.1:{bport}/{pg.database}?sslmode=disable{parameters}")
            sf_path = os.path.join(config, "destinations", "sf.json")
            sf = json.load(open(sf_path))
            sf.update({"URL": f"http://127.0.0.1:{sport}", "tokenServiceURL": f"http://127.0.0.1:{sport}/oauth/token"})
            json.dump(sf, open(sf_path, "w"))
            log_path = os.path.join(folder, "midtier.log")
            log = open(log_path, "wb")
            processes.append(subprocess.Popen([BIN, "serve", "--config", config], cwd=REPO, stdout=log, stderr=log))
            instances.append({"name": name, "port": mport, "admin": aport, "log": log_path})
            # One after the other: the first migrates the schema.
            ready = wait_for(f"http://127.0.0.1:{aport}/readyz", 60)
            check(f"{name} starts through PgBouncer and is ready", ready, f"({open(log_path, 'rb').read()[-1500:]!r})")
        A, B = instances
        ADMIN = (("Authorization", "Bearer " + ADMIN_TOKEN), ("Content-Type", "application/json"))

        # --- 2. Registrations made through A, first called through B. ---
        devices = []
        for user, password in USERS:
            for _ in range(4):
                status, headers, body = call(A["port"], "POST", "/odata/applications/v1/demo/Connections",
                                             (("Authorization", basic(user, password)),), b"{}")
                if status == 201:
                    devices.append((user, (("Authorization", basic(user, password)), ("X-SMP-APPCID", headers.get("x-smp-appcid", "")))))
        check("12 registrations made through A (writes through PgBouncer)", len(devices) == 12, f"({len(devices)})")
        with ThreadPoolExecutor(max_workers=6) as pool:
            answers = list(pool.map(lambda device: call(B["port"], "GET", PAYROLL, device[1], timeout=60)[0], devices))
        check("each first call through B (the registration read from the store) answers 200", answers == [200] * len(devices),
              f"({answers})")
        answers = [call(B["port"], "GET", PAYROLL, device, timeout=60)[0] for _, device in devices[:4]]
        check("... and again, one at a time", answers == [200] * 4, f"({answers})")
        b_log = open(B["log"]).read()
        check("B says once that a prepared statement was lost, and goes on unnamed",
              b_log.count("PostgreSQL lost a prepared statement") == 1, f"({b_log.count('PostgreSQL lost a prepared statement')})")
        check("A, with prepared_statements=off, never prepares", "lost a prepared statement" not in open(A["log"]).read())

        # --- 3. A block through B, enforced on both. ---
        alice = [device for user, device in devices if user == "alice"][0]
        status, _, body = call(B["admin"], "PUT", "/admin/v1/users/alice/block", ADMIN, b'{"type":"all","reason":"pgbouncer"}', timeout=30)
        check("a block through B answers 2xx", 200 <= status < 300, f"({status} {body[:300]!r})")
        check("B refuses the blocked user at once", call(B["port"], "GET", PAYROLL, alice)[0] == 403)

        def eventually(condition, seconds=20):
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                if condition():
                    return True
                time.sleep(0.2)
            return False

        check("A refuses the blocked user too (the change feed through PgBouncer)",
              eventually(lambda: call(A["port"], "GET", PAYROLL, alice)[0] == 403))
        status, _, _ = call(B["admin"], "DELETE", "/admin/v1/users/alice/block", ADMIN, timeout=30)
        check("the unblock through B answers 2xx", 200 <= status < 300, f"({status})")
        check("A serves alice again", eventually(lambda: call(A["port"], "GET", PAYROLL, alice)[0] == 200))

        # --- 4. Nothing failed on the way. ---
        for instance in instances:
            text = open(instance["log"]).read()
            bad = [line for line in text.splitlines() if '"level":"error"' in line or '"level":"critical"' in line or "does not exist" in line]
            check(f"{instance['name']}'s log has no error and no missing statement", not bad, f"({bad[:3]})")
finally:
    kill_all(processes)
    shutil.rmtree(work, ignore_errors=True)
check.finish()
