import Foundation
import NIOCore

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
    struct Replacement: Sendable {
        let from: [UInt8]
        let to: [UInt8]
    }

    let replacements: [Replacement]

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
        replacements = pairs.map { Replacement(from: Array($0.0.utf8), to: Array($0.1.utf8)) }
    }

    /// Whether a response body of this type is text that may carry URLs: JSON, XML (Atom,
    /// EDMX, AtomPub service documents) and OData `$batch` multipart answers.
    package static func isRewritable(contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = contentType.prefix { $0 != ";" }.trimmingCharacters(in: " \t").lowercased()
        return type == "application/json" || type.hasSuffix("+json") || type == "application/xml" || type == "text/xml"
            || type.hasSuffix("+xml") || type == "multipart/mixed"
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
    /// rewritten. Unless `final`, a tail that could be the start of a URL cut by the chunk
    /// boundary is held back in `carry` for the next call. Unmatched bytes are not copied: a
    /// chunk without a URL comes back as (a slice of) itself.
    func rewrite(_ chunk: ByteBuffer, carry: inout ByteBuffer?, final: Bool) -> ByteBuffer {
        var work = chunk
        if var held = carry {
            carry = nil
            var chunk = chunk
            held.writeBuffer(&chunk)
            work = held
        }
        var output: ByteBuffer?
        var copiedUpTo = 0
        var holdFrom = work.readableBytes
        work.withUnsafeReadableBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            let count = bytes.count
            var index = 0
            search: while index < count, let found = memchr(base + index, Int32(UInt8(ascii: "h")), count - index) {
                let position = base.distance(to: UnsafeRawPointer(found))
                for replacement in replacements {
                    let length = replacement.from.count
                    if length <= count - position {
                        if memcmp(found, replacement.from, length) == 0 {
                            if output == nil { output = ByteBuffer(); output!.reserveCapacity(count + 256) }
                            output!.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[copiedUpTo..<position]))
                            output!.writeBytes(replacement.to)
                            index = position + length
                            copiedUpTo = index
                            continue search
                        }
                    } else if !final, memcmp(found, replacement.from, count - position) == 0 {
                        // The start of a URL the next chunk may finish.
                        holdFrom = position
                        break search
                    }
                }
                index = position + 1
            }
            if output != nil {
                output!.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[copiedUpTo..<holdFrom]))
            }
        }
        if holdFrom < work.readableBytes {
            carry = work.getSlice(at: work.readerIndex + holdFrom, length: work.readableBytes - holdFrom)
        }
        if let output { return output }
        return holdFrom == work.readableBytes ? work : work.getSlice(at: work.readerIndex, length: holdFrom)!
    }

    /// `body`, rewritten as it streams.
    package func rewriting<Base: AsyncSequence & Sendable>(_ body: Base) -> RewrittenBody<Base> where Base.Element == ByteBuffer {
        RewrittenBody(base: body, rewriter: self)
    }
}

/// A response body with the back end's base URL rewritten chunk by chunk.
package struct RewrittenBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    package typealias Element = ByteBuffer
    let base: Base
    let rewriter: URLRewriter

    package struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let rewriter: URLRewriter
        var carry: ByteBuffer?
        var finished = false

        package mutating func next() async throws -> ByteBuffer? {
            while !finished {
                if let chunk = try await base.next() {
                    let output = rewriter.rewrite(chunk, carry: &carry, final: false)
                    if output.readableBytes > 0 { return output }
                } else {
                    finished = true
                    guard let held = carry else { return nil }
                    carry = nil
                    let output = rewriter.rewrite(held, carry: &carry, final: true)
                    if output.readableBytes > 0 { return output }
                }
            }
            return nil
        }
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), rewriter: rewriter) }
}
