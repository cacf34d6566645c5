import Foundation
import NIOCore
import Testing

@testable import Forwarding

@Suite(.timeLimit(.minutes(10))) struct URLRewriterTests {
    let rewriter = URLRewriter(backendBase: "http://backend:8081/base", deviceBase: "https://m.example/sf")

    func rewrite(_ text: String, chunk: Int) async throws -> String {
        let bytes = Array(text.utf8)
        let chunks = stride(from: 0, to: bytes.count, by: chunk).map { ByteBuffer(bytes: bytes[$0..<min($0 + chunk, bytes.count)]) }
        let stream = AsyncStream<ByteBuffer> { continuation in
            for buffer in chunks { continuation.yield(buffer) }
            continuation.finish()
        }
        var output = ""
        for try await buffer in rewriter.rewriting(stream) { output += String(buffer: buffer) }
        return output
    }

    @Test func rewritesAcrossEveryChunkBoundary() async throws {
        let input =
            #"{"uri":"http://backend:8081/base/X('1')","__next":"http:\/\/backend:8081\/base\/X?$skip=2","other":"http://backend:8081/basement/x","far":"http://elsewhere/base/x","root":"http://backend:8081/base"}"#
        let expected =
            #"{"uri":"https://m.example/sf/X('1')","__next":"https:\/\/m.example\/sf\/X?$skip=2","other":"http://backend:8081/basement/x","far":"http://elsewhere/base/x","root":"https://m.example/sf"}"#
        for chunk in [1, 2, 3, 7, 16, 1000] {
            #expect(try await rewrite(input, chunk: chunk) == expected, "chunk size \(chunk)")
        }
    }

    @Test func rewritesHeaderValuesAndKnowsWhatIsText() {
        #expect(rewriter.rewrite("http://backend:8081/base/Items('7')") == "https://m.example/sf/Items('7')")
        #expect(rewriter.rewrite("http://backend:8081/base") == "https://m.example/sf")
        #expect(rewriter.rewrite("http://other/x") == "http://other/x")
        #expect(URLRewriter.isRewritable(contentType: "application/json;odata=verbose"))
        #expect(URLRewriter.isRewritable(contentType: "application/atom+xml;type=feed"))
        #expect(URLRewriter.isRewritable(contentType: "multipart/mixed; boundary=x"))
        #expect(!URLRewriter.isRewritable(contentType: "application/pdf"))
        #expect(!URLRewriter.isRewritable(contentType: nil))
        // Letter case and blanks around the type do not matter; the type must match whole.
        #expect(URLRewriter.isRewritable(contentType: " \tApplication/JSON ; charset=utf-8"))
        #expect(URLRewriter.isRewritable(contentType: "application/HAL+Json"))
        #expect(URLRewriter.isRewritable(contentType: "TEXT/XML"))
        for other in [
            "", ";", "application/jsonp", "json", "+json", "xml", "text/html", "application/json-patch", "multipart/form-data",
            "application/js on", "application/\u{212A}ml",
        ] {
            #expect(URLRewriter.isRewritable(contentType: other) == (other == "+json"), "\(other)")
        }
    }
}
