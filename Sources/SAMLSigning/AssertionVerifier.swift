package import Foundation

/// The claims of an assertion whose signature has been verified.
package struct VerifiedAssertion: Sendable, Equatable {
    package var id: String
    package var issueInstant: Date?
    package var issuer: String
    package var nameID: String
    package var nameIDFormat: String?
    package var recipients: [String]
    package var subjectNotOnOrAfter: Date?
    package var notBefore: Date?
    package var notOnOrAfter: Date?
    package var audiences: [String]
    /// `AttributeStatement` values by attribute name.
    package var attributes: [String: [String]]
}

/// Verifies an enveloped XML-DSig signature on a SAML 2.0 assertion the way SuccessFactors
/// must: against the registered certificate only. A key or certificate in the document's
/// `KeyInfo` is ignored, so an attacker cannot sign with a key of their own.
///
/// Only the shape Midtier produces is accepted: the signed `Assertion` is the document root,
/// it carries exactly one `Signature` as a direct child, whose single `Reference` points at
/// the root's `ID` with the enveloped-signature and exclusive c14n transforms, SHA-256 digest
/// and RSA-SHA256 signature. Claims are read only from that signed root.
package struct AssertionVerifier: Sendable {
    package let trustedCertificate: SigningCertificate

    package init(trustedCertificate: SigningCertificate) {
        self.trustedCertificate = trustedCertificate
    }

    package func verify(_ xml: [UInt8]) throws(SigningError) -> VerifiedAssertion {
        let tree = try XMLTree(parsing: xml)
        let assertion = tree.root
        let saml = SAMLNames.assertion
        let ds = SAMLNames.xmldsig
        guard assertion.isElement("Assertion", in: saml) else {
            throw SigningError(.invalidSignature, "the document is not a SAML 2.0 Assertion")
        }
        guard let id = assertion.attribute("ID"), !id.isEmpty else {
            throw SigningError(.invalidSignature, "the Assertion has no ID")
        }
        guard let signature = try assertion.onlyChild(named: "Signature", in: ds) else {
            throw SigningError(.invalidSignature, "the assertion has no signature")
        }
        let signedInfo = try signature.requiredChild(named: "SignedInfo", in: ds)
        try Self.expectAlgorithm(signedInfo.requiredChild(named: "CanonicalizationMethod", in: ds), SAMLNames.exclusiveC14N)
        try Self.expectAlgorithm(signedInfo.requiredChild(named: "SignatureMethod", in: ds), SAMLNames.rsaSHA256)
        let reference = try signedInfo.requiredChild(named: "Reference", in: ds)
        guard reference.attribute("URI") == "#" + id else {
            throw SigningError(.invalidSignature, "the signature does not reference the assertion")
        }
        let transforms = try reference.requiredChild(named: "Transforms", in: ds).children
        guard transforms.count == 2,
            transforms.allSatisfy({ $0.isElement("Transform", in: ds) }),
            transforms[0].attribute("Algorithm") == SAMLNames.envelopedSignature,
            transforms[1].attribute("Algorithm") == SAMLNames.exclusiveC14N,
            transforms[1].children.isEmpty
        else {
            throw SigningError(.invalidSignature, "the reference must use the enveloped-signature and exclusive c14n transforms")
        }
        try Self.expectAlgorithm(reference.requiredChild(named: "DigestMethod", in: ds), SAMLNames.sha256)
        guard let expectedDigest = Self.base64(try reference.requiredChild(named: "DigestValue", in: ds).text) else {
            throw SigningError(.invalidSignature, "the digest value is not base64")
        }
        let digest = try OpenSSL.sha256(tree.exclusiveCanonicalForm(of: assertion, excluding: signature))
        guard digest == expectedDigest else {
            throw SigningError(.invalidSignature, "the assertion was changed after it was signed (digest mismatch)")
        }
        guard let signatureValue = Self.base64(try signature.requiredChild(named: "SignatureValue", in: ds).text) else {
            throw SigningError(.invalidSignature, "the signature value is not base64")
        }
        guard trustedCertificate.verify(signature: signatureValue, of: try tree.exclusiveCanonicalForm(of: signedInfo)) else {
            throw SigningError(.invalidSignature, "the signature does not verify with the registered certificate")
        }
        return try Self.claims(of: assertion, id: id)
    }

    private static func expectAlgorithm(_ element: XMLElement, _ algorithm: String) throws(SigningError) {
        guard element.attribute("Algorithm") == algorithm else {
            throw SigningError(.invalidSignature, "\(element.localName) must be \(algorithm)")
        }
    }

    private static func base64(_ text: String) -> [UInt8]? {
        let compact = text.filter { !$0.isWhitespace }
        return Data(base64Encoded: compact).map(Array.init)
    }

    static func claims(of assertion: XMLElement, id: String) throws(SigningError) -> VerifiedAssertion {
        let saml = SAMLNames.assertion
        let subject = try assertion.requiredChild(named: "Subject", in: saml)
        let nameID = try subject.requiredChild(named: "NameID", in: saml)
        var recipients: [String] = []
        var subjectNotOnOrAfter: Date?
        for confirmation in subject.children(named: "SubjectConfirmation", in: saml)
        where confirmation.attribute("Method") == SAMLNames.bearer {
            for data in confirmation.children(named: "SubjectConfirmationData", in: saml) {
                if let recipient = data.attribute("Recipient") { recipients.append(recipient) }
                if let limit = try data.time("NotOnOrAfter") { subjectNotOnOrAfter = limit }
            }
        }
        let conditions = try assertion.onlyChild(named: "Conditions", in: saml)
        var audiences: [String] = []
        for restriction in conditions?.children(named: "AudienceRestriction", in: saml) ?? [] {
            audiences += restriction.children(named: "Audience", in: saml).map { $0.text.trimmingWhitespace() }
        }
        var attributes: [String: [String]] = [:]
        for statement in assertion.children(named: "AttributeStatement", in: saml) {
            for attribute in statement.children(named: "Attribute", in: saml) {
                guard let name = attribute.attribute("Name") else { continue }
                attributes[name, default: []] += attribute.children(named: "AttributeValue", in: saml).map { $0.text.trimmingWhitespace() }
            }
        }
        return VerifiedAssertion(
            id: id,
            issueInstant: try assertion.time("IssueInstant"),
            issuer: try assertion.requiredChild(named: "Issuer", in: saml).text.trimmingWhitespace(),
            nameID: nameID.text.trimmingWhitespace(),
            nameIDFormat: nameID.attribute("Format"),
            recipients: recipients,
            subjectNotOnOrAfter: subjectNotOnOrAfter,
            notBefore: try conditions?.time("NotBefore"),
            notOnOrAfter: try conditions?.time("NotOnOrAfter"),
            audiences: audiences,
            attributes: attributes
        )
    }
}

/// What a token service expects of a verified assertion (SuccessFactors' checks, docs/sandbox.md).
package struct AssertionExpectations: Sendable {
    package var clientID: String
    package var audience: String
    package var recipient: String
    /// How much clock difference is forgiven on `NotBefore` and `NotOnOrAfter`.
    package var clockSkew: TimeInterval
    /// The `Issuer` expected: the client id for SuccessFactors.
    package var issuer: String
    /// Whether the `api_key` attribute must name the client (SuccessFactors).
    package var expectsAPIKey: Bool

    package init(
        clientID: String, audience: String = "www.successfactors.com", recipient: String, clockSkew: TimeInterval = 60,
        issuer: String? = nil, expectsAPIKey: Bool = true
    ) {
        self.issuer = issuer ?? clientID
        self.expectsAPIKey = expectsAPIKey
        self.clientID = clientID
        self.audience = audience
        self.recipient = recipient
        self.clockSkew = clockSkew
    }

    /// Throws a message in SuccessFactors' words when the assertion is not acceptable now.
    package func check(_ assertion: VerifiedAssertion, now: Date) throws(SigningError) {
        func reject(_ message: String) -> SigningError { SigningError(.invalidSignature, message) }
        guard assertion.issuer == issuer else {
            throw reject("The issuer of the SAML assertion does not match the client ID")
        }
        guard !expectsAPIKey || assertion.attributes["api_key"] == [clientID] else {
            throw reject("The api_key attribute of the SAML assertion does not match the client ID")
        }
        guard assertion.audiences.contains(audience) else {
            throw reject("The SAML assertion is not intended for this audience (expected \(audience))")
        }
        guard assertion.recipients.contains(recipient) else {
            throw reject("The recipient of the SAML assertion does not match the token service URL")
        }
        guard !assertion.nameID.isEmpty else { throw reject("The SAML assertion names no user") }
        guard let notOnOrAfter = assertion.notOnOrAfter, let notBefore = assertion.notBefore else {
            throw reject("The SAML assertion has no validity period")
        }
        guard now.addingTimeInterval(clockSkew) >= notBefore else { throw reject("The SAML assertion is not yet valid") }
        guard now.addingTimeInterval(-clockSkew) < notOnOrAfter else { throw reject("The SAML assertion has expired") }
        if let subjectLimit = assertion.subjectNotOnOrAfter, now.addingTimeInterval(-clockSkew) >= subjectLimit {
            throw reject("The SAML assertion has expired")
        }
    }
}
