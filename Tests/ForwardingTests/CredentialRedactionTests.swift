import Foundation
import NIOCore
import Testing

@testable import Forwarding

@Suite(.timeLimit(.minutes(10))) struct CredentialRedactionTests {
    @Test func findsTheCredentialInEveryFormAndNothingElse() {
        let bearer = CredentialRedaction(authorization: "Bearer abc.DEF-123_token")
        #expect(
            bearer.redact("error: token abc.DEF-123_token rejected; again abc.DEF-123_token") == "error: token [redacted] rejected; again [redacted]")
        #expect(bearer.redact("nothing here") == nil)
        #expect(bearer.redact(Array("abc.DEF-123_toke".utf8)) == nil, "a prefix is not the token")

        let basic = CredentialRedaction(authorization: "Basic " + Data("TECH:secret-password".utf8).base64EncodedString())
        let encoded = Data("TECH:secret-password".utf8).base64EncodedString()
        #expect(basic.redact("Authorization: Basic \(encoded)") == "Authorization: Basic [redacted]")
        #expect(basic.redact("user TECH:secret-password") == "user [redacted]")
        #expect(basic.redact("password secret-password") == "password [redacted]")

        #expect(
            CredentialRedaction(authorization: "Basic " + Data("u:pw".utf8).base64EncodedString()).redact("pw u:pw") == nil,
            "values under 8 bytes would match ordinary text")
        #expect(CredentialRedaction(authorization: nil).isEmpty)
    }

    /// A back end that quotes the header in JSON (`\/` for `/`, as PHP writes it),
    /// percent-encoded (either case) or HTML-escaped shows the device nothing of it.
    @Test func findsTheCredentialAsEchoesQuoteIt() throws {
        let credentials = "TECH:p/ss+w0rd&<x>"
        let encoded = Data(credentials.utf8).base64EncodedString()
        let basic = CredentialRedaction(authorization: "Basic " + encoded)
        #expect(encoded.contains("/") || encoded.contains("+"), "the test needs a base64 value with / or +")
        let json = encoded.replacingOccurrences(of: "/", with: "\\/")
        #expect(basic.redact(#"{"sent":"Basic \#(json)"}"#) == #"{"sent":"Basic [redacted]"}"#)
        let percent = try #require(encoded.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        #expect(basic.redact("a=\(percent)") == "a=[redacted]")
        #expect(basic.redact("password p\\/ss+w0rd&<x>") == "password [redacted]")
        #expect(basic.redact("password p/ss+w0rd&amp;&lt;x&gt;") == "password [redacted]")
        #expect(basic.redact("password p%2fss%2bw0rd%26%3cx%3e") == "password [redacted]")
    }
}

/// The replacement tables are made once per credential and destination, and a credential's
/// table only ever serves that credential's exact bytes.
@Suite(.timeLimit(.minutes(10))) struct AnswerTableMemoTests {
    let rewriter = URLRewriter(backendBase: "http://backend/base", deviceBase: "https://m.example/sf")

    @Test func oneTablePerCredentialByItsBytes() {
        let memo = AnswerTableMemo(rewriter: rewriter)
        // Canonically equivalent (Swift's == says equal), different bytes: two credentials.
        let composed = "Bearer token-caf\u{E9}-0001", decomposed = "Bearer token-cafe\u{301}-0001"
        #expect(composed == decomposed, "the premise")
        let first = memo.tables(for: composed)
        #expect(memo.tables(for: composed).redaction.redact("echo token-caf\u{E9}-0001") == "echo [redacted]")
        #expect(memo.count == 1)
        let second = memo.tables(for: decomposed)
        #expect(memo.count == 2)
        #expect(second.redaction.redact("echo token-cafe\u{301}-0001") == "echo [redacted]")
        #expect(first.redaction.redact("echo token-cafe\u{301}-0001") == nil)
        #expect(memo.tables(for: nil).redaction.isEmpty)
        #expect(memo.count == 2)
        // Redaction first, then the back end's URLs.
        let body = ByteBuffer(string: "{\"uri\":\"http://backend/base/X\",\"t\":\"token-caf\u{E9}-0001\"}")
        var carry: ByteBuffer?
        #expect(
            String(buffer: first.redactingAndRewriting.replace(body, carry: &carry, final: true))
                == "{\"uri\":\"https://m.example/sf/X\",\"t\":\"[redacted]\"}")
    }

    @Test func boundedByCapacity() {
        let memo = AnswerTableMemo(rewriter: rewriter, capacity: 3)
        for index in 0..<3 { _ = memo.tables(for: "Bearer token-number-\(index)") }
        #expect(memo.count == 3)
        _ = memo.tables(for: "Bearer token-number-3")
        #expect(memo.count == 1)
        #expect(memo.tables(for: "Bearer token-number-0").redaction.redact("token-number-0") == "[redacted]")
    }
}

/// The credential in a streamed answer, cut at every chunk boundary, alone and together with
/// URL rewriting (one pass does both).
@Suite(.timeLimit(.minutes(10))) struct StreamedRedactionTests {
    static func replaced(_ text: String, chunk: Int, by replacements: ByteReplacements) async throws -> String {
        let bytes = Array(text.utf8)
        let chunks = stride(from: 0, to: bytes.count, by: chunk).map { ByteBuffer(bytes: bytes[$0..<min($0 + chunk, bytes.count)]) }
        let stream = AsyncStream<ByteBuffer> { continuation in
            for buffer in chunks { continuation.yield(buffer) }
            continuation.finish()
        }
        var output = ""
        for try await buffer in replacements.replacing(stream) { output += String(buffer: buffer) }
        return output
    }

    @Test func redactsAcrossEveryChunkBoundary() async throws {
        let bearer = CredentialRedaction(authorization: "Bearer eyJ.token-value_123")
        let input =
            #"{"echo":"Bearer eyJ.token-value_123","again":"eyJ.token-value_123eyJ.token-value_123","near":"eyJ.token-value_12","end":"eyJ.token-value_123"#
        let expected = #"{"echo":"Bearer [redacted]","again":"[redacted][redacted]","near":"eyJ.token-value_12","end":"[redacted]"#
        let basic = CredentialRedaction(authorization: "Basic " + Data("TECH:secret-password".utf8).base64EncodedString())
        let basicInput =
            "user TECH:secret-password, password secret-password, header Basic " + Data("TECH:secret-password".utf8).base64EncodedString()
        let rewriter = URLRewriter(backendBase: "http://backend:8081/base", deviceBase: "https://m.example/sf")
        let both = #"{"uri":"http://backend:8081/base/X('1')","auth":"Bearer eyJ.token-value_123","e":"eyJ.token-value_123"}"#
        for chunk in [1, 2, 3, 7, 16, 1000] {
            #expect(try await Self.replaced(input, chunk: chunk, by: bearer.replacements) == expected, "chunk size \(chunk)")
            #expect(
                try await Self.replaced(basicInput, chunk: chunk, by: basic.replacements)
                    == "user [redacted], password [redacted], header Basic [redacted]")
            #expect(try await Self.replaced(input, chunk: chunk, by: bearer.keepingLength).utf8.count == input.utf8.count)
            #expect(
                try await Self.replaced(input, chunk: chunk, by: bearer.keepingLength)
                    == input.replacingOccurrences(of: "eyJ.token-value_123", with: "[redacted]*********"))
            #expect(
                try await Self.replaced(both, chunk: chunk, by: bearer.replacements + rewriter.replacements)
                    == #"{"uri":"https://m.example/sf/X('1')","auth":"Bearer [redacted]","e":"[redacted]"}"#, "chunk size \(chunk)")
        }
    }

    @Test func aChunkWithoutAMatchIsNotCopied() {
        let bearer = CredentialRedaction(authorization: "Bearer eyJ.token-value_123")
        let chunk = ByteBuffer(string: String(repeating: "plain text, no token; ", count: 100))
        var carry: ByteBuffer?
        let output = bearer.replacements.replace(chunk, carry: &carry, final: false)
        #expect(carry == nil && output == chunk)
        output.withUnsafeReadableBytes { out in chunk.withUnsafeReadableBytes { #expect(out.baseAddress == $0.baseAddress, "the same storage") } }
    }
}
