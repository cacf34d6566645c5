import NIOCore

/// Rewrites the back end's absolute URLs to the device-facing URL under `/{destination}/`
/// (SPEC §6), so that paging (`__next`), navigation (`__deferred`), entity URIs
/// (`__metadata.uri`), `xml:base`, Atom `link href` and `Location` keep going through Midtier.
///
/// The rule is one prefix replacement, applied wherever the back end's base URL appears in a
/// header or a textual body: `<destination URL>/…` → `<publicURL>/<destination>/…`, in plain
/// and in JSON-escaped (`http:\/\/…`) spelling. A URL outside the destination's base path is
/// left alone — it cannot be reached through Midtier anyway. Bodies are rewritten as they
/// stream, never collected.
public struct URLRewriter: Sendable {
    struct Replacement: Sendable {
        let from: [UInt8]
        let to: [UInt8]
    }

    let replacements: [Replacement]
    let longest: Int

    /// - Parameters:
    ///   - backendBase: the destination's `URL` (no trailing slash).
    ///   - deviceBase: `publicURL/<destination>` (no trailing slash).
    public init(backendBase: String, deviceBase: String) {
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
        replacements = pairs.map { Replacement(from: Array($0.0.utf8), to: Array($0.1.utf8)) }
        longest = replacements.map(\.from.count).max() ?? 1
    }

    /// Whether a response body of this type is text that may carry URLs: JSON, XML (Atom,
    /// EDMX, AtomPub service documents) and OData `$batch` multipart answers.
    public static func isRewritable(contentType: String?) -> Bool {
        guard let type = contentType?.lowercased().split(separator: ";").first?.trimmingCharacters(in: " \t") else { return false }
        return type == "application/json" || type.hasSuffix("+json") || type == "application/xml" || type == "text/xml"
            || type.hasSuffix("+xml") || type == "multipart/mixed"
    }

    /// A header value (`Location`, `Content-Location`) with the base URL rewritten.
    public func rewrite(_ value: String) -> String {
        var bytes = Array(value.utf8)
        bytes.append(UInt8(ascii: "\""))  // let a bare base URL match its "end" form
        var output: [UInt8] = []
        _ = rewrite(&bytes, into: &output, final: true)
        if output.last == UInt8(ascii: "\"") { output.removeLast() }
        return String(decoding: output, as: UTF8.self)
    }

    /// Rewrites `input` into `output`. Unless `final`, up to `longest - 1` trailing bytes that
    /// could begin a match are left in `input` for the next chunk. Returns whether anything
    /// was replaced.
    @discardableResult
    func rewrite(_ input: inout [UInt8], into output: inout [UInt8], final: Bool) -> Bool {
        var replaced = false
        var index = 0
        let count = input.count
        let safeEnd = final ? count : max(0, count - (longest - 1))
        var copiedUpTo = 0
        search: while index < safeEnd {
            if input[index] == UInt8(ascii: "h") {
                for replacement in replacements where replacement.from.count <= count - index {
                    if input[index..<index + replacement.from.count].elementsEqual(replacement.from) {
                        output.append(contentsOf: input[copiedUpTo..<index])
                        output.append(contentsOf: replacement.to)
                        index += replacement.from.count
                        copiedUpTo = index
                        replaced = true
                        continue search
                    }
                }
            }
            index += 1
        }
        let keepFrom = max(copiedUpTo, safeEnd)
        output.append(contentsOf: input[copiedUpTo..<keepFrom])
        input.removeFirst(keepFrom)
        return replaced
    }

    /// `body`, rewritten as it streams.
    public func rewriting<Base: AsyncSequence & Sendable>(_ body: Base) -> RewrittenBody<Base> where Base.Element == ByteBuffer {
        RewrittenBody(base: body, rewriter: self)
    }
}

/// A response body with the back end's base URL rewritten chunk by chunk.
public struct RewrittenBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    public typealias Element = ByteBuffer
    let base: Base
    let rewriter: URLRewriter

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let rewriter: URLRewriter
        var pending: [UInt8] = []
        var finished = false

        public mutating func next() async throws -> ByteBuffer? {
            while !finished {
                if var buffer = try await base.next() {
                    pending.append(contentsOf: buffer.readBytes(length: buffer.readableBytes) ?? [])
                    var output: [UInt8] = []
                    rewriter.rewrite(&pending, into: &output, final: false)
                    if !output.isEmpty { return ByteBuffer(bytes: output) }
                } else {
                    finished = true
                    var output: [UInt8] = []
                    rewriter.rewrite(&pending, into: &output, final: true)
                    if !output.isEmpty { return ByteBuffer(bytes: output) }
                }
            }
            return nil
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), rewriter: rewriter) }
}
