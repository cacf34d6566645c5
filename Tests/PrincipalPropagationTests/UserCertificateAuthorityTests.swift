import Foundation
import MidtierCore
import MidtierTestSupport
import PrincipalPropagation
import Testing

/// Users' certificates, checked with the `openssl` command line (an independent verifier).
@Suite struct UserCertificateAuthorityTests {
    /// A CA made by openssl: `kind` is `rsa:2048` or `ec` (P-384).
    static func makeCA(in directory: String, kind: String = "rsa:2048", passphrase: String? = nil) throws -> (key: String, certificate: String) {
        let key = directory + "/ca.key", certificate = directory + "/ca.crt"
        var arguments = [
            "req", "-x509", "-sha256", "-days", "2", "-subj", "/CN=Midtier PP CA/O=Example",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
            "-keyout", key, "-out", certificate,
        ]
        if kind == "ec" {
            arguments += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"]
        } else {
            arguments += ["-newkey", kind]
        }
        if let passphrase { arguments += ["-passout", "pass:\(passphrase)"] } else { arguments.append("-nodes") }
        let made = try run("/usr/bin/openssl", arguments)
        guard made.status == 0 else { throw TestFailure(made.output) }
        return (key, certificate)
    }

    static func settings(
        _ ca: (key: String, certificate: String), passphrase: String? = nil,
        pattern: String = "CN=${name}"
    ) throws -> PrincipalPropagationSettings {
        PrincipalPropagationSettings(
            mode: .header, subjectPattern: try SubjectPattern(pattern), validityMinutes: 10,
            caCertificatePEM: Array(FileManager.default.contents(atPath: ca.certificate)!),
            caKeyPEM: Array(FileManager.default.contents(atPath: ca.key)!), caKeyPassphrase: passphrase)
    }

    @Test(arguments: ["rsa:2048", "ec"])
    func issuesCertificatesOpenSSLVerifies(kind: String) throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let ca = try Self.makeCA(in: directory, kind: kind)
        let authority = try UserCertificateAuthority(try Self.settings(ca))
        let pattern = try SubjectPattern("CN=${name},EMAIL=${mail},OU=Mobile,O=Example,C=DE")
        let subject = try pattern.fill { ["name": "alice,O=Admins", "mail": "alice@example.com"][$0] }
        let issued = try authority.issue(subject: subject)
        let path = directory + "/user.pem"
        try Data(issued.pem.utf8).write(to: URL(fileURLWithPath: path))

        let verified = try run("/usr/bin/openssl", ["verify", "-CAfile", ca.certificate, "-purpose", "sslclient", path])
        #expect(verified.status == 0, "\(verified.output)")
        let shown = try run("/usr/bin/openssl", ["x509", "-in", path, "-noout", "-subject", "-nameopt", "RFC2253", "-enddate"])
        // Read back as written (RFC 4514 order: the first written is the most specific, last in
        // the certificate), and the comma in the user's value escaped: one common name, no extra O.
        #expect(shown.output.contains("subject=CN=alice\\,O=Admins,emailAddress=alice@example.com,OU=Mobile,O=Example,C=DE"), "\(shown.output)")
        #expect(issued.notAfter.timeIntervalSinceNow > 9 * 60 && issued.notAfter.timeIntervalSinceNow <= 10 * 60)
        // The header value is the DER, base64 on one line.
        #expect(Data(base64Encoded: issued.headerValue).map(Array.init) == issued.certificateDER)
        #expect(!issued.headerValue.contains("\n"))
        #expect(!String(describing: issued).contains(Data(issued.keyDER).base64EncodedString()))
    }

    @Test func eachCertificateHasItsOwnKeyAndSerial() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let authority = try UserCertificateAuthority(try Self.settings(try Self.makeCA(in: directory)))
        let first = try authority.issue(subject: [(.commonName, "alice")])
        let second = try authority.issue(subject: [(.commonName, "alice")])
        #expect(first.keyDER != second.keyDER)
        #expect(first.certificateDER != second.certificateDER)
    }

    @Test func opensAnEncryptedCAKeyWithItsPassphrase() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let ca = try Self.makeCA(in: directory, passphrase: "ca-pass-1234")
        #expect(throws: UserCertificateError.self) { try UserCertificateAuthority(try Self.settings(ca)) }
        #expect(throws: UserCertificateError.self) { try UserCertificateAuthority(try Self.settings(ca, passphrase: "wrong")) }
        _ = try UserCertificateAuthority(try Self.settings(ca, passphrase: "ca-pass-1234")).issue(subject: [(.commonName, "a")])
    }

    @Test func refusesAKeyOfAnotherCertificateAndANonCA() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let ca = try Self.makeCA(in: directory)
        let other = try TestKeyPair.make(in: directory, name: "other")
        #expect(throws: UserCertificateError("the caKey does not belong to the caCertificate")) {
            try UserCertificateAuthority(try Self.settings((other.keyPath, ca.certificate)))
        }
        let leaf = directory + "/leaf"
        let made = try run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=leaf", "-days", "1",
                "-addext", "basicConstraints=critical,CA:FALSE", "-keyout", leaf + ".key", "-out", leaf + ".crt",
            ])
        #expect(made.status == 0)
        #expect(throws: UserCertificateError.self) { try UserCertificateAuthority(try Self.settings((leaf + ".key", leaf + ".crt"))) }
    }
}
