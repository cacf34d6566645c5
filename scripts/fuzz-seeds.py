#!/usr/bin/env python3
"""Writes the fuzz seed corpora (Tests/Fuzz/corpus/<target>/): small valid and near-valid inputs
for every target of `make fuzz` (docs/reliability.md, "Fuzzing"). Deterministic; run it again
after changing it. The saml seed is signed by `midtier-fuzz make-seed saml` (give the binary as
the first argument to rewrite it; without it the committed one is kept).

Usage: scripts/fuzz-seeds.py [path/to/midtier-fuzz]
"""
import base64, io, json, os, subprocess, sys, zipfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = os.path.join(ROOT, "Tests", "Fuzz", "corpus")


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def zipped(files):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 11, 28, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
    return buffer.getvalue()


LOG = ("#2014-07-01T17:16:08.637+02:00#INFO##com.sap.demo#ViewController.swift:12#App started#\n"
       "#2014-07-01T17:16:09Z#ERROR#c0ffee#Network#Client.swift:40#Request failed: 500#\n")
LOG_MULTILINE = ("#2020-01-02T03:04:05Z#FATAL###loc#Crash\n\tat frame 1\n\tat frame 2#\n"
                 "#2020-01-02T03:04:06.123456-0130#warning#id#src#loc#Order \\#42 failed \\# retry#\r\n")

# json: RFC 8259 documents, nested, escapes, numbers, and a few near misses.
write("json", "object.json", '{"a":[1,-2.5e3,true,false,null],"b":{"c":"d\\u00e9\\n\\ud83d\\ude00"},"":""}')
write("json", "nested.json", '[[[[{"x":[{"y":{}}]}]]]]')
write("json", "numbers.json", '[0,-0,1e308,-1E-308,123456789012345678901234567890,0.000001]')
write("json", "duplicate-key.json", '{"k":1,"k":2}')
write("json", "trailing-comma.json", '{"a":1,}')
write("json", "bare.json", '"text"')

# client-log: first byte picks the Content-Type (0 none, 1 text/plain, 2 application/zip,
# 3 multipart/form-data; boundary=XyZ, ...), the rest is the body.
write("client-log", "plain.log", b"\x01" + LOG.encode())
write("client-log", "none.log", b"\x00" + LOG_MULTILINE.encode())
write("client-log", "zip.bin", b"\x02" + zipped([("app.log", LOG)]))
write("client-log", "zip-two-files.bin", b"\x00" + zipped([("a.log", LOG), ("b.log", LOG_MULTILINE)]))
multipart = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.log\"\r\n"
             b"Content-Type: text/plain\r\n\r\n" + LOG.encode() +
             b"\r\n--XyZ\r\nContent-Disposition: form-data; name=\"zip\"; filename=\"b.zip\"\r\n"
             b"Content-Type: application/zip\r\n\r\n" + zipped([("b.log", LOG_MULTILINE)]) + b"\r\n--XyZ--\r\n")
write("client-log", "multipart.bin", b"\x03" + multipart)

# client-log-lines: one log file.
write("client-log-lines", "two.log", LOG)
write("client-log-lines", "multiline.log", LOG_MULTILINE)
write("client-log-lines", "bad-severity.log", "#2020-01-02T03:04:05Z#INFO####ok#\n#2020-01-02T03:04:05Z#LOUD####no#\n")

# proxy-path: a device's request path.
write("proxy-path", "plain", "/sf/odata/v2/User('alice')?$format=json")
write("proxy-path", "encoded", "/payroll/sap/opu/odata/sap/ZPAY_SRV/Items%28%27a%2Fb%27%29/%24value")
write("proxy-path", "dots", "/sf/a/./b/../%2e%2E/c//d")
write("proxy-path", "bad-escape", "/sf/%zz/%2/%00/%C3%A9")

# atom: a registration body in Atom.
ATOM = ('<?xml version="1.0" encoding="utf-8"?>\n'
        '<entry xmlns="http://www.w3.org/2005/Atom" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
        'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices"><title type="text"/><updated>2012-06-15T02:23:29Z</updated>'
        '<author><name/></author><category term="applications.Connection" scheme="http://schemas.microsoft.com/ado/2007/08/dataservices/scheme"/>'
        '<content type="application/xml"><m:properties>{}</m:properties></content></entry>')
write("atom", "entry.xml", ATOM.format('<d:DeviceType>iPhone</d:DeviceType><d:DeviceModel>iPhone15,2</d:DeviceModel>'
                                      '<d:ApnsPushEnable>true</d:ApnsPushEnable><d:Email m:null="true"/>'
                                      '<d:UserLocale>de_DE</d:UserLocale>'))
write("atom", "bad-boolean.xml", ATOM.format('<d:AndroidGcmPushEnabled>maybe</d:AndroidGcmPushEnabled>'))
write("atom", "media-link.xml", '<entry xmlns="http://www.w3.org/2005/Atom" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" '
      'xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices"><m:properties><d:DeviceId>x&amp;y&#x41;</d:DeviceId></m:properties></entry>')
write("atom", "doctype.xml", '<?xml version="1.0"?><!DOCTYPE entry [<!ENTITY a "b">]><entry>&a;</entry>')

# discovery: the function call path segment (percent-decoded by the target, as by the route).
write("discovery", "call", "getApplicationConfiguration(AppConfigID='com.sap.demo:1.0',EmailAddress='alice@example.com')")
write("discovery", "reordered-quoted", "getApplicationConfiguration(EmailAddress='o''brien@example.com',AppConfigID='demo')")
write("discovery", "encoded", "getApplicationConfiguration(AppConfigID=%27demo%27,EmailAddress=%27a%40b%27)")
write("discovery", "unclosed", "getApplicationConfiguration(AppConfigID='demo,EmailAddress=)")

# push-message: a sender's body.
write("push-message", "full.json", json.dumps({"notification": {
    "alert": "New payslip", "badge": 3, "sound": "default", "priority": "normal", "data": {"slip": "2026-11"},
    "custom": {"kind": "payslip"}, "sendAsSms": False, "wns": {},
    "apns": {"alertTitle": "Payroll", "alertSubtitle": "November", "category": "PAY", "threadId": "pay",
             "mutableContent": True, "expiration": 1800000000},
    "gcm": {"title": "Payroll", "collapseKey": "pay", "timeToLive": "3600s", "tag": "pay", "color": "#00ff00"}},
    "users": ["alice"]}, separators=(",", ":")))
write("push-message", "bare.json", '{"alert":"Hello","badge":0,"data":"plain text"}')
write("push-message", "unknown-member.json", '{"alert":"x","alret":"y"}')

# jwt: bearer tokens for the target's JWKS (kid fuzz-1, ES256), iss https://idp.fuzz.example,
# aud midtier-fuzz; the target's clock says 1800000000.
def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt_key_pem():
    source = open(os.path.join(ROOT, "Tests", "Fuzz", "FuzzTargets", "FuzzKeys.swift")).read()
    block = source.split("-----BEGIN EC PRIVATE KEY-----")[1].split("-----END EC PRIVATE KEY-----")[0]
    body = "".join(line.strip() for line in block.splitlines())
    return ("-----BEGIN EC PRIVATE KEY-----\n" + body + "\n-----END EC PRIVATE KEY-----\n").encode()


def token(header, claims, sign=True):
    signing_input = b64url(json.dumps(header, separators=(",", ":")).encode()) + "." + b64url(json.dumps(claims, separators=(",", ":")).encode())
    if not sign:
        return signing_input + "." + b64url(b"\x00" * 64)
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, utils
    key = serialization.load_pem_private_key(jwt_key_pem(), None)
    # ECDSA signatures are random: the file changes on every run, which is fine for a seed.
    r, s = utils.decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


CLAIMS = {"iss": "https://idp.fuzz.example", "aud": ["midtier-fuzz", "other"], "sub": "alice", "exp": 4102444800,
          "nbf": 1700000000, "email": "alice@example.com"}
if not os.path.exists(os.path.join(CORPUS, "jwt", "valid")) or "--new-tokens" in sys.argv:
    write("jwt", "valid", "Bearer " + token({"alg": "ES256", "typ": "JWT", "kid": "fuzz-1"}, CLAIMS))
    write("jwt", "valid-no-kid", token({"alg": "ES256"}, dict(CLAIMS, aud="midtier-fuzz", nbf=None)))
    write("jwt", "expired", token({"alg": "ES256", "kid": "fuzz-1"}, dict(CLAIMS, exp=1000)))
write("jwt", "bad-signature", token({"alg": "ES256", "kid": "fuzz-1"}, CLAIMS, sign=False))
write("jwt", "alg-none", token({"alg": "none"}, CLAIMS, sign=False))
write("jwt", "unknown-kid", token({"alg": "RS256", "kid": "other", "crit": ["x"]}, CLAIMS, sign=False))

# saml: an assertion signed with the target's test key (made by the Swift signer).
if len(sys.argv) > 1 and not sys.argv[1].startswith("--"):
    signed = subprocess.run([sys.argv[1], "make-seed", "saml"], check=True, capture_output=True).stdout.rstrip(b"\n")
    write("saml", "signed.xml", signed)
    write("saml", "tampered.xml", signed.replace(b">alice<", b">mallory<"))
    write("saml", "unsigned.xml", b'<saml2:Assertion xmlns:saml2="urn:oasis:names:tc:SAML:2.0:assertion" ID="_1" Version="2.0" '
                                  b'IssueInstant="2027-01-15T08:00:00Z"><saml2:Issuer>x</saml2:Issuer></saml2:Assertion>')

# token-response: the token service's answers.
write("token-response", "ok.json", '{"access_token":"eyJ0b2tlbiI6MX0","token_type":"Bearer","expires_in":3599}')
write("token-response", "string-lifetime.json", '{"access_token":"abc","token_type":"bearer","expires_in":"86400000"}')
write("token-response", "error.json", '{"errorMessage":"Unable to validate the SAML assertion","errorCode":"invalid_grant"}')
write("token-response", "nested-error.json", '{"error":{"message":{"value":"secret-assertion echoed \\u0000"}}}')

# set-cookie: Set-Cookie values, one a line; a first line starting with / is the request path.
write("set-cookie", "session", "/sap/opu/odata/sap/ZPAY_SRV/Items\n"
      "SAP_SESSIONID_ABC_100=abc123%3d; path=/; secure; HttpOnly; SameSite=None\n"
      "sap-usercontext=sap-client=100; path=/\n"
      "JSESSIONID=1; Path=/sap/opu; Max-Age=3600\n"
      "MYSAPSSO2=x; Domain=.example.com; Expires=Wed, 21 Oct 2099 07:28:00 GMT\n")
write("set-cookie", "deleted", "JSESSIONID=; Max-Age=0\nold=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT\n=novalue\nnoequals\n")
write("set-cookie", "dates", "a=1; Expires=Sunday, 06-Nov-94 08:49:37 GMT\nb=2; expires=Sun Nov  6 08:49:37 1994\n"
      "c=3; Max-Age=-1\nd=4; Max-Age=99999999999999999999\n")

# metadata: $metadata documents (the target patches PayrollItem/Amount and Employee/Name).
METADATA = ('<?xml version="1.0" encoding="utf-8"?>\n<edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" '
            'xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">'
            '<edmx:DataServices m:DataServiceVersion="2.0"><Schema Namespace="SFOData" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">'
            '{}</Schema></edmx:DataServices></edmx:Edmx>\n')
write("metadata", "payroll.xml", METADATA.format(
    '<EntityType Name="PayrollItem"><Key><PropertyRef Name="id"/></Key><Property Name="id" Type="Edm.String" Nullable="false"/>'
    '<Property Name="Amount" Type="Edm.Decimal" Nullable="true" sap:label="Amount"/></EntityType>'
    '<EntityType Name="Employee"><Property Name="Name" Type="Edm.String" MaxLength="40"/></EntityType>'
    '<EntityContainer Name="C" m:IsDefaultEntityContainer="true"><EntitySet Name="PayrollItems" EntityType="SFOData.PayrollItem"/></EntityContainer>'))
write("metadata", "unfitting-precision.xml", METADATA.format(
    '<EntityType Name="PayrollItem"><Property Name="Amount" Type="Edm.Decimal" Precision="1"/>'
    '<Property Name="Amount" Type="Edm.Decimal" Precision="variable"/></EntityType>'))
write("metadata", "doctype.xml", '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e "&#38;#38;">]><x>&e;</x>')

# config: the first byte picks the file of config/ the rest replaces (0 midtier.json,
# 1 users.json, 2 apps/demo.json, 3 destinations/sf.json).
for index, name in enumerate(["midtier.json", "users.json", "apps/demo.json", "destinations/sf.json"]):
    with open(os.path.join(ROOT, "config", name), "rb") as f:
        write("config", name.replace("/", "-"), bytes([index]) + f.read())

for folder in sorted(os.listdir(CORPUS)):
    files = os.listdir(os.path.join(CORPUS, folder))
    print(f"{folder}: {len(files)} seeds, {sum(os.path.getsize(os.path.join(CORPUS, folder, f)) for f in files)} bytes")
