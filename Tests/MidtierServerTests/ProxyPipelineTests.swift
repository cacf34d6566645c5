import Foundation
import MidtierTestSupport
import Testing

/// Proxy calls answered from the device connection's pipeline (docs/architecture.md, "The
/// request path") beside Hummingbird's routes, on one connection over a real socket.
@Suite(.timeLimit(.minutes(10))) struct ProxyPipelineTests {
    /// Requests sent back to back on one connection (HTTP/1.1 pipelining) are answered in the
    /// order they were sent, whichever of the two answers each: proxy calls without a body
    /// (the pipeline handler), an own route and a proxy call with a body (Hummingbird).
    @Test func pipelinedRequestsAreAnsweredInTheOrderSent() async throws {
        try await TestEnvironment.with { environment in
            let id = try await environment.register(.alice)
            let device = "Host: localhost\r\nAuthorization: \(TestUser.alice.basic)\r\nX-SMP-APPCID: \(id)\r\n"
            let requests = [
                "GET /echo/first HTTP/1.1\r\n\(device)\r\n",
                "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
                "GET /echo/second HTTP/1.1\r\n\(device)\r\n",
                "POST /echo/third HTTP/1.1\r\n\(device)Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                "DELETE /echo/fourth HTTP/1.1\r\n\(device)Connection: close\r\n\r\n",
                "GET /echo/never HTTP/1.1\r\n\(device)\r\n",
            ]
            let connection = try RawConnection(port: environment.midtierPort)
            try connection.send(requests.joined())
            let received = try await connection.closedByPeer()
            #expect(received.components(separatedBy: "HTTP/1.1 ").count == 6, "five answers: \(received)")
            #expect(received.components(separatedBy: "HTTP/1.1 200 OK\r\n").count == 6, "all five 200: \(received)")
            // The echo back end writes the path it was called with (JSON escapes the slashes).
            let marks = [#"\/base\/first"#, #"{"status":"ok"}"#, #"\/base\/second"#, #"\/base\/third"#, #"\/base\/fourth"#]
            let positions = marks.map { received.range(of: $0)?.lowerBound }
            #expect(positions.allSatisfy { $0 != nil }, "every answer came: \(received)")
            let found = positions.compactMap { $0 }
            #expect(found == found.sorted(), "in the order sent: \(received)")
            #expect(!received.contains("never"), "nothing after the Connection: close request is answered")
            #expect(environment.echo.requests.map(\.path) == ["/base/first", "/base/second", "/base/third", "/base/fourth"])
        }
    }

    /// The proxy's answers close the connection by Hummingbird's own rule (`Connection` exactly
    /// `close`), so that a request ends the connection or not whichever of the two answers it:
    /// if Hummingbird's rule changes, this test says so.
    @Test func bothAnswerersCloseByTheSameRule() async throws {
        try await TestEnvironment.with { environment in
            let id = try await environment.register(.alice)
            let device = "Host: localhost\r\nAuthorization: \(TestUser.alice.basic)\r\nX-SMP-APPCID: \(id)\r\n"
            for first in ["GET /healthz HTTP/1.1\r\nHost: localhost\r\n", "GET /echo/first HTTP/1.1\r\n\(device)"] {
                // Another spelling: the answer keeps the connection, but NIO's parser reads any
                // spelling as close and refuses what follows (400, closed) — the same for both.
                var connection = try RawConnection(port: environment.midtierPort)
                try connection.send("\(first)Connection: Close\r\n\r\nGET /echo/next HTTP/1.1\r\n\(device)\r\n")
                var received = try await connection.closedByPeer()
                #expect(received.components(separatedBy: "HTTP/1.1 200 OK\r\n").count == 2, "the first answered: \(received)")
                #expect(received.contains("HTTP/1.1 400 Bad Request\r\nConnection: close"), "then refused: \(received)")
                #expect(!received.contains("next"))
                // …`close` does, for either answerer.
                connection = try RawConnection(port: environment.midtierPort)
                try connection.send("\(first)Connection: close\r\n\r\nGET /echo/never HTTP/1.1\r\n\(device)\r\n")
                received = try await connection.closedByPeer()
                #expect(received.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer: \(received)")
                #expect(!received.contains("never"))
            }
        }
    }

    /// An absolute-form target reaches the route its path names, whichever answerer would take
    /// it (docs/reliability.md): here one that Foundation's URL parser refuses.
    @Test func anAbsoluteFormTargetIsReadAsItsPath() async throws {
        try await TestEnvironment.with { environment in
            let connection = try RawConnection(port: environment.midtierPort)
            try connection.send("GET http://h:abc/healthz HTTP/1.1\r\nHost: midtier\r\nConnection: close\r\n\r\n")
            let received = try await connection.closedByPeer()
            #expect(received.hasPrefix("HTTP/1.1 200 OK\r\n") && received.contains(#"{"status":"ok"}"#), "\(received)")
        }
    }
}
