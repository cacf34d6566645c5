import MidtierTestSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import Forwarding

/// `UpstreamChannelHandler` on an `EmbeddedChannel`: what each transition of its state machine
/// does to the connection (writes, reads, close), to the call (answered, failed, sent again)
/// and to the pool (a stand-in that records what it is told). No socket, no timing: the
/// call's clock runs on the embedded loop's time.
@Suite(.timeLimit(.minutes(10))) struct UpstreamChannelHandlerTests {
    let loop = EmbeddedEventLoop()
    let made = UpstreamConnectionStateMachineTests.CallsMade()
    static let origin = UpstreamOrigin(url: "http://127.0.0.1:1")!

    /// The pool as a connection sees it.
    final class RecordingPool: UpstreamConnectionOwner {
        var released: [UpstreamChannelHandler] = []
        var forgotten: [UpstreamChannelHandler] = []
        var retried: [UpstreamExchange] = []
        func release(_ handler: UpstreamChannelHandler) { released.append(handler) }
        func forget(_ handler: UpstreamChannelHandler) { forgotten.append(handler) }
        func retry(_ exchange: UpstreamExchange) { retried.append(exchange) }
    }

    /// Counts the reads that reach the socket.
    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = HTTPClientRequestPart
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    struct Connection {
        let channel: EmbeddedChannel
        let handler: UpstreamChannelHandler
        let socket: ReadCounter

        /// What the handler wrote, in order.
        func written() throws -> [String] {
            var parts: [String] = []
            while let part = try channel.readOutbound(as: HTTPClientRequestPart.self) {
                switch part {
                case .head(let head): parts.append("head \(head.method) \(head.uri)")
                case .body(.byteBuffer(let buffer)): parts.append("body \(String(buffer: buffer))")
                case .body: parts.append("body")
                case .end: parts.append("end")
                }
            }
            return parts
        }

        /// The connection closes (to the handler, as when the back end closes it).
        func closeFromTheBackEnd() throws {
            try channel.close().wait()
        }

        func answer(_ parts: HTTPClientResponsePart...) throws {
            for part in parts { try channel.writeInbound(part) }
        }
    }

    func connect(to pool: RecordingPool) throws -> Connection {
        let channel = EmbeddedChannel(loop: loop)
        let socket = ReadCounter()
        let handler = UpstreamChannelHandler(origin: Self.origin, pool: pool)
        try channel.pipeline.syncOperations.addHandlers([socket, handler])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return Connection(channel: channel, handler: handler, socket: socket)
    }

    /// A call whose clock runs out 1 ms into the embedded loop's time, started as the pool
    /// starts it (clock first).
    func call(_ method: HTTPMethod = .GET, hasBody: Bool = false, clock: Bool = false) -> UpstreamExchange {
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: "/x", headers: ["Host": "127.0.0.1"])
        let call = UpstreamExchange(head: head, origin: Self.origin, hasBody: hasBody, deadline: .uptimeNanoseconds(1_000_000), loop: loop)
        made.all.append(call)
        if clock { call.startClock() }
        return call
    }

    static func outcome<Value>(_ future: EventLoopFuture<Value>) -> Result<Value, any Error>? {
        var outcome: Result<Value, any Error>?
        future.whenComplete { outcome = $0 }
        return outcome
    }

    static func failure<Value>(_ future: EventLoopFuture<Value>) -> String? {
        guard case .failure(let error) = outcome(future) else { return nil }
        return (error as? UpstreamFailure)?.description ?? "not an UpstreamFailure: \(error)"
    }

    static func wholeBody(_ exchange: UpstreamExchange) -> String? {
        guard case .success(let answer) = outcome(exchange.answer.futureResult), case .whole(let body) = answer.body else { return nil }
        return String(buffer: body)
    }

    static func stream(_ exchange: UpstreamExchange) -> UpstreamBody? {
        guard case .success(let answer) = outcome(exchange.answer.futureResult), case .stream(let body) = answer.body else { return nil }
        return body
    }

    static let small = UpstreamConnectionStateMachineTests.small
    static let chunked = UpstreamConnectionStateMachineTests.chunked
    static func body(_ text: String) -> HTTPClientResponsePart { .body(ByteBuffer(string: text)) }
    static let timedOut = UpstreamFailure.timedOut.description

    /// A connection that has carried one call and is back in the pool.
    func reusedConnection(_ pool: RecordingPool) throws -> Connection {
        let connection = try connect(to: pool)
        connection.handler.start(call())
        try connection.answer(Self.head0, .end(nil))
        _ = try connection.written()
        pool.released = []
        return connection
    }

    static let head0 = UpstreamConnectionStateMachineTests.head(.ok, [("Content-Length", "0")])

    // MARK: Answers

    @Test func aWholeAnswerAnswersTheCallAndTheConnectionGoesBackToThePool() throws {
        let pool = RecordingPool()
        let connection = try connect(to: pool)
        let exchange = call(clock: true)
        connection.handler.start(exchange)
        #expect(try connection.written() == ["head GET /x", "end"])
        #expect(
            Self.outcome(exchange.connected.futureResult).map { (try? $0.get()) === connection.channel } == true,
            "the call is given the connection's channel")
        try connection.answer(Self.small, Self.body("hel"), Self.body("lo"))
        #expect(Self.outcome(exchange.answer.futureResult) == nil, "answered before the end")
        try connection.answer(.end(nil))
        #expect(Self.wholeBody(exchange) == "hello")
        #expect(exchange.isFinished)
        #expect(pool.released.count == 1 && pool.released.first === connection.handler)
        #expect(connection.channel.isActive)
        // The clock was stopped with the call: nothing fires later.
        loop.advanceTime(by: .milliseconds(5))
        #expect(connection.channel.isActive)
        // The next call goes on the same connection.
        let next = call()
        connection.handler.start(next)
        #expect(try connection.written() == ["head GET /x", "end"])
        try connection.answer(Self.head0, .end(nil))
        #expect(Self.wholeBody(next) == "")
        #expect(pool.released.count == 2)
    }

    @Test func aRequestBodyGoesThroughTheHandlerAndTheConnectionIsPooledOnlyOnceItEnded() throws {
        let pool = RecordingPool()
        let connection = try connect(to: pool)
        let exchange = call(.POST, hasBody: true)
        connection.handler.start(exchange)
        #expect(try connection.written() == ["head POST /x"])
        try connection.channel.writeOutbound(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(string: "{}"))))
        try connection.channel.writeOutbound(HTTPClientRequestPart.end(nil))
        #expect(try connection.written() == ["body {}", "end"])
        try connection.answer(Self.small, Self.body("hello"), .end(nil))
        #expect(pool.released.count == 1)

        // The back end answers before the body ended: the connection cannot be used again.
        let early = call(.POST, hasBody: true)
        connection.handler.start(early)
        try connection.answer(Self.small, Self.body("hello"), .end(nil))
        #expect(Self.wholeBody(early) == "hello")
        #expect(pool.released.count == 1, "a connection with half a request on it went back to the pool")
        #expect(!connection.channel.isActive)
    }

    @Test func aStreamedAnswerReachesTheDeviceSideAndTheConnectionGoesBackToThePool() async throws {
        let pool = RecordingPool()
        let connection = try connect(to: pool)
        let exchange = call()
        connection.handler.start(exchange)
        try connection.answer(Self.chunked)
        let body = try #require(Self.stream(exchange), "a chunked answer is streamed")
        try connection.answer(Self.body("one"), Self.body("two"))
        #expect(pool.released.isEmpty)
        try connection.answer(.end(nil))
        #expect(pool.released.count == 1)
        var collected = ""
        for try await part in body { collected += String(buffer: part) }
        #expect(collected == "onetwo")
    }

    @Test func aDeviceSideThatHoldsTheStreamBackHoldsBackTheReads() async throws {
        let pool = RecordingPool()
        let connection = try connect(to: pool)
        let exchange = call()
        connection.handler.start(exchange)
        try connection.answer(Self.chunked)
        let body = try #require(Self.stream(exchange))
        // Nobody reads yet: the stream's buffer fills (8 parts) and reading stops.
        for index in 0..<8 { try connection.answer(Self.body("\(index)")) }
        #expect(connection.handler.stateMachine.state.name == "paused")
        let reads = connection.socket.reads
        connection.channel.read()
        connection.channel.read()
        #expect(connection.socket.reads == reads, "a read went out while the device's side held the stream back")
        // The device's side takes most of it: the held-back read goes out, once.
        var iterator = body.makeAsyncIterator()
        var taken = ""
        for _ in 0..<7 { taken += String(buffer: try #require(try await iterator.next())) }
        loop.run()
        #expect(taken == "0123456")
        #expect(connection.handler.stateMachine.state.name == "streaming")
        #expect(connection.socket.reads == reads + 1)
        connection.channel.read()
        #expect(connection.socket.reads == reads + 2, "reads go through again")
        try connection.answer(Self.body("8"), .end(nil))
        #expect(pool.released.count == 1)
        var rest = ""
        while let part = try await iterator.next() { rest += String(buffer: part) }
        #expect(rest == "78")
    }

    @Test func aStreamTheDeviceLeavesClosesTheConnection() async throws {
        let pool = RecordingPool()
        let connection = try connect(to: pool)
        let exchange = call()
        connection.handler.start(exchange)
        try connection.answer(Self.chunked, Self.body("one"))
        let body = try #require(Self.stream(exchange))
        var iterator = body.makeAsyncIterator()
        #expect(try await iterator.next().map { String(buffer: $0) } == "one")
        _ = consume iterator
        loop.run()
        #expect(!connection.channel.isActive, "a half-read answer's connection stayed open")
        #expect(exchange.isFinished)
        #expect(pool.released.isEmpty)
        #expect(pool.forgotten.count == 1)
    }

    // MARK: Timeouts

    @Test(arguments: ["awaitingHead", "collecting", "streaming"])
    func aCallThatTimesOutFailsAndClosesItsConnection(_ stage: String) async throws {
        let pool = RecordingPool()
        let connection = try reusedConnection(pool)
        let exchange = call(clock: true)
        connection.handler.start(exchange)
        if stage == "collecting" { try connection.answer(Self.small, Self.body("he")) }
        if stage == "streaming" { try connection.answer(Self.chunked, Self.body("one")) }
        loop.advanceTime(by: .milliseconds(2))
        #expect(!connection.channel.isActive)
        #expect(pool.retried.isEmpty, "a call that timed out was sent again")
        #expect(pool.released.isEmpty)
        if stage == "streaming" {
            let body = try #require(Self.stream(exchange))
            var collected = ""
            let error = await #expect(throws: UpstreamFailure.self) { for try await part in body { collected += String(buffer: part) } }
            #expect(error?.description == Self.timedOut)
            #expect(collected == "one")
        } else {
            #expect(Self.failure(exchange.answer.futureResult) == Self.timedOut)
        }
    }

    @Test func theClockStopsWhileTheDeviceSideHoldsTheStreamBack() throws {
        let pool = RecordingPool()
        let connection = try connect(to: pool)
        let exchange = call(clock: true)
        connection.handler.start(exchange)
        try connection.answer(Self.chunked)
        for index in 0..<8 { try connection.answer(Self.body("\(index)")) }
        #expect(connection.handler.stateMachine.state.name == "paused")
        loop.advanceTime(by: .milliseconds(5))
        #expect(connection.channel.isActive, "the call timed out while the device's side was reading")
        #expect(!exchange.isFinished)
    }

    // MARK: The connection closes, at each state

    @Test(arguments: [
        "fresh", "idle", "awaitingHead on a fresh connection", "awaitingHead on a pooled connection",
        "awaitingHead with a body on a pooled connection", "collecting", "streaming",
    ])
    func theBackEndClosingTheConnection(_ stage: String) async throws {
        let pool = RecordingPool()
        let connection = stage == "fresh" || stage.hasSuffix("fresh connection") ? try connect(to: pool) : try reusedConnection(pool)
        let exchange = call(hasBody: stage.contains("with a body"))
        if stage.hasPrefix("awaitingHead") || stage == "collecting" || stage == "streaming" { connection.handler.start(exchange) }
        if stage == "collecting" { try connection.answer(Self.small) }
        if stage == "streaming" { try connection.answer(Self.chunked, Self.body("one")) }

        try connection.closeFromTheBackEnd()

        #expect(pool.forgotten.count == 1 && pool.forgotten.first === connection.handler, "the pool still counts a closed connection")
        #expect(pool.released.isEmpty)
        switch stage {
        case "fresh", "idle":
            #expect(!exchange.isFinished && pool.retried.isEmpty)
        case "awaitingHead on a pooled connection":
            // The back end had dropped the pooled connection: the call goes again, once.
            #expect(pool.retried.count == 1 && pool.retried.first === exchange)
            #expect(exchange.retried && !exchange.isFinished)
            #expect(exchange.connection == nil)
        case "streaming":
            let body = try #require(Self.stream(exchange))
            await #expect(throws: UpstreamFailure.self) { for try await _ in body {} }
            #expect(pool.retried.isEmpty)
        default:
            #expect(Self.failure(exchange.answer.futureResult) == "the back end closed the connection")
            #expect(pool.retried.isEmpty)
        }
    }

    @Test func aCallSentAgainFailsWhenItsSecondConnectionIsDroppedToo() throws {
        let pool = RecordingPool()
        let exchange = call()
        let first = try reusedConnection(pool)
        first.handler.start(exchange)
        try first.closeFromTheBackEnd()
        #expect(pool.retried.count == 1)
        let second = try reusedConnection(pool)
        second.handler.start(exchange)
        try second.closeFromTheBackEnd()
        #expect(pool.retried.count == 1, "sent a third time")
        #expect(Self.failure(exchange.answer.futureResult) == "the back end closed the connection")
    }

    @Test func anErrorInThePipelineFailsTheCallAndClosesTheConnection() throws {
        struct Reset: Error {}
        let pool = RecordingPool()
        let connection = try connect(to: pool)
        let exchange = call()
        connection.handler.start(exchange)
        connection.channel.pipeline.fireErrorCaught(Reset())
        #expect(!connection.channel.isActive)
        #expect(Self.failure(exchange.answer.futureResult) != nil)
    }

    @Test func thePoolClosingAnIdleConnection() throws {
        let pool = RecordingPool()
        let connection = try reusedConnection(pool)
        connection.handler.close()
        #expect(!connection.channel.isActive)
        // A closed connection takes no call: it goes elsewhere.
        let exchange = call()
        connection.handler.start(exchange)
        #expect(pool.retried.count == 1 && pool.retried.first === exchange)
        #expect(try connection.written().isEmpty)
    }

    @Test func anAnswerOnAConnectionWithoutACallClosesIt() throws {
        let pool = RecordingPool()
        let connection = try reusedConnection(pool)
        try connection.answer(Self.small)
        #expect(!connection.channel.isActive)
        #expect(pool.forgotten.count == 1)
    }

    // MARK: The pool goes first

    @Test func aConnectionWhosePoolIsGoneFinishesItsCallAndCloses() throws {
        var pool: RecordingPool? = RecordingPool()
        weak var gone = pool
        let connection = try connect(to: pool!)
        let exchange = call()
        connection.handler.start(exchange)
        pool = nil
        #expect(gone == nil, "the connection kept its pool alive")
        try connection.answer(Self.small, Self.body("hello"), .end(nil))
        #expect(Self.wholeBody(exchange) == "hello")
        #expect(!connection.channel.isActive, "a connection without a pool stayed open")
    }

    @Test func aStaleCallWhosePoolIsGoneFails() throws {
        var pool: RecordingPool? = RecordingPool()
        let connection = try reusedConnection(pool!)
        let exchange = call()
        connection.handler.start(exchange)
        pool = nil
        try connection.closeFromTheBackEnd()
        #expect(Self.failure(exchange.answer.futureResult) == UpstreamFailure.shutDown.description)
    }
}
