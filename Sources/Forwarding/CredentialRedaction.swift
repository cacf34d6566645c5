import Foundation

/// The back-end credential Midtier added to a call (a bearer token, or a technical user's Basic
/// credentials), kept out of the answer the device sees.
///
/// Some back ends echo what they were sent: an error page quoting the `Authorization` header, a
/// debug endpoint, a `WWW-Authenticate` naming the rejected token. The device must never hold a
/// back-end credential, so every occurrence in the answer's headers and body — read whole or
/// streamed, across the chunks it comes in — is replaced by `[redacted]` (``ByteReplacements``,
/// the matcher URL rewriting uses too). A streamed body whose `Content-Length` goes to the
/// device as it is (a download) gets a mask of the secret's own length instead.
package struct CredentialRedaction: Sendable {
    package static let replacement: [UInt8] = Array("[redacted]".utf8)
    /// Shorter values are not searched for: they would match ordinary text.
    static let minimumLength = 8

    /// Each secret → `[redacted]`, longest first, so that `user:password` is replaced whole
    /// before the password alone.
    let replacements: ByteReplacements

    package var isEmpty: Bool { replacements.isEmpty }

    /// The secrets in an `Authorization` value Midtier sends: a Bearer token; for Basic, the
    /// base64 credentials, `user:password` and the password.
    package init(authorization: String?) {
        replacements = ByteReplacements(Self.secrets(in: authorization).map { ($0, Self.replacement) })
    }

    /// The same secrets, each replaced by a mask of its own length — `[redacted]` then `*`s,
    /// or only `*`s under ten bytes — for a streamed body whose `Content-Length` must stay
    /// right.
    package var keepingLength: ByteReplacements {
        ByteReplacements(
            replacements.replacements.map { replacement in
                let length = replacement.from.count
                let mask =
                    length >= Self.replacement.count
                    ? Self.replacement + [UInt8](repeating: UInt8(ascii: "*"), count: length - Self.replacement.count)
                    : [UInt8](repeating: UInt8(ascii: "*"), count: length)
                return (replacement.from, mask)
            })
    }

    static func secrets(in authorization: String?) -> [[UInt8]] {
        guard let authorization else { return [] }
        if authorization.hasPrefix("Bearer "), !authorization.utf8.dropFirst(7).contains(UInt8(ascii: " ")) {
            let token = Array(authorization.utf8.dropFirst(7))
            return token.count >= Self.minimumLength ? [token] : []
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
        // As a back end might quote them: JSON-escaped (`\/`), percent-encoded (either case),
        // HTML-escaped.
        let forms = found.flatMap { [$0] + Self.quotedForms(of: $0) }
        return Set(forms.filter { $0.utf8.count >= Self.minimumLength }).map { Array($0.utf8) }.sorted { $0.count > $1.count }
    }

    /// `secret` as an echo might write it: in a JSON string (with `/` as `\/`, as PHP and
    /// others write it), percent-encoded with upper- and lower-case digits, and with HTML's
    /// character references. Only the forms that differ from `secret`.
    static func quotedForms(of secret: String) -> [String] {
        var json = "", upper = "", lower = "", html = ""
        for byte in secret.utf8 {
            let character = Character(Unicode.Scalar(byte))
            switch byte {
            case UInt8(ascii: "\\"): json += "\\\\"
            case UInt8(ascii: "\""): json += "\\\""
            case UInt8(ascii: "/"): json += "\\/"
            case 0..<0x20: json += String(format: "\\u%04x", byte)
            default: json.unicodeScalars.append(Unicode.Scalar(byte))
            }
            let unreserved =
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
            if unreserved {
                upper.append(character)
                lower.append(character)
            } else {
                upper += String(format: "%%%02X", byte)
                lower += String(format: "%%%02x", byte)
            }
            switch byte {
            case UInt8(ascii: "&"): html += "&amp;"
            case UInt8(ascii: "<"): html += "&lt;"
            case UInt8(ascii: ">"): html += "&gt;"
            case UInt8(ascii: "\""): html += "&quot;"
            case UInt8(ascii: "'"): html += "&#39;"
            default: html.unicodeScalars.append(Unicode.Scalar(byte))
            }
        }
        // Non-ASCII bytes were taken one by one above: those forms are only right for ASCII.
        let ascii = secret.utf8.allSatisfy { $0 < 0x80 }
        return ((ascii ? [json, html] : []) + [upper, lower]).filter { $0 != secret }
    }

    /// `text` with every secret replaced, or nil when it holds none (searched in place: no
    /// copy of a header value that holds no secret, which is every one on the hot path).
    package func redact(_ text: String) -> String? {
        guard !isEmpty else { return nil }
        var text = text
        text.makeContiguousUTF8()
        return redact(text.utf8).map { String(decoding: $0, as: UTF8.self) }
    }

    /// `bytes` with every secret replaced, or nil when they hold none (found without copying).
    package func redact(_ bytes: some Collection<UInt8>) -> [UInt8]? {
        replacements.replaced(in: bytes)
    }
}
