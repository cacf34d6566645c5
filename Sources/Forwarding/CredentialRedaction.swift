import Foundation

/// The back-end credential Midtier added to a call (a bearer token, or a technical user's Basic
/// credentials), kept out of the answer the device sees.
///
/// Some back ends echo what they were sent: an error page quoting the `Authorization` header, a
/// debug endpoint, a `WWW-Authenticate` naming the rejected token. The device must never hold a
/// back-end credential, so every occurrence in the answer's headers and in a body read whole is
/// replaced by `[redacted]`. (A large, streamed body is passed as it comes.)
package struct CredentialRedaction: Sendable {
    package static let replacement: [UInt8] = Array("[redacted]".utf8)
    /// Shorter values are not searched for: they would match ordinary text.
    static let minimumLength = 8

    let secrets: [[UInt8]]

    package var isEmpty: Bool { secrets.isEmpty }

    /// The secrets in an `Authorization` value Midtier sends: a Bearer token; for Basic, the
    /// base64 credentials, `user:password` and the password.
    package init(authorization: String?) {
        guard let authorization else { secrets = []; return }
        if authorization.hasPrefix("Bearer "), !authorization.utf8.dropFirst(7).contains(UInt8(ascii: " ")) {
            let token = Array(authorization.utf8.dropFirst(7))
            secrets = token.count >= Self.minimumLength ? [token] : []
            return
        }
        var found: [String] = []
        let parts = authorization.split(separator: " ", maxSplits: 1)
        if parts.count == 2 {
            let value = String(parts[1])
            found.append(value)
            if parts[0].lowercased() == "basic", let data = Data(base64Encoded: value), let decoded = String(data: data, encoding: .utf8) {
                found.append(decoded)
                if let colon = decoded.firstIndex(of: ":") { found.append(String(decoded[decoded.index(after: colon)...])) }
            }
        }
        // Longest first, so that `user:password` is replaced whole before the password alone.
        secrets = Set(found.filter { $0.utf8.count >= Self.minimumLength }).map { Array($0.utf8) }.sorted { $0.count > $1.count }
    }

    /// `text` with every secret replaced, or nil when it holds none (searched in place: no
    /// copy of a header value that holds no secret, which is every one on the hot path).
    package func redact(_ text: String) -> String? {
        guard !secrets.isEmpty else { return nil }
        var text = text
        text.makeContiguousUTF8()
        return redact(text.utf8).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `bytes` with every secret replaced, or nil when they hold none (found without copying).
    package func redact(_ bytes: some Collection<UInt8>) -> [UInt8]? {
        guard !secrets.isEmpty else { return nil }
        let holdsOne = bytes.withContiguousStorageIfAvailable { storage in
            secrets.contains { Self.contains($0, in: storage) }
        }
        if holdsOne == false { return nil }
        var current = Array(bytes)
        var changed = false
        for secret in secrets {
            if let replaced = Self.replace(secret, in: current) {
                current = replaced
                changed = true
            }
        }
        return changed ? current : nil
    }

    private static func contains(_ secret: [UInt8], in storage: UnsafeBufferPointer<UInt8>) -> Bool {
        guard storage.count >= secret.count, let first = secret.first, let base = storage.baseAddress else { return false }
        return secret.withUnsafeBufferPointer { needle in
            let last = storage.count - secret.count
            var index = 0
            while index <= last, let found = memchr(base + index, Int32(first), last - index + 1) {
                let position = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                if memcmp(found, needle.baseAddress!, secret.count) == 0 { return true }
                index = position + 1
            }
            return false
        }
    }

    private static func replace(_ secret: [UInt8], in bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count >= secret.count, let first = secret.first else { return nil }
        var output: [UInt8] = []
        var copiedUpTo = 0
        var index = 0
        let last = bytes.count - secret.count
        while index <= last {
            if bytes[index] == first, bytes[index..<index + secret.count].elementsEqual(secret) {
                output.append(contentsOf: bytes[copiedUpTo..<index])
                output.append(contentsOf: replacement)
                index += secret.count
                copiedUpTo = index
            } else {
                index += 1
            }
        }
        guard copiedUpTo > 0 else { return nil }
        output.append(contentsOf: bytes[copiedUpTo...])
        return output
    }
}
