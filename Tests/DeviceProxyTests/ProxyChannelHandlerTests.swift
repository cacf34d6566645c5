import HTTPTypes
import Hummingbird
import Logging
import MidtierHTTP
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import Synchronization
import Testing

@testable import DeviceProxy

/// ``ProxyChannelHandler`` on a testing channel: which requests it answers, which go on to
/// Hummingbird (the next handler), and that answers leave in the order the requests came,
/// whoever gives them (docs/architecture.md, "The request path").
@Suite(.timeLimit(.minutes(10))) struct ProxyChannelHandlerTests {
    /// Lets each proxied call answer only when the test says so, and records the calls made.
    final class Gate: Sendable {
        private let state = Mutex<(calls: [String], open: Set<String>, waiting: [String: CheckedContinuation<Void, Never>])>(([], [], [:]))

        var calls: [String] { state.withLock { $0.calls } }

        func pass(_ path: String) async {
            await withCheckedContinuation { continuation in
                let go = state.withLock { state -> Bool in
                    state.calls.append(path)
                    if state.open.remove(path) != nil { return true }
                    state.waiting[path] = continuation
                    return false
                }
                if go { continuation.resume() }
            }
        }

        func open(_ path: String) {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let waiter = state.waiting.removeValue(forKey: path) else {
                    state.open.insert(path)
                    return nil
                }
                return waiter
            }
            waiter?.resume()
        }
    }

    /// Counts the `read`s that pass toward the socket.
    final class ReadCounter: ChannelOutboundHandler, Sendable {
        typealias OutboundIn = Any
        let count = Atomic<Int>(0)
        func read(context: ChannelHandlerContext) {
            count.add(1, ordering: .relaxed)
            context.read()
        }
    }

    struct Connection {
        let channel: NIOAsyncTestingChannel
        let gate: Gate
        let reads: ReadCounter

        init() async throws {
            let gate = Gate()
            let reads = ReadCounter()
            channel = NIOAsyncTestingChannel()
            try await channel.pipeline.addHandler(reads)
            try await channel.pipeline.addHandler(
                ProxyChannelHandler(
                    respond: { request, _ in
                        await gate.pass(request.uri.path)
                        guard request.uri.path != "/dest/stream" else {
                            // A streamed body whose first bytes come only when the test says so.
                            let (body, source) = AsyncStream<ByteBuffer>.makeStream()
                            Task {
                                await gate.pass("/dest/stream/body")
                                source.yield(ByteBuffer(string: "late"))
                                source.finish()
                            }
                            return Response(status: .ok, body: ResponseBody(asyncSequence: body))
                        }
                        return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "answer to \(request.uri.path)")))
                    }, logger: Logger(label: "test")))
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080))
            self.gate = gate
            self.reads = reads
        }

        func send(_ path: String, _ fields: HTTPFields = [:], method: HTTPRequest.Method = .get, body: String? = nil) async throws {
            try await channel.writeInbound(
                HTTPRequestPart.head(
                    HTTPRequest(
                        method: method, scheme: nil, authority: "midtier.test",
                        path: path, headerFields: fields)))
            if let body { try await channel.writeInbound(HTTPRequestPart.body(ByteBuffer(string: body))) }
            try await channel.writeInbound(HTTPRequestPart.end(nil))
        }

        /// What reached Hummingbird: the paths of the heads, in order.
        func passedOn() async throws -> [String] {
            var paths: [String] = []
            while let part = try await channel.readInbound(as: HTTPRequestPart.self) {
                if case .head(let head) = part { paths.append(head.path ?? "") }
            }
            return paths
        }

        /// The answer written to the connection next: status and body. A test whose answer never
        /// comes fails after a while rather than hanging the run: two minutes, a guard against a
        /// hang and never a timing target (20 s was passed once on a loaded 2-core CI run, where
        /// this test took 70 s in all, and closed the channel under a test that would have passed).
        func answer() async throws -> (status: Int, body: String, date: Bool) {
            try await within { try await self.nextAnswer() }
        }

        /// The next part written (and flushed) to the connection, or a failure after a while.
        func nextPart() async throws -> HTTPResponsePart {
            try await within { try await self.channel.waitForOutboundWrite(as: HTTPResponsePart.self) }
        }

        private func within<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
            try await withThrowingTaskGroup { group in
                group.addTask { try await body() }
                group.addTask {
                    try await Task.sleep(for: .seconds(120))
                    // Closing ends the wait for a write, which takes no cancellation.
                    try? await self.channel.close()
                    throw NoAnswer()
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
        }

        struct NoAnswer: Error {}

        private func nextAnswer() async throws -> (status: Int, body: String, date: Bool) {
            guard case .head(let head) = try await channel.waitForOutboundWrite(as: HTTPResponsePart.self) else {
                Issue.record("an answer begins with its head")
                return (0, "", false)
            }
            var body = ""
            while true {
                switch try await channel.waitForOutboundWrite(as: HTTPResponsePart.self) {
                case .body(let buffer): body += String(buffer: buffer)
                case .end: return (head.status.code, body, head.headerFields[.date] != nil)
                case .head: Issue.record("a second head before the end")
                }
            }
        }

        /// Hummingbird's answer to the request it was given.
        func hummingbirdAnswers() async throws {
            try await channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .noContent)))
            try await channel.writeOutbound(HTTPResponsePart.end(nil))
            // What Hummingbird wrote passes through, unchanged.
            #expect(try await channel.readOutbound(as: HTTPResponsePart.self) == .head(HTTPResponse(status: .noContent)))
            #expect(try await channel.readOutbound(as: HTTPResponsePart.self) == .end(nil))
        }

        /// Waits until the loop has run what is queued (the calls it starts among them).
        func settle() async throws {
            await channel.testingEventLoop.run()
            try await channel.testingEventLoop.executeInContext {}
        }
    }

    @Test func answersBodilessProxyCallsAndPassesOnTheRest() async throws {
        let connection = try await Connection()
        connection.gate.open("/dest/a")
        try await connection.send("/dest/a")
        let answer = try await connection.answer()
        #expect(answer.status == 200)
        #expect(answer.body == "answer to /dest/a")
        #expect(answer.date, "the answer carries a Date header, as Hummingbird's do")
        #expect(try await connection.passedOn() == [])

        // Midtier's own routes, and proxy calls with a body, go on to Hummingbird.
        try await connection.send("/healthz")
        #expect(try await connection.passedOn() == ["/healthz"])
        try await connection.hummingbirdAnswers()
        try await connection.send("/dest/b", [.contentLength: "5"], method: .post, body: "12345")
        #expect(try await connection.passedOn() == ["/dest/b"])
        try await connection.hummingbirdAnswers()
        // A query or a longer path does not make an own route a destination.
        try await connection.send("/healthz?x=1")
        #expect(try await connection.passedOn() == ["/healthz?x=1"])
        try await connection.hummingbirdAnswers()
        #expect(connection.gate.calls == ["/dest/a"])
    }

    /// A pipelined request waits for the answer under way, whoever gives either.
    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        let connection = try await Connection()
        // A proxy call first, then an own route: Hummingbird gets nothing until the call is answered.
        try await connection.send("/dest/slow")
        try await connection.send("/healthz")
        try await connection.send("/dest/after")
        try await connection.settle()
        #expect(try await connection.passedOn() == [])
        #expect(connection.gate.calls == ["/dest/slow"])
        connection.gate.open("/dest/slow")
        #expect(try await connection.answer().body == "answer to /dest/slow")
        #expect(try await connection.passedOn() == ["/healthz"])
        // The next proxy call waits for Hummingbird's answer.
        connection.gate.open("/dest/after")
        try await connection.settle()
        #expect(connection.gate.calls == ["/dest/slow"])
        try await connection.hummingbirdAnswers()
        #expect(try await connection.answer().body == "answer to /dest/after")
        #expect(connection.gate.calls == ["/dest/slow", "/dest/after"])
    }

    /// Reading pauses only while a request waits: a connection that sends one request at a time
    /// keeps its read interest.
    @Test func readingPausesOnlyWhileSomethingWaits() async throws {
        let connection = try await Connection()
        try await connection.send("/dest/one")
        connection.channel.read()
        try await connection.settle()
        #expect(connection.reads.count.load(ordering: .relaxed) == 1, "a call under way with nothing waiting: reading goes on")
        try await connection.send("/dest/two")
        connection.channel.read()
        try await connection.settle()
        #expect(connection.reads.count.load(ordering: .relaxed) == 1, "a request waits: the read is held")
        connection.gate.open("/dest/one")
        #expect(try await connection.answer().body == "answer to /dest/one")
        try await connection.settle()
        #expect(connection.reads.count.load(ordering: .relaxed) == 2, "nothing waits any more: the held read goes out")
        connection.gate.open("/dest/two")
        #expect(try await connection.answer().body == "answer to /dest/two")
    }

    @Test func connectionCloseClosesAfterTheAnswer() async throws {
        let connection = try await Connection()
        connection.gate.open("/dest/last")
        try await connection.send("/dest/last", [.connection: "close"])
        try await connection.send("/dest/never")
        #expect(try await connection.answer().body == "answer to /dest/last")
        try await connection.settle()
        #expect(!connection.channel.isActive, "the connection closed after the answer")
        #expect(connection.gate.calls == ["/dest/last"], "nothing after a Connection: close request is answered")
    }

    /// After Hummingbird's answer to a `Connection: close` request its loop stops: a call sent
    /// behind it is neither answered nor sent to the back end.
    @Test func nothingIsAnsweredAfterHummingbirdsConnectionClose() async throws {
        let connection = try await Connection()
        connection.gate.open("/dest/after")
        try await connection.send("/healthz", [.connection: "close"])
        try await connection.send("/dest/after")
        #expect(try await connection.passedOn() == ["/healthz"])
        try await connection.hummingbirdAnswers()
        try await connection.settle()
        #expect(connection.gate.calls == [], "the call behind it was not made")
        #expect(try await connection.channel.readOutbound(as: HTTPResponsePart.self) == nil)
        // A read still goes out, so that the end of the input is seen.
        let before = connection.reads.count.load(ordering: .relaxed)
        connection.channel.read()
        try await connection.settle()
        #expect(connection.reads.count.load(ordering: .relaxed) == before + 1)
    }

    /// The head of a streamed answer goes out before its body: the device sees the status while
    /// the back end is still silent.
    @Test func theHeadOfAStreamedAnswerIsFlushedAtOnce() async throws {
        let connection = try await Connection()
        connection.gate.open("/dest/stream")
        try await connection.send("/dest/stream")
        guard case .head(let head) = try await connection.nextPart() else {
            Issue.record("the head comes first")
            return
        }
        #expect(head.status == .ok)
        connection.gate.open("/dest/stream/body")
        #expect(try await connection.nextPart() == .body(ByteBuffer(string: "late")))
        #expect(try await connection.nextPart() == .end(nil))
    }

    /// A parse error behind a call under way reaches Hummingbird (which answers 400 and closes)
    /// only after that call's answer.
    @Test func aParseErrorWaitsForTheAnswerUnderWay() async throws {
        let connection = try await Connection()
        try await connection.send("/dest/first")
        connection.channel.pipeline.fireErrorCaught(HTTPParserError.invalidHeaderToken)
        try await connection.settle()
        await #expect(throws: Never.self) { try await connection.channel.throwIfErrorCaught() }
        connection.gate.open("/dest/first")
        #expect(try await connection.answer().body == "answer to /dest/first")
        try await connection.settle()
        await #expect(throws: HTTPParserError.invalidHeaderToken) { try await connection.channel.throwIfErrorCaught() }
    }
}
