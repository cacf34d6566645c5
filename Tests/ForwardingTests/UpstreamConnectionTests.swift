import Foundation
import MidtierCore
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing

@testable import Forwarding

/// A back end on a real socket that answers keep-alive requests one after another, as a script
/// says per connection and per request on it; it counts connections and keeps what it was sent.
/// `stop()` closes its listener and every connection it holds (a back end going away).
final class ScriptedBackEnd: @unchecked Sendable {
    enum Action: Sendable {
        case respond(String)
        /// Close the connection without answering (a back end dropping an idle connection
        /// just as a request arrives).
        case closeWithoutAnswer
        /// Send these bytes (a head and part of a body, say), then nothing more: the connection
        /// stays open until the other side closes it or the back end stops.
        case sendThenStall(String)

        /// A back end that takes the request and never answers.
        static let neverAnswer = Action.sendThenStall("")
    }

    private struct State {
        var connections = 0
        var closed = 0
        var requests: [String] = []
        /// The connections' sockets while they are open; shut down by `stop()`. A socket is
        /// closed under the lock, so that `stop()` never shuts down a number the system has
        /// given to another socket since.
        var open: Set<Int32> = []
        var stopped = false
        var listenerClosed = false
    }

    let port: Int
    private let listener: Int32
    private let script: @Sendable (_ connection: Int, _ request: Int, _ head: String) -> Action
    private let state = Mutex(State())

    var accepted: Int { state.withLock { $0.connections } }
    /// Connections that ended (Midtier closed them, or the script did).
    var closed: Int { state.withLock { $0.closed } }
    /// Connections still open.
    var open: Int { state.withLock { $0.open.count } }
    var requests: [String] { state.withLock { $0.requests } }

    init(script: @escaping @Sendable (_ connection: Int, _ request: Int, _ head: String) -> Action) {
        self.script = script
        (listener, port) = listenOnLoopback()
        Thread { [self] in acceptLoop() }.start()
    }

    /// Closes the listener (new connections are refused) and every open connection.
    func stop() {
        state.withLock {
            guard !$0.stopped else { return }
            $0.stopped = true
            if !$0.listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            for connection in $0.open { shutdown(connection, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        defer {
            state.withLock {
                $0.listenerClosed = true; Glibc.close(listener)
            }
        }
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let number: Int? = state.withLock {
                guard !$0.stopped else { return nil }
                $0.connections += 1
                $0.open.insert(connection)
                return $0.connections
            }
            guard let number else {
                Glibc.close(connection)
                return
            }
            Thread { [self] in serve(connection, number) }.start()
        }
    }

    private func serve(_ connection: Int32, _ number: Int) {
        defer {
            state.withLock {
                $0.open.remove(connection)
                $0.closed += 1
                Glibc.close(connection)
            }
        }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var index = 0
        func send(_ text: String) -> Bool {
            let bytes = Array(text.utf8)
            var sent = 0
            while sent < bytes.count {
                let count = bytes[sent...].withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if count <= 0 { return false }
                sent += count
            }
            return true
        }
        while true {
            // One request: the head, then a body of Content-Length bytes, if any.
            var headEnd: Int?
            while headEnd == nil {
                if let range = String(decoding: pending, as: UTF8.self).range(of: "\r\n\r\n") {
                    headEnd = String(decoding: pending, as: UTF8.self)[..<range.upperBound].utf8.count
                    break
                }
                let count = recv(connection, &buffer, buffer.count, 0)
                if count <= 0 { return }
                pending += buffer[0..<count]
            }
            let head = String(decoding: pending[0..<headEnd!], as: UTF8.self)
            let length =
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            while pending.count < headEnd! + length {
                let count = recv(connection, &buffer, buffer.count, 0)
                if count <= 0 { return }
                pending += buffer[0..<count]
            }
            let request = head + String(decoding: pending[headEnd!..<headEnd! + length], as: UTF8.self)
            pending.removeFirst(headEnd! + length)
            index += 1
            state.withLock { $0.requests.append(request) }
            switch script(number, index, head) {
            case .closeWithoutAnswer:
                return
            case .respond(let text):
                guard send(text) else { return }
                if text.lowercased().contains("connection: close") { return }
            case .sendThenStall(let text):
                guard send(text) else { return }
                // Read and drop whatever comes until the other side closes (or `stop()`).
                while recv(connection, &buffer, buffer.count, 0) > 0 {}
                return
            }
        }
    }

    static func ok(_ body: String, extra: String = "") -> String {
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\(extra)\r\n\(body)"
    }
}

/// Runs a task's jobs on one event loop, as `midtier serve` runs its request handlers (Swift
/// concurrency on NIO's loops, `Midtier.main`): code under this preference calls the pool from
/// the loop, which is the branch of `UpstreamConnectionPool.start` production takes.
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.execute { job.runSynchronously(on: executor) }
    }

    /// Whether the code calling this runs on the loop (the production branch of `start`).
    var isCurrent: Bool {
        MultiThreadedEventLoopGroup.currentEventLoop === loop && loop.inEventLoop
    }
}

/// Midtier's own keep-alive connections to back ends (`UpstreamConnectionPool`), against a
/// back end on a real socket. Each test has a pool on a group of one event loop, so that its
/// calls share one pool (there is one per loop). The calls start on that loop, as a request
/// handler of `midtier serve` starts them (`running`). Deadlines are generous (a minute)
/// wherever the deadline is not what a test checks: a loaded machine is slow, and a call that
/// outlived a short one failed a test that checks framing.
@Suite(.timeLimit(.minutes(10))) struct UpstreamConnectionTests {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let pool: UpstreamConnectionPool
    let onTheLoop: EventLoopTaskExecutor
    static let generous = TimeAmount.seconds(60)

    init() {
        pool = UpstreamConnectionPool(group: group)
        onTheLoop = EventLoopTaskExecutor(group.next())
    }

    /// Runs `body` on the pool's loop, then stops the back ends, the pool and its loop (off
    /// the loop), also when `body` failed (a test that stopped early left its loop running with
    /// connections open).
    func running(_ backEnds: ScriptedBackEnd..., body: () async throws -> Void) async throws {
        defer { for backEnd in backEnds { backEnd.stop() } }
        do {
            try await withTaskExecutorPreference(onTheLoop) { try await body() }
        } catch {
            await pool.shutdown()
            try? await group.shutdownGracefully()
            throw error
        }
        await pool.shutdown()
        try await group.shutdownGracefully()
    }

    func call(
        _ backEnd: ScriptedBackEnd, _ method: HTTPMethod = .GET, path: String = "/x", body: String? = nil,
        timeout: TimeAmount = generous, scheme: String = "http"
    ) async throws -> (status: Int, body: String) {
        var headers = HTTPHeaders([("Host", "127.0.0.1")])
        if let body { headers.add(name: "Content-Length", value: String(body.utf8.count)) }
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
        let origin = UpstreamOrigin(url: "\(scheme)://127.0.0.1:\(backEnd.port)")!
        try #require(onTheLoop.isCurrent, "the call starts on the pool's loop, as in production")
        let call = pool.start(head, to: origin, hasBody: body != nil, deadline: .now() + timeout)
        if let body {
            let channel = try await call.connected.get()
            try? await channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(string: body)))).get()
            try? await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        }
        let answer = try await call.answer.get()
        switch answer.body {
        case .whole(let buffer):
            return (Int(answer.head.status.code), String(buffer: buffer))
        case .stream(let stream):
            var collected = ByteBuffer()
            for try await var chunk in stream { collected.writeBuffer(&chunk) }
            return (Int(answer.head.status.code), String(buffer: collected))
        }
    }

    @Test func sequentialCallsShareOneConnection() async throws {
        let backEnd = ScriptedBackEnd { _, request, _ in .respond(ScriptedBackEnd.ok("answer \(request)")) }
        try await running(backEnd) { () async throws in
            for number in 1...10 {
                let answer = try await call(backEnd)
                #expect(answer.status == 200 && answer.body == "answer \(number)")
            }
            #expect(backEnd.accepted == 1, "ten calls one after another over \(backEnd.accepted) connections")
        }
    }

    @Test func aCallOnAConnectionTheBackEndDroppedIsSentAgainOnceWithoutABody() async throws {
        // Each connection answers its first request and drops the second without an answer.
        let backEnd = ScriptedBackEnd { _, request, _ in request == 1 ? .respond(ScriptedBackEnd.ok("fresh")) : .closeWithoutAnswer }
        try await running(backEnd) { () async throws in
            #expect(try await call(backEnd).body == "fresh")
            // The pooled connection fails this one; it goes again, once, on a new connection.
            let retried = try await call(backEnd)
            #expect(retried.status == 200 && retried.body == "fresh")
            #expect(backEnd.accepted == 2)
            // A call with a body is not sent twice: it fails (Midtier answers 502).
            await #expect(throws: UpstreamFailure.self) { try await call(backEnd, .POST, body: "{\"a\":1}") }
            #expect(backEnd.requests.filter { $0.hasPrefix("POST") }.count == 1, "the body went once")
        }
    }

    @Test func answersOfEveryFramingArriveWhole() async throws {
        let large = String(repeating: "0123456789abcdef", count: 16 * 1024)  // 256 KiB: streamed
        let chunked = String(large.utf8.count, radix: 16)
        let backEnd = ScriptedBackEnd { _, _, head in
            if head.hasPrefix("HEAD") { return .respond("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n") }
            if head.contains("/chunked") {
                return .respond("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\(chunked)\r\n\(large)\r\n0\r\n\r\n")
            }
            if head.contains("/to-close") { return .respond("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n\(large)") }
            if head.contains("/long") { return .respond(ScriptedBackEnd.ok(large)) }
            return .respond(ScriptedBackEnd.ok("small"))
        }
        try await running(backEnd) { () async throws in
            #expect(try await call(backEnd, .HEAD) == (200, ""))
            #expect(try await call(backEnd, path: "/chunked").body == large)
            #expect(try await call(backEnd, path: "/long").body == large)
            #expect(try await call(backEnd, path: "/to-close").body == large)
            #expect(try await call(backEnd, .POST, body: "{}").body == "small")
            #expect(backEnd.requests.last?.hasSuffix("\r\n\r\n{}") == true, "the body reached the back end")
        }
    }

    @Test func aStreamedAnswerTheDeviceLeavesClosesItsConnection() async throws {
        let large = String(repeating: "x", count: 1 << 20)
        let backEnd = ScriptedBackEnd { _, _, head in
            head.contains("/large") ? .respond(ScriptedBackEnd.ok(large)) : .respond(ScriptedBackEnd.ok("next"))
        }
        try await running(backEnd) { () async throws in
            let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/large", headers: ["Host": "127.0.0.1"])
            let origin = UpstreamOrigin(url: "http://127.0.0.1:\(backEnd.port)")!
            try #require(onTheLoop.isCurrent)
            let answer = try await pool.start(head, to: origin, hasBody: false, deadline: .now() + Self.generous).answer.get()
            guard case .stream(let body) = answer.body else { Issue.record("a 1 MiB answer is streamed"); return }
            var iterator = body.makeAsyncIterator()
            #expect(try await iterator.next() != nil)
            _ = consume iterator  // the device went away after the first part
            // The half-read connection is closed, not left open or used again.
            #expect(await UpstreamPoolLifetimeTests.eventually { backEnd.closed == 1 }, "the connection of the abandoned answer is closed")
            #expect(try await call(backEnd).body == "next")
            #expect(backEnd.accepted == 2)
        }
    }

    @Test func anHTTPSDestinationNeverTalksInClear() async throws {
        let backEnd = ScriptedBackEnd { _, _, _ in .respond(ScriptedBackEnd.ok("in clear")) }
        try await running(backEnd) { () async throws in
            // The back end never answers a TLS hello: the call ends at its deadline.
            await #expect(throws: UpstreamFailure.self) { try await call(backEnd, timeout: .milliseconds(500), scheme: "https") }
            #expect(await UpstreamPoolLifetimeTests.eventually { backEnd.accepted == 1 })
            #expect(backEnd.requests.isEmpty, "an HTTP request reached a server that does not speak TLS")
        }
    }
    /// An https back end with a company CA: trusted through the destination's
    /// `trustedCertificates`, refused with the system's roots. The server is `openssl s_server`.
    @Test func anHTTPSBackEndIsTrustedThroughItsDestinationsCertificates() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let key = directory + "/server.key", certificate = directory + "/server.crt"
        let made = try await runOffThePool(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate,
                "-days", "1", "-subj", "/CN=backend.test", "-addext", "subjectAltName=IP:127.0.0.1",
            ])
        #expect(made.status == 0, "\(made.output)")
        let (probe, port) = listenOnLoopback()
        Glibc.close(probe)
        let server = try spawn("/usr/bin/openssl", ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificate, "-key", key, "-www", "-quiet"])
        defer {
            // SIGKILL: the child inherits the test process's signal mask, which blocks SIGTERM,
            // so terminate() left one orphaned s_server behind per run.
            kill(server, SIGKILL)
            waitForExit(server)
        }
        for _ in 0..<100 {
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            Glibc.close(socket)
            if connected == 0 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let pem = try Array(Data(contentsOf: URL(fileURLWithPath: certificate)))
        let trusting = UpstreamDestination(
            DestinationConfiguration(
                name: "gateway", url: "https://127.0.0.1:\(port)", authentication: .noAuthentication,
                trustedCertificatesPEM: pem), publicURL: "http://m.test")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: ["Host": "127.0.0.1"])
        try await running { () async throws in
            try #require(onTheLoop.isCurrent)
            let answer = try await pool.start(head, to: try #require(trusting.origin), hasBody: false, deadline: .now() + Self.generous).answer.get()
            #expect(answer.head.status == .ok)
            let systemRoots = try #require(UpstreamOrigin(url: "https://127.0.0.1:\(port)"))
            await #expect(throws: UpstreamFailure.self) {
                try await pool.start(head, to: systemRoots, hasBody: false, deadline: .now() + Self.generous).answer.get()
            }
        }
    }

    @Test func aBackEndThatAnswersTooLateTimesOutAndItsConnectionIsNotReused() async throws {
        // The first connection answers only once the call has timed out (the test opens the
        // gate then): late for certain, however slow the machine.
        let gate = DispatchSemaphore(value: 0)
        let backEnd = ScriptedBackEnd { connection, _, _ in
            if connection == 1 { gate.wait(); return .respond(ScriptedBackEnd.ok("late")) }
            return .respond(ScriptedBackEnd.ok("on time"))
        }
        try await running(backEnd) { () async throws in
            await #expect(throws: UpstreamFailure.self) { try await call(backEnd, timeout: .milliseconds(200)) }
            gate.signal()
            // The next call does not inherit the late answer: its own connection, its own answer.
            #expect(try await call(backEnd).body == "on time")
            #expect(backEnd.accepted == 2)
        }
    }

    /// With Swift concurrency off NIO's loops (`MIDTIER_GLOBAL_EXECUTOR=swift`), a call starts
    /// off the loop and hops to it: the same pool, the same connection.
    @Test func aCallStartedOffTheLoopsHopsToTheLoopsPool() async throws {
        let backEnd = ScriptedBackEnd { _, request, _ in .respond(ScriptedBackEnd.ok("answer \(request)")) }
        defer { backEnd.stop() }
        let origin = try #require(UpstreamOrigin(url: "http://127.0.0.1:\(backEnd.port)"))
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/x", headers: ["Host": "127.0.0.1"])
        let offTheLoop = try await withTaskExecutorPreference(nil) { () async throws -> String in
            #expect(MultiThreadedEventLoopGroup.currentEventLoop == nil)
            let answer = try await pool.start(head, to: origin, hasBody: false, deadline: .now() + Self.generous).answer.get()
            guard case .whole(let body) = answer.body else { return "streamed" }
            return String(buffer: body)
        }
        #expect(offTheLoop == "answer 1")
        try await running(backEnd) { () async throws in
            #expect(try await call(backEnd).body == "answer 2")
            #expect(backEnd.accepted == 1, "the call off the loop left its connection in the loop's pool")
        }
    }
}
