import Foundation
package import NIOCore

/// Rewrites the back end's absolute URLs to the device-facing URL under `/{destination}/`
/// (docs/forwarding.md, "Answers: URL rewriting"), so that paging (`__next`), navigation
/// (`__deferred`), entity URIs (`__metadata.uri`), `xml:base`, Atom `link href` and `Location`
/// keep going through Midtier.
///
/// The rule is one prefix replacement, applied wherever the back end's base URL appears in a
/// header or a textual body: `<destination URL>/…` → `<publicURL>/<destination>/…`, in plain
/// and in JSON-escaped (`http:\/\/…`) spelling. A URL outside the destination's base path is
/// left alone — it cannot be reached through Midtier anyway. Bodies are rewritten as they
/// stream, never collected.
package struct URLRewriter: Sendable {
    /// Back-end base URL (with what may follow it) → device-facing one.
    let replacements: ByteReplacements

    /// - Parameters:
    ///   - backendBase: the destination's `URL` (no trailing slash).
    ///   - deviceBase: `publicURL/<destination>` (no trailing slash).
    package init(backendBase: String, deviceBase: String) {
        var pairs: [(String, String)] = []
        for terminator in ["/", "?", "\"", "<", "'", "#"] {
            pairs.append((backendBase + terminator, deviceBase + terminator))
        }
        // JSON may escape slashes.
        func jsonEscaped(_ text: String) -> String { text.replacingOccurrences(of: "/", with: "\\/") }
        for terminator in ["\\/", "?", "\""] {
            pairs.append((jsonEscaped(backendBase) + terminator, jsonEscaped(deviceBase) + terminator))
        }
        // An explicit default port is the same origin.
        for (scheme, port) in [("http://", ":80"), ("https://", ":443")] where backendBase.hasPrefix(scheme) {
            let host = backendBase.dropFirst(scheme.count).prefix { $0 != "/" }
            if !host.contains(":") {
                let withPort = scheme + host + port + backendBase.dropFirst(scheme.count + host.count)
                pairs.append((withPort + "/", deviceBase + "/"))
                pairs.append((withPort + "\"", deviceBase + "\""))
            }
        }
        replacements = ByteReplacements(pairs.map { (Array($0.0.utf8), Array($0.1.utf8)) })
    }

    /// Whether a response body of this type is text that may carry URLs: JSON, XML (Atom,
    /// EDMX, AtomPub service documents) and OData `$batch` multipart answers.
    package static func isRewritable(contentType: String?) -> Bool {
        guard let contentType else { return false }
        // The media type's bytes, before any parameter, without surrounding blanks; compared
        // in ASCII lower case (no copy: this runs on every answer).
        var type = Substring(contentType).utf8.prefix { $0 != UInt8(ascii: ";") }
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        while let first = type.first, isBlank(first) { type = type.dropFirst() }
        while let last = type.last, isBlank(last) { type = type.dropLast() }
        func lowered(_ byte: UInt8) -> UInt8 { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte }
        func `is`(_ name: StaticString) -> Bool {
            name.withUTF8Buffer { type.lazy.map(lowered).elementsEqual($0) }
        }
        func ends(with suffix: StaticString) -> Bool {
            suffix.withUTF8Buffer { type.count >= $0.count && type.suffix($0.count).lazy.map(lowered).elementsEqual($0) }
        }
        return `is`("application/json") || ends(with: "+json") || `is`("application/xml") || `is`("text/xml")
            || ends(with: "+xml") || `is`("multipart/mixed")
    }

    /// A header value (`Location`, `Content-Location`) with the base URL rewritten.
    package func rewrite(_ value: String) -> String {
        // A trailing quote lets a bare base URL match its "end" form.
        var carry: ByteBuffer?
        var output = rewrite(ByteBuffer(string: value + "\""), carry: &carry, final: true)
        if output.readableBytesView.last == UInt8(ascii: "\"") { output.moveWriterIndex(to: output.writerIndex - 1) }
        return String(buffer: output)
    }

    /// `chunk` (after the `carry` held back from the previous one) with the back end's URLs
    /// rewritten; unless `final`, a tail that could be the start of a URL cut by the chunk
    /// boundary is held back in `carry` for the next call.
    func rewrite(_ chunk: ByteBuffer, carry: inout ByteBuffer?, final: Bool) -> ByteBuffer {
        replacements.replace(chunk, carry: &carry, final: final)
    }

    /// `body`, rewritten as it streams.
    package func rewriting<Base: AsyncSequence & Sendable>(_ body: Base) -> ReplacedBody<Base> where Base.Element == ByteBuffer {
        replacements.replacing(body)
    }
}
