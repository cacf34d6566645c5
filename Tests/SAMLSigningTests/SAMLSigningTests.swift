import Foundation
import MidtierTestSupport
import Testing

@testable import SAMLSigning

/// Assertions signed by Midtier must verify with xmlsec1 (an independent XML-DSig
/// implementation) using only the registered certificate, and must stop verifying when changed.
@Suite struct SAMLSigningTests {
    let directory: String
    let pair: TestKeyPair

    init() throws {
        directory = try makeTemporaryDirectory()
        pair = try TestKeyPair.make(in: directory)
    }

    func assertion(nameID: String = "100001", now: Date = Date()) -> SAMLAssertion {
        SAMLAssertion(
            issueInstant: now, issuer: "demo-api-key", nameID: nameID,
            recipient: "http://127.0.0.1:8081/oauth/token", apiKey: "demo-api-key")
    }

    func signer() throws -> AssertionSigner {
        try AssertionSigner(keyPEM: pair.keyPEM, passphrase: nil, certificatePEM: pair.certificatePEM)
    }

    /// xmlsec1 with the flags docs/forwarding.md gives; true when it prints OK and exits 0.
    func xmlsecVerifies(_ xml: String, certificate: String) throws -> Bool {
        let file = "\(directory)/assertion-\(UUID().uuidString).xml"
        try xml.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try run(
            "/usr/bin/xmlsec1",
            [
                "--verify", "--pubkey-cert-pem", certificate, "--enabled-key-data", "key-name",
                "--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:assertion:Assertion", file,
            ])
        return result.status == 0 && result.output.contains("OK")
    }

    @Test func signedAssertionVerifiesWithXmlsec1() throws {
        let xml = try signer().sign(assertion())
        #expect(try xmlsecVerifies(xml, certificate: pair.certificatePath))
        // And with our own verifier, which reads back the claims.
        let claims = try AssertionVerifier(trustedCertificate: SigningCertificate(pem: pair.certificatePEM)).verify(Array(xml.utf8))
        #expect(claims.nameID == "100001")
        #expect(claims.issuer == "demo-api-key")
        #expect(claims.attributes["api_key"] == ["demo-api-key"])
        #expect(claims.audiences == ["www.successfactors.com"])
        #expect(claims.recipients == ["http://127.0.0.1:8081/oauth/token"])
    }

    @Test func assertionHasTheShapeSpecSection5Requires() throws {
        let xml = try signer().sign(assertion())
        #expect(xml.hasPrefix("<saml2:Assertion xmlns:saml2=\"urn:oasis:names:tc:SAML:2.0:assertion\" ID=\"_"))
        // Signature right after Issuer.
        #expect(xml.contains("</saml2:Issuer><ds:Signature xmlns:ds=\"http://www.w3.org/2000/09/xmldsig#\">"))
        for required in [
            "Version=\"2.0\"", "Method=\"urn:oasis:names:tc:SAML:2.0:cm:bearer\"",
            "Format=\"urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified\"",
            "urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession", "<saml2:Attribute Name=\"api_key\">",
            "<ds:X509Certificate>", "http://www.w3.org/2001/10/xml-exc-c14n#",
            "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256", "http://www.w3.org/2001/04/xmlenc#sha256",
        ] {
            #expect(xml.contains(required), "missing \(required)")
        }
    }

    @Test func valuesNeedingEscapesStillVerify() throws {
        let xml = try signer().sign(assertion(nameID: "o'brien & <co> \"x\" ü"))
        #expect(try xmlsecVerifies(xml, certificate: pair.certificatePath))
        let claims = try AssertionVerifier(trustedCertificate: SigningCertificate(pem: pair.certificatePEM)).verify(Array(xml.utf8))
        #expect(claims.nameID == "o'brien & <co> \"x\" ü")
    }

    @Test func tamperedAssertionFailsBothVerifiers() throws {
        let xml = try signer().sign(assertion(nameID: "100001"))
        let tampered = xml.replacingOccurrences(of: ">100001</saml2:NameID>", with: ">100002</saml2:NameID>")
        #expect(tampered != xml)
        #expect(try !xmlsecVerifies(tampered, certificate: pair.certificatePath))
        let verifier = AssertionVerifier(trustedCertificate: try SigningCertificate(pem: pair.certificatePEM))
        #expect(throws: SigningError.self) { try verifier.verify(Array(tampered.utf8)) }
    }

    @Test func signatureByAnotherKeyFailsEvenWithItsOwnCertificateInKeyInfo() throws {
        let attacker = try TestKeyPair.make(in: directory, name: "attacker")
        let forged = try AssertionSigner(keyPEM: attacker.keyPEM, passphrase: nil, certificatePEM: attacker.certificatePEM).sign(assertion())
        #expect(try !xmlsecVerifies(forged, certificate: pair.certificatePath))
        let verifier = AssertionVerifier(trustedCertificate: try SigningCertificate(pem: pair.certificatePEM))
        #expect(throws: SigningError.self) { try verifier.verify(Array(forged.utf8)) }
    }

    @Test func encryptedKeyLoadsWithItsPassphraseOnly() throws {
        let encrypted = try TestKeyPair.make(in: directory, name: "encrypted", passphrase: "s3cret-pass")
        let signer = try AssertionSigner(keyPEM: encrypted.keyPEM, passphrase: "s3cret-pass", certificatePEM: encrypted.certificatePEM)
        #expect(try xmlsecVerifies(signer.sign(assertion()), certificate: encrypted.certificatePath))
        let wrong = #expect(throws: SigningError.self) { try SigningKey(pem: encrypted.keyPEM, passphrase: "wrong") }
        #expect(wrong?.kind == .invalidPrivateKey)
        #expect(wrong?.message.contains("s3cret") == false)
        #expect(throws: SigningError.self) { try SigningKey(pem: encrypted.keyPEM) }
    }

    @Test func mismatchedKeyAndCertificateAreRefused() throws {
        let other = try TestKeyPair.make(in: directory, name: "other")
        let error = #expect(throws: SigningError.self) {
            try AssertionSigner(keyPEM: pair.keyPEM, passphrase: nil, certificatePEM: other.certificatePEM)
        }
        #expect(error?.kind == .keyCertificateMismatch)
    }

    @Test func garbageInputsAreClearErrors() throws {
        #expect(throws: SigningError.self) { try SigningKey(pem: Array("not a key".utf8)) }
        #expect(throws: SigningError.self) { try SigningCertificate(pem: []) }
        let verifier = AssertionVerifier(trustedCertificate: try SigningCertificate(pem: pair.certificatePEM))
        for input in [
            "", "<", "<a/>", "<!DOCTYPE x [<!ENTITY e \"boom\">]><x>&e;</x>",
            "<saml2:Assertion xmlns:saml2=\"urn:oasis:names:tc:SAML:2.0:assertion\" ID=\"_1\"/>",
        ] {
            #expect(throws: SigningError.self) { try verifier.verify(Array(input.utf8)) }
        }
    }

    @Test func expectationsRejectWrongAudienceRecipientIssuerAndTime() throws {
        let now = Date()
        let verifier = AssertionVerifier(trustedCertificate: try SigningCertificate(pem: pair.certificatePEM))
        let claims = try verifier.verify(Array(try signer().sign(assertion(now: now)).utf8))
        let good = AssertionExpectations(clientID: "demo-api-key", recipient: "http://127.0.0.1:8081/oauth/token")
        try good.check(claims, now: now)
        var wrongAudience = good; wrongAudience.audience = "other"
        var wrongRecipient = good; wrongRecipient.recipient = "http://elsewhere/oauth/token"
        var wrongClient = good; wrongClient.clientID = "other-key"
        for expectations in [wrongAudience, wrongRecipient, wrongClient] {
            #expect(throws: SigningError.self) { try expectations.check(claims, now: now) }
        }
        #expect(throws: SigningError.self) { try good.check(claims, now: now.addingTimeInterval(11 * 60 + 61)) }
        #expect(throws: SigningError.self) { try good.check(claims, now: now.addingTimeInterval(-3600)) }
    }

    /// A time limit that is present but not a time is refused, never read as "no limit" (the
    /// check it stands for would be skipped).
    @Test func malformedTimeLimitsAreRefusedNotSkipped() throws {
        let saml = "urn:oasis:names:tc:SAML:2.0:assertion"
        func assertion(subjectLimit: String = "2026-11-18T11:16:40Z", notBefore: String = "2026-11-18T11:06:40Z") -> String {
            """
            <saml2:Assertion xmlns:saml2="\(saml)" ID="_a" IssueInstant="2026-11-18T11:06:40Z" Version="2.0"><saml2:Issuer>k</saml2:Issuer>\
            <saml2:Subject><saml2:NameID>100001</saml2:NameID><saml2:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer">\
            <saml2:SubjectConfirmationData NotOnOrAfter="\(subjectLimit)" Recipient="r"/></saml2:SubjectConfirmation></saml2:Subject>\
            <saml2:Conditions NotBefore="\(notBefore)" NotOnOrAfter="2026-11-18T11:16:40Z"/></saml2:Assertion>
            """
        }
        func claims(_ xml: String) throws -> VerifiedAssertion {
            let tree = try XMLTree(parsing: Array(xml.utf8))
            return try withExtendedLifetime(tree) { try AssertionVerifier.claims(of: tree.root, id: "_a") }
        }
        #expect(try claims(assertion()).subjectNotOnOrAfter != nil)
        #expect(throws: SigningError.self, "a SubjectConfirmationData NotOnOrAfter that is not a time") {
            try claims(assertion(subjectLimit: "soon"))
        }
        #expect(throws: SigningError.self, "a Conditions NotBefore that is not a time") { try claims(assertion(notBefore: "2026-11-18")) }
    }

    @Test func xmlTimeRoundTrips() {
        let date = Date(timeIntervalSince1970: 1_795_000_000)
        #expect(XMLTime.format(date) == "2026-11-18T11:06:40Z")
        #expect(XMLTime.parse("2026-11-18T11:06:40Z") == date)
        #expect(XMLTime.parse("2026-11-18T12:06:40+01:00") == date)
        #expect(XMLTime.parse("2026-11-18T11:06:40.500Z") == date.addingTimeInterval(0.5))
        #expect(XMLTime.parse("2026-13-18T07:46:40Z") == nil)
        #expect(XMLTime.parse("yesterday") == nil)
    }
}
