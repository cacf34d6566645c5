#!/usr/bin/env python3
"""The container image `make image` builds (docs/operations.md, "The container image"), run as
a container runtime would on this machine, which has none: the OCI archive is read and its
digests checked, its one layer unpacked, and its entry point started as its configuration
says (user 10001, working directory, command) in new mount and PID namespaces, on a read-only
root, with the configuration, the credentials and the state mounted where the Kubernetes
manifests mount them. Then /readyz must answer, and the README's onboarding call and payroll
read must work against the SuccessFactors sandbox.

Usage: image.py ARCHIVE PATH-TO-MIDTIER (the debug build, for its sandbox beside it).
Prints `image: N passed, M failed`; exits 1 on failure. Needs root (namespaces, chroot).
"""
import base64, hashlib, json, os, shutil, signal, socket, subprocess, sys, tarfile, tempfile, time
import urllib.error, urllib.request

from harness import Checks, demo_config, free_port, kill_all, sandbox_command, wait_for

ARCHIVE = os.path.abspath(sys.argv[1])
BIN = os.path.abspath(sys.argv[2])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CREDENTIALS = "/run/credentials/midtier.service"

check = Checks("image")
processes = []


def read_image(work):
    """The image's configuration and its root, unpacked from the archive; every blob's digest checked."""
    layout = os.path.join(work, "layout")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(layout, filter="data")
    def blob(digest):
        data = open(os.path.join(layout, "blobs", *digest.split(":")), "rb").read()
        check(f"blob {digest[:19]}… has its digest", "sha256:" + hashlib.sha256(data).hexdigest() == digest)
        return data
    index = json.load(open(os.path.join(layout, "index.json")))
    manifest = json.loads(blob(index["manifests"][0]["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))
    root = os.path.join(work, "root")
    os.makedirs(root)
    for layer in manifest["layers"]:
        path = os.path.join(work, "layer.tar.gz")
        with open(path, "wb") as f:
            f.write(blob(layer["digest"]))
        with tarfile.open(path) as tar:
            tar.extractall(root, filter="fully_trusted", numeric_owner=True)
    size = sum(layer["size"] for layer in manifest["layers"])
    return config, root, size


def problems(work):
    """Midtier's last warnings and errors, for a failure's detail."""
    lines = open(os.path.join(work, "midtier.log"), errors="replace").read().splitlines()
    return [line for line in lines if '"level":"warning"' in line or '"level":"error"' in line][-3:]


def main():
    work = tempfile.mkdtemp(prefix="midtier-image-")
    try:
        config, root, size = read_image(work)
        settings = config["config"]
        print(f"  image: {os.path.getsize(ARCHIVE) / 1048576:.1f} MiB archive, {size / 1048576:.1f} MiB compressed layer, "
              f"{int(subprocess.run(['du', '-sk', root], capture_output=True, text=True).stdout.split()[0]) / 1024:.1f} MiB unpacked")
        check("the image runs as user 10001, not root", settings.get("User") == "10001:10001", f"({settings.get('User')})")
        check("the image has no shell and no package manager",
              not any(os.path.lexists(os.path.join(root, path)) for path in ["bin/sh", "usr/bin/sh", "usr/bin/apt", "usr/bin/dpkg"]))

        # The configuration, secrets and state a deployment mounts: the demo, as the README runs it.
        mport, aport, sport = free_port(), free_port(), free_port()
        demo = demo_config(REPO, os.path.join(work, "demo"), mport, aport, store="sqlite:/var/lib/midtier/midtier.sqlite")
        credentials = os.path.join(work, "credentials")
        os.makedirs(credentials)
        for name in ["demo-signing.key", "demo-session.key"]:
            shutil.copy(os.path.join(REPO, "certs", name), os.path.join(credentials, name))
        shutil.copy(os.path.join(REPO, "certs", "demo-signing.crt"), os.path.join(demo, "demo-signing.crt"))
        for relative in ["midtier.json", os.path.join("destinations", "sf.json")]:
            path = os.path.join(demo, relative)
            text = open(path).read().replace("certs/demo-signing.crt", "/etc/midtier/demo-signing.crt")
            text = text.replace("certs/demo-signing.key", CREDENTIALS + "/demo-signing.key").replace("certs/demo-session.key", CREDENTIALS + "/demo-session.key")
            text = text.replace("http://localhost:8081", f"http://127.0.0.1:{sport}")
            open(path, "w").write(text)
        state = os.path.join(work, "state")
        os.makedirs(state)
        os.chown(state, 10001, 10001)
        for folder in (demo, credentials):
            for directory, _, files in os.walk(folder):
                os.chmod(directory, 0o755)
                for name in files:
                    os.chmod(os.path.join(directory, name), 0o644)

        processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(sport)], cwd=REPO,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        command = " ".join(settings["Entrypoint"] + settings["Cmd"])
        script = f"""set -e
mount --bind {root} {root} && mount -o remount,bind,ro {root}
mount --bind -o ro {demo} {root}/etc/midtier
mount --bind -o ro {credentials} {root}{CREDENTIALS}
mount --bind {state} {root}/var/lib/midtier
mount -t tmpfs -o mode=1777 tmpfs {root}/tmp
mount -t proc proc {root}/proc
mount --rbind /dev {root}/dev
cd /
exec chroot --userspec={settings["User"]} {root} {command}
"""
        log = open(os.path.join(work, "midtier.log"), "wb")
        container = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--propagation", "private", "sh", "-c", script],
                                     stdout=log, stderr=log)
        processes.append(container)
        base = f"http://127.0.0.1:{mport}"
        ready = wait_for(base + "/readyz", 60)
        # The sandbox on the host, which the container reaches over the shared loopback.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", sport), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        else:
            print(f"  the sandbox on {sport} does not answer")
        check("the image's entry point serves: /readyz answers 200 (read-only root, user 10001)", ready,
              f"({open(os.path.join(work, 'midtier.log'), errors='replace').read()[-800:]})")
        auth = "Basic " + base64.b64encode(b"alice:alice-demo-password").decode()
        status, cid, payroll = None, None, None
        try:
            request = urllib.request.Request(base + "/odata/applications/v1/demo/Connections", method="POST",
                                             data=b'{"DeviceType":"iOS","DeviceModel":"iPhone15,2"}',
                                             headers={"Authorization": auth, "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                status, cid = response.status, response.headers.get("X-SMP-APPCID")
            query = "%24filter=userId%20eq%20%27100001%27&%24top=3&%24format=json"
            request = urllib.request.Request(f"{base}/sf/odata/v2/EmployeePayrollRunResults?{query}",
                                             headers={"Authorization": auth, "X-SMP-APPCID": cid or ""})
            with urllib.request.urlopen(request, timeout=60) as response:
                payroll = (response.status, json.loads(response.read()))
        except urllib.error.HTTPError as error:
            payroll = f"{error.code} {error.read()[:400]!r}"
        except Exception as error:
            payroll = str(error)
        check("the README's onboarding call: 201 with X-SMP-APPCID", status == 201 and cid, f"({status})")
        results = (payroll[1].get("d") or {}).get("results") if isinstance(payroll, tuple) else None
        check("... and alice's payroll through it, in her own name (SAML bearer)",
              isinstance(payroll, tuple) and payroll[0] == 200 and results and all(r.get("userId") == "100001" for r in results),
              f"({str(payroll)[:300]} {problems(work)})")
        check("the state went to the mounted volume, not the image", os.path.exists(os.path.join(state, "midtier.sqlite")))
        children = open(f"/proc/{container.pid}/task/{container.pid}/children").read().split()
        target = int(children[0]) if children else container.pid
        os.kill(target, signal.SIGTERM)
        try:
            code = container.wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = None
        # Midtier is PID 1 of the container, as under a container runtime without an init: it
        # handles SIGTERM itself.
        check("SIGTERM to Midtier as the container's PID 1: it drains and ends with 0", code == 0, f"(exit {code})")
    finally:
        kill_all(processes)
        subprocess.run(["sh", "-c", f"grep -o ' {work}[^ ]*' /proc/mounts | sort -r | xargs -r -n1 umount -l"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    check.finish()


if __name__ == "__main__":
    main()
