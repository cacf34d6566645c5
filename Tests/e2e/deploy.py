#!/usr/bin/env python3
"""What an operator installs (deploy/; docs/operations.md, "Under systemd" and "On
Kubernetes"), checked offline with the real binary:

- the systemd unit: `systemd-analyze verify`, its exposure score (`systemd-analyze security
  --offline`), its credentials the ones the example configuration reads, and every system call
  Midtier makes (under strace, from start through the README's demo — onboarding, SAML bearer
  exchange, a proxied read — to the drain) allowed by the unit's SystemCallFilter;
- the readiness protocol (`Type=notify`): READY=1 only once both listeners answer, STOPPING=1
  on SIGTERM, then exit 0;
- the example configuration (deploy/config) and the Kubernetes ConfigMap's, each loaded by
  `midtier check-config` and `serve` with its secrets where the unit and the manifests put them;
- the Kubernetes manifests against the Kubernetes schemas (kubernetes-validate, strict), and a
  misspelt field refused by the same check.

Usage: deploy.py PATH-TO-MIDTIER. Prints `deploy: N passed, M failed`; exits 1 on failure.
"""
import json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time
import urllib.request

from harness import Checks, demo_config, free_port, hash_secret, kill_all, sandbox_command, wait_for

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
UNIT = os.path.join(REPO, "deploy", "systemd", "midtier.service")
MANIFESTS = os.path.join(REPO, "deploy", "kubernetes", "midtier.yaml")
CREDENTIALS = "/run/credentials/midtier.service"
# The exposure score systemd-analyze security gives the unit must stay "OK" (below 2.0 is
# "OK"; 1.2 when written).
MOST_EXPOSURE = 2.0

check = Checks("deploy")
processes = []


def unit_lines():
    return [line.strip() for line in open(UNIT) if line.strip() and not line.lstrip().startswith("#")]


def unit_values(key):
    return [line.split("=", 1)[1] for line in unit_lines() if line.startswith(key + "=")]


def materialize(files, work, ports):
    """Writes `files` ({relative path: text}) as a configuration folder in `work`, with the
    paths the unit and the manifests use moved into `work`, the listeners on `ports`, and the
    secrets generated; returns the folder."""
    root = os.path.join(work, "etc-midtier")
    credentials = os.path.join(work, "credentials")
    state = os.path.join(work, "state")
    for folder in (root, credentials, state):
        os.makedirs(folder, exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2", "-subj", "/CN=deploy test",
                    "-keyout", os.path.join(credentials, "saml-signing.key"), "-out", os.path.join(work, "saml-signing.crt")],
                   check=True, capture_output=True)
    with open(os.path.join(credentials, "session.key"), "w") as f:
        f.write(subprocess.run(["openssl", "rand", "-base64", "32"], check=True, capture_output=True, text=True).stdout)
    for relative, text in files.items():
        # Any other secret the files read (the PostgreSQL password) gets a value of its own.
        for secret in re.findall(re.escape(CREDENTIALS) + r"/([A-Za-z0-9._-]+)", text):
            if not os.path.exists(os.path.join(credentials, secret)):
                with open(os.path.join(credentials, secret), "w") as f:
                    f.write("deploy-test-" + os.urandom(8).hex() + "\n")
        text = text.replace(CREDENTIALS, credentials).replace("/var/lib/midtier", state).replace("/etc/midtier", root)
        text = text.replace("0.0.0.0:8080", f"127.0.0.1:{ports[0]}").replace("127.0.0.1:9090", f"127.0.0.1:{ports[1]}")
        text = text.replace("0.0.0.0:9090", f"127.0.0.1:{ports[1]}")
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    # The certificate that goes with the generated key (the files' own is a placeholder).
    shutil.copy(os.path.join(work, "saml-signing.crt"), os.path.join(root, "saml-signing.crt"))
    return root


def example_files():
    folder = os.path.join(REPO, "deploy", "config")
    files = {}
    for directory, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(directory, name)
            files[os.path.relpath(path, folder)] = open(path).read()
    return files


def manifest_documents():
    import yaml
    return [document for document in yaml.safe_load_all(open(MANIFESTS)) if document]


def configmap_files():
    """The configuration folder the Deployment mounts: the ConfigMap's keys at the paths its
    volume's items give."""
    documents = manifest_documents()
    data = next(d for d in documents if d["kind"] == "ConfigMap")["data"]
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    return {item["path"]: data[item["key"]] for item in volume["configMap"]["items"]}


# --- The systemd unit ------------------------------------------------------------------------------

def scenario_unit(work):
    if shutil.which("systemd-analyze") is None:
        check("systemd-analyze is installed (make deps installs systemd)", False)
        return
    # verify checks that ExecStart's binary exists: the built one stands in for /usr/local/bin/midtier.
    unit = os.path.join(work, "midtier.service")
    with open(unit, "w") as f:
        f.write(open(UNIT).read().replace("/usr/local/bin/midtier", BIN))
    result = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
    check("systemd-analyze verify accepts the unit (no unknown key, no bad value)",
          result.returncode == 0 and not result.stderr.strip(), f"({result.returncode} {result.stderr.strip()[:500]})")
    result = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", unit], capture_output=True, text=True)
    found = re.search(r"Overall exposure level for midtier\.service: ([0-9.]+) (\w+)", result.stdout)
    score = float(found.group(1)) if found else None
    print(f"  systemd-analyze security: exposure {found.group(1) + ' ' + found.group(2) if found else '?'}")
    check(f"the unit's exposure score is OK (below {MOST_EXPOSURE})", score is not None and score < MOST_EXPOSURE,
          f"({result.stdout[-300:]} {result.stderr[-300:]})")
    # A broken copy is refused by the same check: the test can fail.
    with open(unit, "w") as f:
        f.write(open(UNIT).read().replace("/usr/local/bin/midtier", BIN).replace("ProtectSystem=strict", "ProtectSystem=strikt"))
    result = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
    check("... and a misspelt value in a copy is reported by it", "strikt" in result.stderr, f"({result.stderr[:300]})")

    for key, wanted in [("Type", "notify"), ("Restart", "on-failure"), ("User", "midtier"), ("NoNewPrivileges", "yes"),
                        ("ProtectSystem", "strict"), ("PrivateTmp", "yes"), ("CapabilityBoundingSet", "")]:
        check(f"the unit sets {key}={wanted}", unit_values(key) == [wanted], f"({unit_values(key)})")
    stop = unit_values("TimeoutStopSec")
    check("TimeoutStopSec leaves the drain its time: a push attempt lasts up to 60 s (docs/operations.md)",
          len(stop) == 1 and stop[0].endswith("s") and int(stop[0][:-1]) > 60, f"({stop})")
    # Every secret the example configuration reads from the credentials folder is one the unit loads.
    loaded = {value.split(":", 1)[0] for value in unit_values("LoadCredential")}
    read = set()
    for text in example_files().values():
        read |= set(re.findall(re.escape(CREDENTIALS) + r"/([A-Za-z0-9._-]+)", text))
    check("every credential the example configuration reads is loaded by the unit (LoadCredential=)",
          read and read <= loaded, f"(read {sorted(read)}, loaded {sorted(loaded)})")
    secrets = set()
    for text in configmap_files().values():
        secrets |= set(re.findall(re.escape(CREDENTIALS) + r"/([A-Za-z0-9._-]+)", text))
    secret = next(d for d in manifest_documents() if d["kind"] == "Secret")
    check("every secret the Kubernetes configuration reads is a key of its Secret",
          secrets and secrets <= set(secret.get("stringData", {})), f"(read {sorted(secrets)}, Secret {sorted(secret.get('stringData', {}))})")


def allowed_system_calls():
    """The system calls the unit's SystemCallFilter lets through (its allow lists, minus its
    deny lists), expanded by systemd-analyze."""
    def expand(names):
        calls = set()
        for name in names:
            if name.startswith("@"):
                out = subprocess.run(["systemd-analyze", "syscall-filter", name], capture_output=True, text=True).stdout
                for line in out.splitlines():
                    line = line.strip()
                    if line and not line.startswith("#") and not line.startswith("@"):
                        calls.add(line)
                    elif line.startswith("@") and line != name:
                        calls |= expand([line])
            else:
                calls.add(name)
        return calls
    allowed, denied = set(), set()
    for value in unit_values("SystemCallFilter"):
        if value.startswith("~"):
            denied |= expand(value[1:].split())
        else:
            allowed |= expand(value.split())
    return allowed - denied


# --- Readiness and the example configuration, under strace ----------------------------------------

def receive_all(sock, until_text, seconds):
    """Datagrams received on `sock` until one holds `until_text` (or time runs out)."""
    received = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            received.append(sock.recv(4096).decode())
        except socket.timeout:
            break
        if until_text in received[-1]:
            break
    return received


def scenario_serve(work, name, files, under_strace):
    ports = (free_port(), free_port())
    folder = materialize(files, os.path.join(work, name), ports)
    admin_token = "deploy-admin-" + os.urandom(6).hex()
    settings_path = os.path.join(folder, "midtier.json")
    settings = json.load(open(settings_path))
    admin_hash = hash_secret(BIN, admin_token)
    given = settings.get("adminTokenHashes") or []
    if given and isinstance(given[0], dict) and "file" in given[0]:
        with open(given[0]["file"], "w") as f:     # the Secret's key, as the manifests mount it
            f.write(admin_hash + "\n")
    else:
        settings["adminTokenHashes"] = [admin_hash]
        json.dump(settings, open(settings_path, "w"))
    result = subprocess.run([BIN, "check-config", "--config", folder], capture_output=True, text=True)
    check(f"{name}: midtier check-config accepts it, with the secrets where they are mounted",
          result.returncode == 0, f"({result.stdout[-600:]} {result.stderr[-300:]})")
    if result.returncode != 0:
        return None
    if "postgres" in json.dumps(settings.get("store", "")):
        return None   # the Kubernetes configuration's store is a PostgreSQL server this test does not have

    notify_path = os.path.join(work, name + ".notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify_path)
    environment = dict(os.environ, NOTIFY_SOCKET=notify_path)
    trace = os.path.join(work, name + ".strace")
    command = [BIN, "serve", "--config", folder]
    if under_strace:
        command = ["strace", "-f", "-qq", "-c", "-U", "name", "-o", trace] + command
    log = open(os.path.join(work, name + ".log"), "wb")
    process = subprocess.Popen(command, cwd=os.path.join(work, name), env=environment, stdout=log, stderr=log)
    processes.append(process)
    messages = receive_all(sock, "READY=1", 120)
    ready = any("READY=1" in m for m in messages)
    answering = []
    for port in ports:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
                answering.append(response.status)
        except Exception as error:
            answering.append(str(error))
    check(f"{name}: READY=1 reaches NOTIFY_SOCKET, and then both listeners answer /readyz 200",
          ready and answering == [200, 200], f"({messages} {answering})")
    # Some work for the system call count: a sign-in refused, an admin call, a metric scrape.
    for url, headers in [(f"http://127.0.0.1:{ports[0]}/odata/applications/v1/hr/Connections", {"Authorization": "Basic bm9ib2R5Om5vcGU="}),
                         (f"http://127.0.0.1:{ports[1]}/admin/v1/destinations", {"Authorization": "Bearer " + admin_token}),
                         (f"http://127.0.0.1:{ports[1]}/metrics", {})]:
        try:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10).read()
        except Exception:
            pass
    # Under strace, Midtier is strace's child: the signal goes to it, as systemd sends it.
    midtier = process.pid
    if under_strace:
        children = open(f"/proc/{process.pid}/task/{process.pid}/children").read().split()
        midtier = int(children[0]) if children else process.pid
    os.kill(midtier, signal.SIGTERM)
    messages = receive_all(sock, "STOPPING=1", 60)
    try:
        code = process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        code = None
    check(f"{name}: SIGTERM: STOPPING=1, then exit 0", any("STOPPING=1" in m for m in messages) and code == 0, f"({messages} exit {code})")
    sock.close()
    return trace if under_strace else None


def scenario_demo_flow(work):
    """The README's demo under strace: onboarding, a SAML-signed token exchange at the sandbox,
    a proxied OData read, the drain; returns the strace count file."""
    mport, aport, sport = free_port(), free_port(), free_port()
    folder = os.path.join(work, "demo")
    os.makedirs(folder)
    config = demo_config(REPO, folder, mport, aport)
    # As the unit runs it: not as root (User=midtier; here `nobody`), so that what only root may
    # do fails here too (upstream connections once set SO_DEBUG, which only root may, and every
    # proxied call of a non-root Midtier answered 502).
    shutil.copytree(os.path.join(REPO, "certs"), os.path.join(folder, "certs"))
    os.chmod(work, 0o755)
    for directory, _, files in os.walk(folder):
        os.chown(directory, 65534, 65534)
        for name in files:
            os.chown(os.path.join(directory, name), 65534, 65534)
    destination = os.path.join(config, "destinations", "sf.json")
    settings = json.load(open(destination))
    settings["URL"], settings["tokenServiceURL"] = f"http://127.0.0.1:{sport}", f"http://127.0.0.1:{sport}/oauth/token"
    json.dump(settings, open(destination, "w"))
    processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(sport)], cwd=REPO, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    trace = os.path.join(work, "demo.strace")
    log = open(os.path.join(folder, "midtier.log"), "wb")
    process = subprocess.Popen(["strace", "-f", "-qq", "-c", "-U", "name", "-o", trace, "-u", "nobody", BIN, "serve", "--config", config],
                               cwd=folder, stdout=log, stderr=log)
    processes.append(process)
    base = f"http://127.0.0.1:{mport}"
    started = wait_for(base + "/healthz", 120) and wait_for(f"http://127.0.0.1:{sport}/", 60) is not None
    auth = "Basic " + __import__("base64").b64encode(b"alice:alice-demo-password").decode()
    status, cid, payroll = None, None, None
    try:
        request = urllib.request.Request(base + "/odata/applications/v1/demo/Connections", data=b'{"DeviceType":"iOS"}', method="POST",
                                         headers={"Authorization": auth, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            status, cid = response.status, response.headers.get("X-SMP-APPCID")
        request = urllib.request.Request(base + "/sf/odata/v2/EmployeePayrollRunResults?%24top=1&%24format=json",
                                         headers={"Authorization": auth, "X-SMP-APPCID": cid or ""})
        with urllib.request.urlopen(request, timeout=60) as response:
            payroll = response.status
    except Exception as error:
        payroll = str(error)
    check("the demo under strace, as an unprivileged user: onboarded (201) and read alice's payroll through SAML bearer (200)",
          started and status == 201 and payroll == 200, f"({started} {status} {payroll} {open(os.path.join(folder, 'midtier.log'), errors='replace').read()[-600:]})")
    children = open(f"/proc/{process.pid}/task/{process.pid}/children").read().split() if process.poll() is None else []
    if children:
        os.kill(int(children[0]), signal.SIGTERM)
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        pass
    return trace


def scenario_system_calls(traces):
    traces = [trace for trace in traces if trace and os.path.exists(trace)]
    if not traces:
        check("strace counted Midtier's system calls", False, "(no strace output)")
        return
    used = set()
    # `strace -c -U name`: a header, then one system call name a line.
    for trace in traces:
        for line in open(trace):
            name = line.strip()
            if re.fullmatch(r"[a-z_0-9]+", name) and name not in ("syscall", "total"):
                used.add(name)
    allowed = allowed_system_calls()
    # Calls made only because this test runs as root, which the unit never does (User=midtier).
    if os.geteuid() == 0:
        # SQLite gives a new journal the database file's owner only when it runs as root
        # (os_unix.c, robustFchown); as midtier it does not call it.
        used.discard("fchown")
    outside = sorted(used - allowed)
    print(f"  system calls Midtier made: {len(used)}; allowed by the unit's filter: {len(allowed)}")
    check("every system call Midtier made, start to drain, is allowed by the unit's SystemCallFilter",
          len(used) > 20 and not outside, f"(outside the filter: {outside}; {len(used)} used)")


# --- Kubernetes ----------------------------------------------------------------------------------

def scenario_manifests(work):
    result = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", MANIFESTS], capture_output=True, text=True)
    if result.returncode != 0 and "No module named" in result.stderr:
        result = subprocess.run(["kubernetes-validate", "--strict", "--quiet", MANIFESTS], capture_output=True, text=True)
    check("the Kubernetes manifests pass the Kubernetes schemas (kubernetes-validate --strict)", result.returncode == 0,
          f"({result.stdout[-600:]} {result.stderr[-600:]})")
    broken = os.path.join(work, "broken.yaml")
    with open(broken, "w") as f:
        f.write(open(MANIFESTS).read().replace("terminationGracePeriodSeconds", "terminationGracePeriodSecond"))
    result = subprocess.run(["kubernetes-validate", "--strict", "--quiet", broken], capture_output=True, text=True)
    check("... and a misspelt field in a copy is refused by the same check", result.returncode != 0, f"({result.stdout[-300:]})")

    documents = manifest_documents()
    kinds = sorted(d["kind"] for d in documents)
    check("the manifests hold a ConfigMap, a Secret, a Deployment, a Service, a PodDisruptionBudget and a NetworkPolicy",
          kinds == sorted(["ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"]), f"({kinds})")
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    check("the Deployment runs at least 2 replicas", deployment["spec"]["replicas"] >= 2)
    check("readiness on /readyz, liveness on /healthz",
          container["readinessProbe"]["httpGet"]["path"] == "/readyz" and container["livenessProbe"]["httpGet"]["path"] == "/healthz")
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    check("terminationGracePeriodSeconds covers the preStop pause and the 90 s drain",
          pod["terminationGracePeriodSeconds"] >= pause + 90, f"({pod['terminationGracePeriodSeconds']} {pause})")
    context = container["securityContext"]
    check("non-root, read-only root file system, no capabilities, no privilege escalation",
          pod["securityContext"]["runAsNonRoot"] and context["readOnlyRootFilesystem"] and context["capabilities"]["drop"] == ["ALL"]
          and context["allowPrivilegeEscalation"] is False)
    service = next(d for d in documents if d["kind"] == "Service")
    check("the Service exposes the device listener only, not the admin listener",
          [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
          and next(p for p in container["ports"] if p["name"] == "http")["containerPort"] == 8080)
    settings = json.loads(configmap_files()["midtier.json"])
    check("the Kubernetes configuration's store is PostgreSQL, its password from the Secret",
          settings["store"]["url"].startswith("postgres://") and CREDENTIALS in settings["store"]["password"]["file"])


def main():
    work = tempfile.mkdtemp(prefix="midtier-deploy-")
    try:
        scenario_unit(work)
        trace = scenario_serve(work, "the example configuration", example_files(), under_strace=shutil.which("strace") is not None)
        if shutil.which("strace"):
            scenario_system_calls([trace, scenario_demo_flow(work)])
        else:
            check("strace is installed (make deps installs it)", False)
        scenario_serve(work, "the Kubernetes configuration", configmap_files(), under_strace=False)
        scenario_manifests(work)
        print("  the container image: not built here; `make image` builds it (a release build of several minutes, "
              "over this suite's budget) and runs it (Tests/e2e/image.py)")
    finally:
        kill_all(processes)
        shutil.rmtree(work, ignore_errors=True)
    check.finish()


if __name__ == "__main__":
    main()
