"""What the end-to-end scripts share: counted checks ending in one summary line, free loopback
ports, and waiting for a server to answer. Standard library only."""
import base64
import socket
import sys
import time
import urllib.request


class Checks:
    """Counts checks, printing `ok   - name` (unless quiet) or `FAIL - name detail`."""

    def __init__(self, suite, quiet=False):
        self.suite, self.quiet = suite, quiet
        self.passed = self.failed = 0

    def __call__(self, name, condition, detail=""):
        if condition:
            self.passed += 1
            if not self.quiet:
                print(f"ok   - {name}")
        else:
            self.failed += 1
            print(f"FAIL - {name} {detail}")

    def finish(self):
        """Prints `SUITE: N passed, M failed` and exits, 1 on any failure."""
        print(f"{self.suite}: {self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)


def labelled(headers, body):
    """`headers` with `Content-Type: application/json` added when there is a body and no type:
    urllib labels such a body a form (application/x-www-form-urlencoded), which the device API
    refuses with 415 as a type a browser sends cross-site (docs/device-api.md)."""
    headers = dict(headers or {})
    if body is not None and not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = "application/json"
    return headers


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Loopback only: never through a proxy from the environment.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def wait_for(url, seconds=20):
    """Whether `url` answers 2xx within `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with _direct.open(url, timeout=1):
                return True
        except Exception:
            time.sleep(0.05)
    return False


def sandbox_command(bin_path):
    """The command that starts the SuccessFactors sandbox: `midtier-sandbox`, built beside
    the `midtier` binary `bin_path` (docs/sandbox.md)."""
    import os
    return [os.path.join(os.path.dirname(os.path.abspath(bin_path)), "midtier-sandbox")]


def demo_config(repo, work, mport, aport, **settings):
    """A copy of the demo configuration in `work/config`, listening on `mport` (admin `aport`)
    with its store in `work`, and `settings` over midtier.json; returns its path."""
    import json, os, shutil
    config = os.path.join(work, "config")
    shutil.copytree(os.path.join(repo, "config"), config)
    path = os.path.join(config, "midtier.json")
    current = json.load(open(path))
    current.update({"listen": f"127.0.0.1:{mport}", "adminListen": f"127.0.0.1:{aport}", "publicURL": f"http://localhost:{mport}",
                    "store": f"sqlite:{work}/midtier.sqlite"})
    current.update(settings)
    json.dump(current, open(path, "w"))
    return config


def kill_all(processes):
    """Stops what is still running of `processes` and waits for each: SIGTERM first, so that a
    server with children (nginx's master and its workers) takes them down with it, then SIGKILL
    for whatever has not ended within 5 seconds."""
    import subprocess
    running = [process for process in processes if process.poll() is None]
    for process in running:
        process.terminate()
    for process in running:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def basic(user, password):
    """An Authorization value for HTTP Basic, from text or bytes."""
    raw_user = user.encode() if isinstance(user, str) else user
    raw_password = password.encode() if isinstance(password, str) else password
    return "Basic " + base64.b64encode(raw_user + b":" + raw_password).decode()


def header(headers, name):
    """A header's value from a dict of response headers, by its name in any case."""
    return next((value for key, value in headers.items() if key.lower() == name.lower()), None)


def b64url(data):
    """base64url without padding, as JWTs and PKCE spell it."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def idp_key(work):
    """An RSA key for a stand-in IdP (in `work`) and its JWKS (one key, `kid` k1)."""
    import os, subprocess
    key = os.path.join(work, "idp.key")
    subprocess.run(["openssl", "genrsa", "-out", key, "2048"], check=True, capture_output=True)
    modulus = subprocess.run(["openssl", "rsa", "-in", key, "-noout", "-modulus"], check=True, capture_output=True, text=True).stdout
    n = bytes.fromhex(modulus.strip().split("=", 1)[1])
    return key, {"keys": [{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig", "n": b64url(n), "e": "AQAB"}]}


def jwt(key, claims):
    """An RS256 JWT of `claims`, signed by `openssl` with `key`."""
    import json, subprocess
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": "k1"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signed = f"{header}.{payload}".encode()
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signed, check=True, capture_output=True).stdout
    return f"{header}.{payload}.{b64url(signature)}"


def start_sandbox_and_midtier(bin_path, repo, work, config, sandbox_port, processes):
    """Starts `midtier-sandbox` on `sandbox_port` and `midtier serve` on `config` (its log in
    `work/midtier.log`), both added to `processes`; returns (midtier process, log path)."""
    import os, subprocess
    log_path = os.path.join(work, "midtier.log")
    log = open(log_path, "wb")
    processes.append(subprocess.Popen(sandbox_command(bin_path) + ["--port", str(sandbox_port)], cwd=repo,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    midtier = subprocess.Popen([bin_path, "serve", "--config", config], cwd=repo, stdout=log, stderr=log)
    processes.append(midtier)
    return midtier, log_path


def call(port, method, path, headers=(), body=None, source=None, timeout=20):
    """One request to 127.0.0.1:`port` with exactly `headers` (pairs, names as given), from
    `source` (an address of 127/8) when given: (status, lower-cased headers, body); status 0
    and the error's text when the connection failed."""
    import http.client
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0) if source else None)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    except (OSError, http.client.HTTPException) as error:
        return 0, {}, repr(error).encode()
    finally:
        connection.close()


def hash_secret(binary, secret):
    """The bcrypt hash `midtier hash-secret` makes of `secret` (cost 10, for speed)."""
    import subprocess
    return subprocess.run([binary, "hash-secret", "--cost", "10"], input=secret + "\n", capture_output=True, text=True,
                          check=True).stdout.strip()


def write_json(path, value):
    """Writes `value` as JSON to `path`."""
    import json
    with open(path, "w") as f:
        json.dump(value, f, indent=1)
