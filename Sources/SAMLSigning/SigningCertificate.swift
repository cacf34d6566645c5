import COpenSSL
import Foundation

/// An X.509 certificate loaded from PEM: the one Midtier puts into `KeyInfo`, or the one a
/// verifier trusts (the registered certificate).
package final class SigningCertificate: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The DER encoding, base64 without line breaks, as `X509Certificate` carries it.
    package let derBase64: String

    package init(pem: [UInt8]) throws(SigningError) {
        ERR_clear_error()
        let certificate: OpaquePointer? = try OpenSSL.withMemoryBIO(pem) { bio in PEM_read_bio_X509(bio, nil, nil, nil) }
        guard let certificate else {
            throw SigningError(.invalidCertificate, "the certificate does not load as PEM X.509: \(OpenSSL.lastErrorText())")
        }
        var derPointer: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509(certificate, &derPointer)
        guard length > 0, let derPointer else {
            X509_free(certificate)
            throw SigningError(.invalidCertificate, "the certificate cannot be DER-encoded: \(OpenSSL.lastErrorText())")
        }
        self.derBase64 = Data(bytes: derPointer, count: Int(length)).base64EncodedString()
        midtier_openssl_free(derPointer)
        self.pointer = certificate
    }

    deinit { X509_free(pointer) }

    /// Whether `signature` is a valid RSA-SHA256 signature of `data` by this certificate's key.
    package func verify(signature: [UInt8], of data: [UInt8]) -> Bool {
        guard let publicKey = X509_get0_pubkey(pointer), EVP_PKEY_get_base_id(publicKey) == EVP_PKEY_RSA else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context); ERR_clear_error() }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, publicKey) == 1 else { return false }
        let result = signature.withUnsafeBufferPointer { sig in
            data.withUnsafeBufferPointer { EVP_DigestVerify(context, sig.baseAddress, sig.count, $0.baseAddress, $0.count) }
        }
        return result == 1
    }
}
