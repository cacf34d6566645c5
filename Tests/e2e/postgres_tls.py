#!/usr/bin/env python3
"""Midtier's PostgreSQL store over TLS, against a throwaway server with `ssl = on` whose
`pg_hba.conf` lets Midtier's role in over TLS only (Tests/e2e/postgres.py), and the demo
configuration around it:

1. `sslmode=verify-full` with `sslrootcert` naming the server's CA: serves (ready, onboarding,
   a proxied call, the admin API), and the server sees the connections encrypted.
2. `sslmode=require` (encrypted, certificate not checked): serves.
3. `sslmode=disable`: the server refuses the plain connection; Midtier does not start and says
   why, without the password.
4. `sslmode=verify-full` with a CA that did not sign the server's certificate, and
   `sslmode=verify-full` to an address the certificate does not name: Midtier does not start
   and says the certificate is the problem.

Usage: postgres_tls.py PATH-TO-MIDTIER. Prints `postgres-tls: N passed, M failed`; exits 1 on
failure.
"""
import json, os, shutil, subprocess, sys, tempfile
import urllib.error, urllib.request
from harness import Checks, basic, demo_config, free_port, header, kill_all, wait_for, labelled, sandbox_command
from postgres import ThrowawayPostgres

BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else sys.exit("usage: postgres_tls.py PATH-TO-MIDTIER")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASSWORD = "tls-db-password-" + os.urandom(6).hex()
check = Checks("postgres-tls")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(port, method, path, headers=None, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=labelled(headers, body))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
        return 0, {}, str(error).encode()


def configure(work, name, url):
    """A demo configuration in work/name whose store is `url` (the password from a file)."""
    folder = os.path.join(work, name)
    os.makedirs(folder)
    mport, aport, sport = free_port(), free_port(), free_port()
    with open(os.path.join(folder, "db-password"), "w") as secret:
        secret.write(PASSWORD + "\n")
    config = demo_config(REPO, folder, mport, aport, store={"url": url, "password": {"file": os.path.join(folder, "db-password")}})
    sf_path = os.path.join(config, "destinations", "sf.json")
    sf = json.load(open(sf_path))
    sf.update({"URL": f"http://127.0.0.1:{sport}", "tokenServiceURL": f"http://127.0.0.1:{sport}/oauth/token"})
    json.dump(sf, open(sf_path, "w"))
    return {"config": config, "port": mport, "admin": aport, "sandbox": sport, "log": os.path.join(folder, "midtier.log")}


def refused(work, name, url, reason):
    """Starts Midtier on `url`, expecting it not to start; checks that it says why."""
    instance = configure(work, name, url)
    try:
        result = subprocess.run([BIN, "serve", "--config", instance["config"]], cwd=REPO, capture_output=True, text=True, timeout=60)
        output = result.stdout + result.stderr
        check(f"{name}: Midtier does not start", result.returncode != 0, f"(exit {result.returncode})")
        last = output.strip().splitlines()[-1] if output.strip() else ""
        check(f"{name}: its last line says why ({reason})", "not starting" in last and reason in last.lower(), f"({output[-600:]!r})")
        check(f"{name}: the password is not in what it says", PASSWORD not in output)
    except subprocess.TimeoutExpired:
        check(f"{name}: Midtier does not start", False, "(still running after 60 s)")


work = tempfile.mkdtemp(prefix="midtier-pg-tls-")
processes = []
try:
    with ThrowawayPostgres(ssl=True) as pg:
        pg.sql(f"ALTER ROLE {pg.user} PASSWORD '{PASSWORD}'")
        ca = os.path.join(pg.folder, "ca.crt")
        other_ca = os.path.join(pg.folder, "other-ca.crt")
        base = f"postgres://{pg.user}@127.0.0.1:{pg.port}/{pg.database}"
        by_name = f"postgres://{pg.user}@localhost:{pg.port}/{pg.database}"  # the name the certificate gives

        for name, url in [("verify-full", f"{by_name}?sslmode=verify-full&sslrootcert={ca}"), ("require", f"{base}?sslmode=require")]:
            instance = configure(work, name, url)
            processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(instance["sandbox"])], cwd=REPO,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            log = open(instance["log"], "wb")
            server = subprocess.Popen([BIN, "serve", "--config", instance["config"]], cwd=REPO, stdout=log, stderr=log)
            processes.append(server)
            ready = wait_for(f"http://127.0.0.1:{instance['admin']}/readyz", 30)
            check(f"{name}: Midtier starts on PostgreSQL over TLS and is ready", ready,
                  f"({open(instance['log'], 'rb').read()[-1500:]!r})")
            alice = basic("alice", "alice-demo-password")
            status, headers, _ = call(instance["port"], "POST", "/odata/applications/v1/demo/Connections", {"Authorization": alice}, b"{}")
            device = {"Authorization": alice, "X-SMP-APPCID": header(headers, "X-SMP-APPCID") or ""}
            check(f"{name}: a device onboards (a write over TLS)", status == 201, f"({status})")
            status, _, _ = call(instance["port"], "GET", "/sf/odata/v2/EmployeePayrollRunResults?$format=json&$top=1", device)
            check(f"{name}: a proxied call serves", status == 200, f"({status})")
            status, _, body = call(instance["admin"], "GET", "/readyz")
            check(f"{name}: /readyz stays 200", status == 200, f"({status} {body!r})")
            encrypted = pg.sql(f"SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                               f"WHERE a.usename = '{pg.user}'").strip()
            ssl_count, total = (int(n) for n in encrypted.split("|"))
            check(f"{name}: the server sees Midtier's connections encrypted", total > 0 and ssl_count == total, f"({encrypted})")
            server.terminate()
            server.wait(timeout=30)
            log.close()
            check(f"{name}: the password never reaches the log", PASSWORD not in open(instance["log"]).read())

        refused(work, "disable", f"{base}?sslmode=disable", "pg_hba.conf")
        refused(work, "verify-full-wrong-ca", f"{by_name}?sslmode=verify-full&sslrootcert={other_ca}", "certificate_verify_failed")
        # 127.0.0.1 is the same server, but not a name its certificate gives.
        refused(work, "verify-full-wrong-name", f"{base}?sslmode=verify-full&sslrootcert={ca}", "certificate")
finally:
    kill_all(processes)
    shutil.rmtree(work, ignore_errors=True)
check.finish()
