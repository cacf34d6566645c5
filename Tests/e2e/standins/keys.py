"""Fresh keys for the push stand-ins, made at test time into a folder (nothing is committed).

    python3 keys.py FOLDER [--token-uri URI] [--project ID] [--client-email EMAIL]

prints, as JSON, where each file is and the identifiers that go with them. From Python:
`keys.generate(folder, token_uri=...)` returns the same dict. It writes:

- ca.pem              a self-signed CA: what Midtier trusts for the stand-ins (`caFile`)
- server.pem          the stand-ins' TLS certificate for 127.0.0.1, ::1 and localhost, signed by the CA
- server-key.pem      its private key (EC P-256, PKCS#8)
- apns-key.p8         an APNs token-signing key as Apple hands it out (EC P-256, PKCS#8 PEM)
- apns-pub.pem        its public key, which apns.py checks JWT signatures with
- service-account.json  a Google service account (type, project_id, private_key_id,
                      private_key (RSA 2048, PKCS#8 PEM), client_email, token_uri, ...)
- sa-pub.pem          its public key, which fcm.py checks the OAuth assertion with
"""
import argparse
import datetime
import ipaddress
import json
import os
import secrets
import string

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _pkcs8_pem(private_key):
    return private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())


def _public_pem(private_key):
    return private_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)


def _write(folder, name, data, private=False):
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
    if private:
        os.chmod(path, 0o600)
    return path


def _apple_id():
    """Ten upper-case letters and digits, like an Apple key id or team id."""
    return "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(10))


def _certificates(folder):
    """A CA and a server certificate signed by it; returns the three paths."""
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    end = start + datetime.timedelta(days=30)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Midtier push stand-ins test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (x509.CertificateBuilder()
          .subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(ca_ski, critical=False)
          .sign(ca_key, hashes.SHA256()))

    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
              .issuer_name(ca_name)
              .public_key(server_key.public_key())
              .serial_number(x509.random_serial_number())
              .not_valid_before(start).not_valid_after(end)
              .add_extension(x509.SubjectAlternativeName([
                  x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                  x509.IPAddress(ipaddress.ip_address("::1")),
                  x509.DNSName("localhost")]), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                           key_encipherment=False, data_encipherment=False,
                                           key_agreement=False, key_cert_sign=False, crl_sign=False,
                                           encipher_only=False, decipher_only=False), critical=True)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
              .sign(ca_key, hashes.SHA256()))

    return (_write(folder, "ca.pem", ca.public_bytes(serialization.Encoding.PEM)),
            _write(folder, "server.pem", server.public_bytes(serialization.Encoding.PEM)),
            _write(folder, "server-key.pem", _pkcs8_pem(server_key), private=True))


def generate(folder, token_uri="https://oauth2.googleapis.com/token", project="midtier-push-test",
             client_email=None, team=None, apns_key_id=None):
    """Writes every file into `folder` (made if missing) and returns a dict of absolute paths and
    the ids: `apns_key_id` and `team` for apns.py, `client_email` and `project` for fcm.py."""
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    ca, cert, key = _certificates(folder)

    # APNs: Apple's .p8 is a PKCS#8 PEM of a P-256 key; the key id names it in the JWT header.
    apns_key = ec.generate_private_key(ec.SECP256R1())
    apns_p8 = _write(folder, "apns-key.p8", _pkcs8_pem(apns_key), private=True)
    apns_pub = _write(folder, "apns-pub.pem", _public_pem(apns_key))

    # FCM: a service-account JSON file as Google's console downloads it.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    client_email = client_email or f"midtier-push@{project}.iam.gserviceaccount.com"
    account = {
        "type": "service_account",
        "project_id": project,
        "private_key_id": secrets.token_hex(20),
        "private_key": _pkcs8_pem(sa_key).decode("ascii"),
        "client_email": client_email,
        "client_id": str(secrets.randbelow(10 ** 21)),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
    }
    service_account = _write(folder, "service-account.json", json.dumps(account, indent=2) + "\n", private=True)
    sa_pub = _write(folder, "sa-pub.pem", _public_pem(sa_key))

    return {"ca": ca, "cert": cert, "key": key,
            "apns_p8": apns_p8, "apns_pub": apns_pub,
            "apns_key_id": apns_key_id or _apple_id(), "team": team or _apple_id(),
            "service_account": service_account, "sa_pub": sa_pub,
            "client_email": client_email, "project": project, "token_uri": token_uri,
            "private_key_id": account["private_key_id"]}


def main():
    parser = argparse.ArgumentParser(description="Makes fresh keys for the push stand-ins.")
    parser.add_argument("folder")
    parser.add_argument("--token-uri", default="https://oauth2.googleapis.com/token")
    parser.add_argument("--project", default="midtier-push-test")
    parser.add_argument("--client-email")
    parser.add_argument("--team")
    parser.add_argument("--key-id", dest="apns_key_id")
    args = parser.parse_args()
    print(json.dumps(generate(args.folder, args.token_uri, args.project, args.client_email,
                              args.team, args.apns_key_id), indent=2))


if __name__ == "__main__":
    main()
