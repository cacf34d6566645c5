import Foundation
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import Testing

@testable import Forwarding

/// An https back end in the test process: answers `ok` to every request but `/silent`, which it
/// never answers. Its connections close the TLS way (close_notify both ways), so a connection
/// Midtier closes is still closing until the back end's close_notify is in. One that is
/// `slowToClose` reads nothing while a request is unanswered (NIO's pipelining assistance), so
/// Midtier's side of a silent connection waits out NIOSSL's shutdown timeout (5 s) before it
/// closes.
final class TLSBackEnd: Sendable {
    let port: Int
    /// A client context that trusts the back end's certificate (the destination's
    /// `trustedCertificates`).
    let trust: NIOSSLContext
    private let group: MultiThreadedEventLoopGroup
    private let counter: ConnectionCounter
    private let stopped = Mutex(false)

    /// Connections still open.
    var open: Int { counter.open }

    init(certificate: String, key: String, slowToClose: Bool = false) async throws {
        let server = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        let serverContext = try NIOSSLContext(configuration: server)
        var client = TLSConfiguration.makeClientConfiguration()
        client.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(certificate))
        trust = try NIOSSLContext(configuration: client)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let counter = ConnectionCounter()
        self.group = group
        self.counter = counter
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(NIOSSLServerHandler(context: serverContext))
                    try pipeline.configureHTTPServerPipeline(withPipeliningAssistance: slowToClose)
                    try pipeline.addHandler(TLSBackEndAnswerer(counter: counter))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress!.port!
    }

    /// Closes the listener and every connection (once).
    func stop() async throws {
        guard
            stopped.withLock({
                let was = $0; $0 = true; return !was
            })
        else { return }
        try await group.shutdownGracefully()
    }
}

final class ConnectionCounter: Sendable {
    private let count = Mutex(0)
    var open: Int { count.withLock { $0 } }
    func opened() { count.withLock { $0 += 1 } }
    func closed() { count.withLock { $0 -= 1 } }
}

private final class TLSBackEndAnswerer: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let counter: ConnectionCounter
    private var silent = false

    init(counter: ConnectionCounter) { self.counter = counter }

    func channelActive(context: ChannelHandlerContext) {
        counter.opened()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        counter.closed()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            silent = head.uri.contains("/silent")
        case .body:
            break
        case .end:
            guard !silent else { return }
            let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: ["Content-Length": "2"])
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "ok")))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

/// Connection pools that go away (shut down, or only released) and back ends that go away
/// while calls are in flight, timeouts fire and connections still close: many rounds, in which
/// no late event of a connection or a timer may reach a pool that is gone (it used to end the
/// process), every call ends (answered, or failed with `UpstreamFailure`), and every connection
/// a pool opened is closed once its pool is gone. docs/operations.md ("Connections to back
/// ends").
@Suite(.timeLimit(.minutes(10))) struct UpstreamPoolLifetimeTests {
    /// What became of a call.
    enum Outcome: Equatable, CustomStringConvertible {
        case answered(Int, String)
        case failed(String)
        case unexpected(String)

        var description: String {
            switch self {
            case .answered(let status, let body): "answered \(status) with \(body.utf8.count) bytes"
            case .failed(let why): "failed: \(why)"
            case .unexpected(let error): "ended with an error that is not an UpstreamFailure: \(error)"
            }
        }
    }

    /// Starts a call now (so that it is in flight before the pool goes), on `loop` as a request
    /// handler of `midtier serve` starts it, and returns the task that awaits it (on the loop
    /// too). A slow reader takes a streamed answer part by part, yielding between parts, so that
    /// the answer is still streaming when the pool goes.
    static func begin(
        _ pool: UpstreamConnectionPool, _ origin: UpstreamOrigin, _ method: HTTPMethod = .GET, path: String,
        body: String? = nil, timeout: TimeAmount, slowReader: Bool = false, on loop: EventLoopTaskExecutor
    ) async -> Task<Outcome, Never> {
        var headers = HTTPHeaders([("Host", "127.0.0.1")])
        if let body { headers.add(name: "Content-Length", value: String(body.utf8.count)) }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
        let call = await withTaskExecutorPreference(loop) {
            #expect(loop.isCurrent, "the call starts on the loop, as in production")
            return pool.start(head, to: origin, hasBody: body != nil, deadline: .now() + timeout)
        }
        return Task(executorPreference: loop) {
            do {
                if let body {
                    let channel = try await call.connected.get()
                    try? await channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(string: body)))).get()
                    try? await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
                }
                let answer = try await call.answer.get()
                switch answer.body {
                case .whole(let buffer):
                    return .answered(Int(answer.head.status.code), String(buffer: buffer))
                case .stream(let stream):
                    var collected = ByteBuffer()
                    for try await var part in stream {
                        collected.writeBuffer(&part)
                        if slowReader { try? await Task.sleep(for: .milliseconds(2)) }
                    }
                    return .answered(Int(answer.head.status.code), String(buffer: collected))
                }
            } catch let failure as UpstreamFailure {
                return .failed(failure.description)
            } catch {
                return .unexpected(String(describing: error))
            }
        }
    }

    /// Polls `condition` until it holds or `seconds` have passed; whether it held.
    static func eventually(within seconds: Int = 60, _ condition: () -> Bool) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + .seconds(seconds)
        while clock.now < end {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    /// How a round ends its pool.
    enum Ending: CaseIterable {
        /// Shut down, then released, with calls in flight.
        case shutDownAndReleased
        /// Released without a shutdown, with calls in flight and idle connections.
        case releasedOnly
        /// The back end stops with calls in flight; then the pool is shut down and released.
        case backEndGoesFirst
        /// The pool is released; then the back end stops, closing the pool's connections.
        case backEndGoesAfter
    }

    @Test func poolsAndBackEndsThatGoAwayWithCallsInFlightEndEveryCallAndCloseEveryConnection() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let key = directory + "/server.key", certificate = directory + "/server.crt"
        let made = try await runOffThePool(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate,
                "-days", "1", "-subj", "/CN=backend.test", "-addext", "subjectAltName=IP:127.0.0.1",
            ])
        try #require(made.status == 0, "\(made.output)")
        let large = String(repeating: "0123456789abcdef", count: 16 * 1024)  // 256 KiB: streamed
        let half = "HTTP/1.1 200 OK\r\nContent-Length: \(large.utf8.count)\r\n\r\n" + large.prefix(100_000)
        // Bound, never listening, held to the end: connecting is refused in every round (a port
        // merely closed was taken by a later round's back end once, which then answered).
        let (holder, closedPort) = refusingLoopbackPort()
        defer { Glibc.close(holder) }
        let nowhere = try #require(UpstreamOrigin(url: "http://127.0.0.1:\(closedPort)"))
        // Long deadlines where the deadline is not the point: a loaded machine is slow.
        let generous = TimeAmount.seconds(60)

        for round in 0..<30 {
            let ending = Ending.allCases[round % Ending.allCases.count]
            let plain = ScriptedBackEnd { _, _, head in
                if head.contains("/silent") { return .neverAnswer }
                if head.contains("/stalls") { return .sendThenStall(half) }
                if head.contains("/large") { return .respond(ScriptedBackEnd.ok(large)) }
                return .respond(ScriptedBackEnd.ok("ok"))
            }
            let tls = try await TLSBackEnd(certificate: certificate, key: key, slowToClose: round % 15 < 2)
            let origin = try #require(UpstreamOrigin(url: "http://127.0.0.1:\(plain.port)"))
            var secure = try #require(UpstreamOrigin(url: "https://127.0.0.1:\(tls.port)"))
            secure.trust = tls.trust
            let group = MultiThreadedEventLoopGroup(numberOfThreads: round % 2 + 1)
            // The sweeper runs every few milliseconds, also after its pool is gone.
            var pool: UpstreamConnectionPool? = UpstreamConnectionPool(group: group, sweepInterval: .milliseconds(3))

            // Calls start on the group's loops in turn, as requests arrive on them.
            let loops = group.makeIterator().map { EventLoopTaskExecutor($0) }
            var started = 0
            func begin(
                _ origin: UpstreamOrigin, _ method: HTTPMethod = .GET, path: String, body: String? = nil,
                timeout: TimeAmount, slowReader: Bool = false
            ) async -> Task<Outcome, Never> {
                started += 1
                return await Self.begin(
                    pool!, origin, method, path: path, body: body, timeout: timeout, slowReader: slowReader,
                    on: loops[started % loops.count])
            }

            // Idle connections in the pool, plain and TLS.
            var warm: [Task<Outcome, Never>] = []
            for _ in 0..<3 { warm.append(await begin(origin, path: "/small", timeout: generous)) }
            for _ in 0..<2 { warm.append(await begin(secure, path: "/small", timeout: generous)) }
            for call in warm { #expect(await call.value == .answered(200, "ok"), "round \(round): a call before anything went away") }

            // Calls in flight, of every kind; the short deadlines fire around the time the pool goes.
            let shortly = TimeAmount.milliseconds(Int64(20 + 40 * (round % 5)))
            var answering: [Task<Outcome, Never>] = []
            for _ in 0..<3 { answering.append(await begin(origin, path: "/small", timeout: generous)) }
            answering.append(await begin(origin, .POST, path: "/small", body: "{\"round\":\(round)}", timeout: generous))
            answering.append(await begin(origin, path: "/large", timeout: generous, slowReader: true))
            answering.append(await begin(secure, path: "/small", timeout: generous))
            var failing: [Task<Outcome, Never>] = []
            for _ in 0..<3 { failing.append(await begin(origin, path: "/silent", timeout: shortly)) }
            failing.append(await begin(origin, path: "/stalls", timeout: shortly, slowReader: true))
            failing.append(await begin(secure, path: "/silent", timeout: shortly))
            failing.append(await begin(nowhere, path: "/small", timeout: shortly))

            switch ending {
            case .shutDownAndReleased:
                await pool!.shutdown()
                pool = nil
            case .releasedOnly:
                pool = nil
            case .backEndGoesFirst:
                plain.stop()
                try await tls.stop()
                await pool!.shutdown()
                pool = nil
            case .backEndGoesAfter:
                pool = nil
                plain.stop()
                try await tls.stop()
            }

            for call in failing {
                let outcome = await call.value
                guard case .failed = outcome else {
                    Issue.record("round \(round), \(ending): a call that cannot be answered \(outcome)")
                    continue
                }
            }
            for call in answering {
                let outcome = await call.value
                switch (ending, outcome) {
                case (_, .answered(200, let body)):
                    #expect(body == "ok" || body == large, "round \(round), \(ending): an answer arrived cut")
                case (.backEndGoesFirst, .failed), (.backEndGoesAfter, .failed):
                    break  // its back end went away
                default:
                    Issue.record("round \(round), \(ending): a call to a back end that answers \(outcome)")
                }
            }
            // No connection outlives its pool: the pool's idle ones are closed with it, the busy
            // ones when their call ends.
            #expect(await Self.eventually { plain.open == 0 }, "round \(round), \(ending): \(plain.open) connections left open")
            #expect(await Self.eventually { tls.open == 0 }, "round \(round), \(ending): \(tls.open) TLS connections left open")
            plain.stop()
            try await tls.stop()
            // Late events (a connection that still closes, a timer) reach the loops after this.
            try await Task.sleep(for: .milliseconds(20))
            try await group.shutdownGracefully()
        }
    }

    @Test func aShutDownPoolTakesNoMoreCalls() async throws {
        let backEnd = ScriptedBackEnd { _, _, _ in .respond(ScriptedBackEnd.ok("ok")) }
        defer { backEnd.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let pool = UpstreamConnectionPool(group: group)
        let origin = try #require(UpstreamOrigin(url: "http://127.0.0.1:\(backEnd.port)"))
        await pool.shutdown()
        let late = await Self.begin(pool, origin, path: "/x", timeout: .seconds(60), on: EventLoopTaskExecutor(group.next())).value
        #expect(late == .failed(UpstreamFailure.shutDown.description), "a call after the shutdown \(late)")
        await pool.shutdown()  // again: nothing happens
        try await group.shutdownGracefully()
        #expect(backEnd.accepted == 0, "a shut-down pool opened a connection")
    }

    /// A pool released without a shutdown: its idle connection closes with it, and its sweeper
    /// (armed when the connection went idle) finds nothing when it fires (it used to read the
    /// pool that was gone, 10 s later, and end the process).
    @Test func aPoolReleasedWithoutAShutdownClosesItsIdleConnections() async throws {
        let backEnd = ScriptedBackEnd { _, _, _ in .respond(ScriptedBackEnd.ok("ok")) }
        defer { backEnd.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var pool: UpstreamConnectionPool? = UpstreamConnectionPool(group: group)
        let origin = try #require(UpstreamOrigin(url: "http://127.0.0.1:\(backEnd.port)"))
        #expect(
            await Self.begin(pool!, origin, path: "/x", timeout: .seconds(60), on: EventLoopTaskExecutor(group.next())).value == .answered(200, "ok"))
        #expect(backEnd.open == 1, "the connection is kept for the next call")
        pool = nil
        #expect(await Self.eventually { backEnd.open == 0 }, "the idle connection of a released pool is left open")
        try await group.shutdownGracefully()
    }
}
