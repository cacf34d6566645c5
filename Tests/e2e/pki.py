"""Keys and certificates for the end-to-end scripts, made with the openssl command line in a
temporary folder: CAs, server and client certificates, key stores (PEM, PKCS#12)."""
import os
import subprocess

OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


def openssl(*args, input=None):
    """Runs `openssl args…`; raises on failure."""
    return subprocess.run(["openssl", *args], input=input, capture_output=True, check=True, timeout=30)


class PKI:
    """Makes keys and certificates in `folder` (each script's Keys adds its own set)."""

    def __init__(self, folder):
        self.folder = folder
        self.cnf = self.path("openssl.cnf")
        open(self.cnf, "w").write(OPENSSL_CNF)

    def path(self, name):
        return os.path.join(self.folder, name)

    def ca(self, name, subject):
        """A CA: (certificate, key) files."""
        cert, key = self.path(name + ".pem"), self.path(name + ".key")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", subject,
                "-config", self.cnf, "-extensions", "ca")
        return cert, key

    def leaf(self, name, subject, ca, ca_key, kind):
        """A `server` (for 127.0.0.1) or `client` certificate signed by `ca`: (certificate, key)."""
        cert, key, csr = self.path(name + ".pem"), self.path(name + ".key"), self.path(name + ".csr")
        openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", subject, "-config", self.cnf)
        openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-set_serial", str(int.from_bytes(os.urandom(8), "big")),
                "-days", "1", "-out", cert, "-extfile", self.cnf, "-extensions", kind)
        return cert, key

    def pem_store(self, name, cert, key):
        """A PEM key store: the certificate, then its key."""
        path = self.path(name)
        open(path, "w").write(open(cert).read() + open(key).read())
        return path

    def pkcs12(self, name, cert, key, password):
        """A PKCS#12 key store under `password`."""
        path = self.path(name)
        openssl("pkcs12", "-export", "-in", cert, "-inkey", key, "-name", "midtier", "-out", path, "-passout", "pass:" + password)
        return path


def pem_body(path):
    """The base64 lines of a PEM file, each at least 40 characters (what a leak would repeat)."""
    return [line.strip() for line in open(path) if len(line.strip()) >= 40 and not line.startswith("-----")]
