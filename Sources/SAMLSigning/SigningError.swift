/// What went wrong while loading keys, signing, or verifying. Messages never contain key
/// material, assertions or passphrases.
package struct SigningError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Kind: Sendable, Equatable {
        /// A PEM private key did not load (wrong format, wrong passphrase, not RSA).
        case invalidPrivateKey
        /// A PEM certificate did not load.
        case invalidCertificate
        /// The private key does not belong to the certificate.
        case keyCertificateMismatch
        /// OpenSSL failed while signing or digesting.
        case cryptoFailure
        /// The XML could not be parsed or canonicalized.
        case invalidXML
        /// The signature or the assertion it covers is not acceptable.
        case invalidSignature
    }

    package var kind: Kind
    package var message: String

    package init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    package var description: String { message }
}
