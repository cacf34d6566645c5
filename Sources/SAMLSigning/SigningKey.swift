import COpenSSL

/// An RSA private key loaded from PEM, used to sign assertions with RSA-SHA256.
///
/// The `EVP_PKEY` is owned here and freed in `deinit`. OpenSSL 3 allows concurrent signing
/// with one `EVP_PKEY` (each signature gets its own `EVP_MD_CTX`), so sharing is safe.
package final class SigningKey: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Loads a PEM private key (PKCS#1, PKCS#8, or encrypted PKCS#8 with `passphrase`).
    package init(pem: [UInt8], passphrase: String? = nil) throws(SigningError) {
        ERR_clear_error()
        let key: OpaquePointer? = try OpenSSL.withMemoryBIO(pem) { bio in
            if let passphrase {
                // With a nil callback, OpenSSL takes `u` as the NUL-terminated passphrase.
                return passphrase.withCString { PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0)) }
            }
            // An empty passphrase makes an encrypted key fail instead of prompting on a terminal.
            return "".withCString { PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0)) }
        }
        guard let key else {
            let detail = OpenSSL.lastErrorText()
            throw SigningError(
                .invalidPrivateKey,
                "the private key does not load (\(passphrase == nil ? "no passphrase given" : "wrong passphrase or format")): \(detail)")
        }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else {
            EVP_PKEY_free(key)
            throw SigningError(.invalidPrivateKey, "the private key is not an RSA key (RSA-SHA256 needs one)")
        }
        guard EVP_PKEY_get_bits(key) >= 2048 else {
            EVP_PKEY_free(key)
            throw SigningError(.invalidPrivateKey, "the RSA key is shorter than 2048 bits")
        }
        self.pointer = key
    }

    deinit { EVP_PKEY_free(pointer) }

    /// RSA-SHA256 (PKCS#1 v1.5) signature of `data`.
    package func sign(_ data: [UInt8]) throws(SigningError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw SigningError(.cryptoFailure, "cannot allocate a digest context") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            throw SigningError(.cryptoFailure, "cannot start RSA-SHA256 signing: \(OpenSSL.lastErrorText())")
        }
        var length = 0
        guard data.withUnsafeBufferPointer({ EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
            throw SigningError(.cryptoFailure, "cannot size the signature: \(OpenSSL.lastErrorText())")
        }
        var signature = [UInt8](repeating: 0, count: length)
        let ok = signature.withUnsafeMutableBufferPointer { out in
            data.withUnsafeBufferPointer { EVP_DigestSign(context, out.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard ok == 1 else { throw SigningError(.cryptoFailure, "RSA-SHA256 signing failed: \(OpenSSL.lastErrorText())") }
        return Array(signature.prefix(length))
    }

    /// Whether this key is the private half of `certificate`'s public key.
    package func matches(_ certificate: SigningCertificate) -> Bool {
        X509_check_private_key(certificate.pointer, pointer) == 1
    }
}
