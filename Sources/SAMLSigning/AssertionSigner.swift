import Foundation

/// Signs assertions with an enveloped XML-DSig signature (docs/forwarding.md): exclusive c14n from
/// libxml2, RSA-SHA256 from OpenSSL, the certificate in `KeyInfo`.
package struct AssertionSigner: Sendable {
    package let key: SigningKey
    package let certificate: SigningCertificate

    /// Refuses a key that is not the private half of `certificate`.
    package init(key: SigningKey, certificate: SigningCertificate) throws(SigningError) {
        guard key.matches(certificate) else {
            throw SigningError(.keyCertificateMismatch, "the signing key does not belong to the signing certificate")
        }
        self.key = key
        self.certificate = certificate
    }

    /// Loads both halves from PEM and checks that they belong together.
    package init(keyPEM: [UInt8], passphrase: String?, certificatePEM: [UInt8]) throws(SigningError) {
        try self.init(key: SigningKey(pem: keyPEM, passphrase: passphrase), certificate: SigningCertificate(pem: certificatePEM))
    }

    /// The signed assertion as an XML document (UTF-8, no XML declaration).
    package func sign(_ assertion: SAMLAssertion) throws(SigningError) -> String {
        let unsigned = try XMLTree(parsing: Array(try assertion.xml().utf8))
        // The enveloped transform removes the Signature, so the digest of the assertion before
        // the Signature is inserted is the digest of the signed one.
        let digest = try OpenSSL.sha256(unsigned.exclusiveCanonicalForm(of: unsigned.root))
        let signedInfo = Self.signedInfo(referenceID: try escaped(assertion.id), digest: Data(digest).base64EncodedString())
        // Exclusive c14n makes SignedInfo's canonical form independent of where it stands.
        let signedInfoTree = try XMLTree(parsing: Array(signedInfo.utf8))
        let signatureValue = try key.sign(signedInfoTree.exclusiveCanonicalForm(of: signedInfoTree.root))
        let signature = """
            <ds:Signature xmlns:ds="\(SAMLNames.xmldsig)">\(Self.withoutNamespaceDeclaration(signedInfo))\
            <ds:SignatureValue>\(Data(signatureValue).base64EncodedString())</ds:SignatureValue>\
            <ds:KeyInfo><ds:X509Data><ds:X509Certificate>\(certificate.derBase64)</ds:X509Certificate></ds:X509Data></ds:KeyInfo>\
            </ds:Signature>
            """
        return try assertion.xml(signature: signature)
    }

    private static let signedInfoOpening = "<ds:SignedInfo xmlns:ds=\"\(SAMLNames.xmldsig)\">"

    private static func signedInfo(referenceID: String, digest: String) -> String {
        """
        \(signedInfoOpening)\
        <ds:CanonicalizationMethod Algorithm="\(SAMLNames.exclusiveC14N)"/>\
        <ds:SignatureMethod Algorithm="\(SAMLNames.rsaSHA256)"/>\
        <ds:Reference URI="#\(referenceID)"><ds:Transforms>\
        <ds:Transform Algorithm="\(SAMLNames.envelopedSignature)"/>\
        <ds:Transform Algorithm="\(SAMLNames.exclusiveC14N)"/>\
        </ds:Transforms><ds:DigestMethod Algorithm="\(SAMLNames.sha256)"/>\
        <ds:DigestValue>\(digest)</ds:DigestValue></ds:Reference></ds:SignedInfo>
        """
    }

    /// Inside `Signature` the `ds` prefix is already declared.
    private static func withoutNamespaceDeclaration(_ signedInfo: String) -> String {
        "<ds:SignedInfo>" + signedInfo.dropFirst(signedInfoOpening.count)
    }
}
