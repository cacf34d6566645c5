import COpenSSL
import Foundation

/// Small helpers over OpenSSL's C API: digests, random bytes, error text.
enum OpenSSL {
    /// The oldest error on this thread's OpenSSL error queue, as text; clears the queue.
    static func lastErrorText() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "no detail from OpenSSL" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) throws(SigningError) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBufferPointer { raw in
            digest.withUnsafeMutableBufferPointer { out in
                EVP_Digest(raw.baseAddress, raw.count, out.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        guard ok == 1 else { throw SigningError(.cryptoFailure, "SHA-256 failed: \(lastErrorText())") }
        return Array(digest.prefix(Int(length)))
    }

    /// `count` cryptographically strong random bytes.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        precondition(ok == 1, "OpenSSL RAND_bytes failed: the system has no entropy source")
        return bytes
    }

    /// Runs `body` with a read-only memory BIO over `bytes`.
    static func withMemoryBIO<T>(_ bytes: [UInt8], _ body: (OpaquePointer) throws(SigningError) -> T) throws(SigningError) -> T {
        let bio: OpaquePointer? = bytes.withUnsafeBytes { raw in
            // BIO_new_mem_buf does not copy: `bytes` outlives the BIO because it is freed below.
            BIO_new_mem_buf(raw.baseAddress, Int32(raw.count))
        }
        guard let bio else { throw SigningError(.cryptoFailure, "cannot allocate a memory BIO") }
        defer { BIO_free(bio) }
        return try body(bio)
    }
}
