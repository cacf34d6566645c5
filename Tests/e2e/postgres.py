#!/usr/bin/env python3
"""A throwaway PostgreSQL server for the tests: `initdb` into a temporary folder, on a free
loopback port, run as the `postgres` system user when the tests run as root (the server
refuses root), and always stopped and removed at the end, even when a test fails.

As a library:
    with ThrowawayPostgres() as pg:
        pg.url            # postgres://midtier@127.0.0.1:PORT/midtier?sslmode=disable
        pg.stop(); pg.start()   # the store goes away and comes back on the same port
        pg.sql("SELECT 1")      # psql as the superuser

As a command, around another one (`make test` runs `swift test` this way):
    python3 Tests/e2e/postgres.py run -- swift test --skip-build
which exports MIDTIER_TEST_POSTGRES with the server's URL and the database's name for tests
that make their own databases.
"""
import glob, os, pwd, shutil, signal, socket, subprocess, sys, tempfile, time


def _binary(name):
    """A PostgreSQL program from PATH, or from Debian's versioned folder."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not candidates:
        raise RuntimeError(f"{name} not found: install PostgreSQL (make deps does)")
    return candidates[-1]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThrowawayPostgres:
    def __init__(self, ssl=False):
        self.port = _free_port()
        self.folder = tempfile.mkdtemp(prefix="midtier-pg-")
        self.data = os.path.join(self.folder, "data")
        self.log = os.path.join(self.folder, "postgres.log")
        self.ssl = ssl
        self.as_postgres = os.geteuid() == 0
        self.user = "midtier"
        self.database = "midtier"

    @property
    def url(self):
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{self.database}?sslmode=disable"

    def _run(self, command, **kwargs):
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--"] + command
        return subprocess.run(command, check=True, capture_output=True, text=True, **kwargs)

    def __enter__(self):
        try:
            if self.as_postgres:
                entry = pwd.getpwnam("postgres")
                os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            self._run([_binary("initdb"), "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"])
            with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
                conf.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = '{self.folder}'\n"
                           "fsync = on\nmax_connections = 200\n")
                if self.ssl:
                    self._make_certificates()
                    conf.write("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n")
            if self.ssl:
                # The application's role may only come over TLS; the superuser (psql) either way.
                with open(os.path.join(self.data, "pg_hba.conf"), "w") as hba:
                    hba.write("local all all trust\nhost all postgres 127.0.0.1/32 trust\n"
                              f"hostssl all {self.user} 127.0.0.1/32 trust\nhostnossl all {self.user} 127.0.0.1/32 reject\n")
            self.start()
            self.sql(f"CREATE ROLE {self.user} LOGIN CREATEDB")
            self.sql(f"CREATE DATABASE {self.database} OWNER {self.user}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _make_certificates(self):
        """A CA (`ca.crt` in the folder, for `sslrootcert`) and the server's certificate for the
        name `localhost` (not for 127.0.0.1), signed by it; also `other-ca.crt`, a CA that
        signed nothing."""
        def openssl(*args):
            subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=self.folder)
        for ca in ["ca", "other-ca"]:
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=midtier test {ca}",
                    "-keyout", f"{ca}.key", "-out", f"{ca}.crt")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr")
        with open(os.path.join(self.folder, "san.ext"), "w") as ext:
            ext.write("subjectAltName = DNS:localhost\n")
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
                "-extfile", "san.ext", "-out", "server.crt")
        for name in ["server.crt", "server.key"]:
            shutil.copy(os.path.join(self.folder, name), os.path.join(self.data, name))
            os.chmod(os.path.join(self.data, name), 0o600)
            if self.as_postgres:
                entry = pwd.getpwnam("postgres")
                os.chown(os.path.join(self.data, name), entry.pw_uid, entry.pw_gid)
        for name in ["ca.crt", "other-ca.crt"]:
            os.chmod(os.path.join(self.folder, name), 0o644)

    def start(self):
        self._run([_binary("pg_ctl"), "-D", self.data, "-l", self.log, "-w", "-t", "60", "start"])

    def stop(self, mode="fast"):
        """Stops the server (`immediate` is a crash: no shutdown checkpoint)."""
        self._run([_binary("pg_ctl"), "-D", self.data, "-m", mode, "-w", "-t", "60", "stop"])

    def _processes(self):
        """The server's processes: the postmaster (from postmaster.pid) and its children."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            postmaster = int(f.readline())
        children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout.split()
        return [postmaster] + [int(c) for c in children]

    def pause(self):
        """Stops every process of the server (SIGSTOP): connections stay open and nothing
        answers, as with a server whose disk stalled. `resume()` (or the end) goes on."""
        self.paused = self._processes()
        for pid in self.paused:
            os.kill(pid, signal.SIGSTOP)

    def resume(self):
        for pid in getattr(self, "paused", []):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.paused = []

    def running(self):
        result = subprocess.run(["runuser", "-u", "postgres", "--", _binary("pg_ctl"), "-D", self.data, "status"] if self.as_postgres
                                else [_binary("pg_ctl"), "-D", self.data, "status"], capture_output=True)
        return result.returncode == 0

    def sql(self, statement, database="postgres"):
        """Runs SQL as the superuser; returns psql's unaligned output."""
        return self._run([_binary("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
                          "-v", "ON_ERROR_STOP=1", "-At", "-c", statement]).stdout

    def __exit__(self, *exc):
        self.resume()
        try:
            if os.path.exists(os.path.join(self.data, "postmaster.pid")):
                self.stop(mode="immediate")
        except Exception:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
        return False


def main(argv):
    if len(argv) < 3 or argv[1] != "run" or argv[2] != "--":
        print(__doc__)
        return 2
    with ThrowawayPostgres() as pg:
        environment = dict(os.environ, MIDTIER_TEST_POSTGRES=pg.url)
        child = subprocess.Popen(argv[3:], env=environment)
        # Pass a Ctrl-C or TERM on, and still stop the server afterwards.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda number, frame: child.send_signal(number))
        return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
