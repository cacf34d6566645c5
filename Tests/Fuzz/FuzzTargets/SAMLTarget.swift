import Foundation
import SAMLSigning
import TokenExchange

/// `saml`: a signed SAML 2.0 assertion as the SuccessFactors sandbox's token service and
/// `midtier assertion verify` read it from outside (AssertionVerifier: XML parsing, exclusive
/// c14n, the XML-DSig checks, the claims), then the expectations check. The verifier trusts the
/// test certificate (FuzzKeys).
enum SAMLTarget {
    static let verifier: AssertionVerifier? = {
        guard let certificate = try? SigningCertificate(pem: Array(FuzzKeys.samlCertificatePEM.utf8)) else { return nil }
        return AssertionVerifier(trustedCertificate: certificate)
    }()

    static func run(_ bytes: [UInt8]) {
        guard let verifier else { fatalError("the saml target's test certificate does not load") }
        guard let claims = try? verifier.verify(bytes) else { return }
        let expectations = AssertionExpectations(clientID: "fuzz-client", recipient: "https://sf.fuzz.example/oauth/token")
        _ = try? expectations.check(claims, now: Date(timeIntervalSince1970: 1_800_000_000))
    }

    /// A valid signed assertion for the seed corpus (`midtier-fuzz make-seed saml`).
    static func signedSample() throws -> String {
        let signer = try AssertionSigner(
            keyPEM: Array(FuzzKeys.samlKeyPEM.utf8), passphrase: nil,
            certificatePEM: Array(FuzzKeys.samlCertificatePEM.utf8))
        let assertion = SAMLAssertion(
            id: "_0123456789abcdef0123456789abcdef", issueInstant: Date(timeIntervalSince1970: 1_800_000_000),
            issuer: "fuzz-client", nameID: "alice", recipient: "https://sf.fuzz.example/oauth/token",
            sessionIndex: "_fedcba9876543210fedcba9876543210", apiKey: "fuzz-client")
        return try signer.sign(assertion)
    }
}

/// `token-response`: the OAuth2 token service's JSON answer (the access token, its type and
/// lifetime) and its error body's reason, as the SAML bearer exchange reads them.
enum TokenResponseTarget {
    static func run(_ bytes: [UInt8]) {
        _ = try? TokenResponse.parse(bytes)
        _ = TokenResponse.reason(fromErrorBody: bytes, avoiding: ["secret-assertion"])
    }
}
