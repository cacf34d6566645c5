import Foundation
import MidtierCore
import MidtierServer
import MidtierTestSupport
import NIOHTTP1
import Synchronization
import Testing

@testable import TokenExchange

/// A TCP server that misbehaves on purpose, one way at a time: it closes the connection
/// without answering, hangs, answers with canned bytes, or trickles a body.
final class FaultServer: @unchecked Sendable {
    enum Mode: Sendable {
        case close
        case hang
        case respond(String)
        /// Headers at once, then one body byte every `interval` seconds.
        case trickle(interval: Double)
        /// A 1 MB answer (streamed, not read whole): 64 KiB at once, then one byte every
        /// `interval` seconds.
        case trickleLarge(interval: Double)
        /// A 16 MB answer (more than the kernel buffers between Midtier and a device hold), all at once.
        case large
    }

    let port: Int
    private let listener: Int32
    private let mode = Mutex<Mode>(.close)
    private let connections = Mutex(0)

    var accepted: Int { connections.withLock { $0 } }
    func set(_ newMode: Mode) { mode.withLock { $0 = newMode } }

    init() {
        (listener, port) = listenOnLoopback()
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { Glibc.close(listener) }

    private func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            connections.withLock { $0 += 1 }
            let current = mode.withLock { $0 }
            Thread { [self] in serve(connection, current) }.start()
        }
    }

    private func serve(_ connection: Int32, _ mode: Mode) {
        defer { Glibc.close(connection) }
        // Read the request head (and whatever body came with it) before misbehaving.
        var buffer = [UInt8](repeating: 0, count: 65536)
        var received: [UInt8] = []
        while !received.contains(13) || String(decoding: received, as: UTF8.self).range(of: "\r\n\r\n") == nil {
            let count = recv(connection, &buffer, buffer.count, 0)
            if count <= 0 { return }
            received += buffer[0..<count]
        }
        usleep(20_000)
        _ = recv(connection, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        func send(_ text: String) { _ = text.withCString { Glibc.send(connection, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }
        switch mode {
        case .close:
            var linger = linger(l_onoff: 1, l_linger: 0)  // RST, not a polite FIN
            setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        case .hang:
            sleep(10)
        case .respond(let text):
            send(text)
        case .trickle(let interval):
            send("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n")
            for _ in 0..<1000 {
                send("x")
                usleep(useconds_t(interval * 1_000_000))
            }
        case .large:
            send("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(Self.largeSize)\r\nConnection: close\r\n\r\n")
            let body = [UInt8](repeating: UInt8(ascii: "y"), count: Self.largeSize)
            var sent = 0
            while sent < body.count {
                let count = body[sent...].withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if count <= 0 { return }
                sent += count
            }
        case .trickleLarge(let interval):
            send("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n")
            send(String(repeating: "x", count: 65536))
            // Until Midtier closes the connection: an answer that ended would prove nothing.
            while true {
                guard Glibc.send(connection, "x", 1, Int32(MSG_NOSIGNAL)) == 1 else { return }
                usleep(useconds_t(interval * 1_000_000))
            }
        }
    }

    static let largeSize = 16_000_000

    static func http(_ status: String, _ contentType: String, _ body: String) -> String {
        "HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
    }
}

/// Failures of the token service and of the back end, injected one at a time: each gives a
/// clear 502/504 once the destination's timeout is up (not when the fault would end), caches
/// nothing, and Midtier recovers as soon as the fault is gone.
@Suite(.serialized, .timeLimit(.minutes(10))) struct FaultInjectionTests {
    static let timeout = 800
    // No test here measures time: that an answer came from the timeout shows in its status
    // (a hang that ended would be 502, a trickle that ended 200, a streamed answer run to its
    // end no error); how soon after the timeout Midtier answers is for benchmarks.

    /// Destination `faulty`: SAML, its token service and its data both at fault servers.
    static func environment(token: FaultServer, data: FaultServer, _ body: (TestEnvironment) async throws -> Void) async throws {
        try await TestEnvironment.with(
            adjust: { configuration, _, _ in
                guard case .samlBearer(var settings) = configuration.destinations["sf"]!.authentication else { return }
                settings.tokenServiceURL = "http://127.0.0.1:\(token.port)/oauth/token"
                settings.assertionRecipient = settings.tokenServiceURL
                configuration.destinations["faulty"] = DestinationConfiguration(
                    name: "faulty", url: "http://127.0.0.1:\(data.port)/data", authentication: .samlBearer(settings),
                    userIdSource: "sfUserId", timeoutMilliseconds: timeout)
                configuration.apps["demo"]!.destinations.append("faulty")
            }, body)
    }

    /// Midtier's own (client-side) TCP connections to `port` that are still open: ESTABLISHED,
    /// or CLOSE_WAIT (the peer closed and Midtier never did: a leak). Read from /proc/net/tcp,
    /// where the fault servers' accepted sockets have `port` as local port and are not counted.
    static func openConnections(to port: Int) -> Int {
        // procfs files report size 0: read until the end, not one page.
        guard let file = fopen("/proc/net/tcp", "r") else { return -1 }
        defer { fclose(file) }
        var bytes: [UInt8] = [], chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        let table = String(decoding: bytes, as: UTF8.self)
        return table.split(separator: "\n").dropFirst().count { line in
            let fields = line.split(separator: " ")
            guard fields.count > 3, let remotePort = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }) else { return false }
            return remotePort == port && (fields[3] == "01" || fields[3] == "08")
        }
    }

    /// After a fault: no connection to the fault servers left open and no exchange still
    /// running, within `seconds` (the answer may reach the device a moment before the close).
    static func expectNothingLeaked(_ env: TestEnvironment, _ servers: [FaultServer], after fault: String, seconds: Double = 3) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var open = 0, exchanges = 0
        repeat {
            open = servers.reduce(0) { $0 + openConnections(to: $1.port) }
            exchanges = env.server.tokens.exchangesInFlight
            if open == 0 && exchanges == 0 { return }
            try await Task.sleep(for: .milliseconds(50))
        } while ContinuousClock.now < deadline
        #expect(open == 0, "\(fault): \(open) connection(s) to the fault servers still open after \(seconds) s")
        #expect(exchanges == 0, "\(fault): \(exchanges) exchange(s) still running after \(seconds) s")
    }

    /// A device with a small receive buffer that reads the head of an answer, stops reading for
    /// `pause`, then reads the rest: the status and how many body bytes arrived.
    static func slowDeviceRead(port: Int, id: String, pause: Duration) throws -> (status: Int, bodyBytes: Int) {
        let device = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(device) }
        var small: Int32 = 4096
        setsockopt(device, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(device, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestFailure("cannot connect to Midtier") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(device, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = "GET /faulty/large HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(TestUser.alice.basic)\r\nX-SMP-APPCID: \(id)\r\n\r\n"
        _ = request.withCString { Glibc.send(device, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var headEnd: Int?
        while headEnd == nil {
            let count = recv(device, &buffer, buffer.count, 0)
            guard count > 0 else { throw TestFailure("no head from Midtier") }
            received += buffer[0..<count]
            headEnd =
                received.count < 4 ? nil : (0...(received.count - 4)).first { received[$0..<$0 + 4].elementsEqual([13, 10, 13, 10]) }.map { $0 + 4 }
        }
        let status = Int(String(decoding: received[9..<12], as: UTF8.self)) ?? 0
        var bodyBytes = received.count - headEnd!
        Thread.sleep(forTimeInterval: Double(pause.components.seconds) + Double(pause.components.attoseconds) / 1e18)
        while bodyBytes < FaultServer.largeSize {
            let count = recv(device, &buffer, buffer.count, 0)
            if count <= 0 { break }
            bodyBytes += count
        }
        return (status, bodyBytes)
    }

    func call(_ env: TestEnvironment, _ id: String) async throws -> TestEnvironment.Reply {
        try await env.call(.GET, "/faulty/x", headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)])
    }

    static let goodToken = FaultServer.http(
        "200 OK", "application/json", #"{"access_token":"fault-token-1","token_type":"Bearer","expires_in":3600}"#)
    static let goodData = FaultServer.http("200 OK", "application/json", #"{"d":{"ok":true}}"#)

    @Test func tokenServiceFaultsAre502Or504AndNothingIsCached() async throws {
        let token = FaultServer(), data = FaultServer()
        data.set(.respond(Self.goodData))
        try await Self.environment(token: token, data: data) { env in
            let id = try await env.register(.alice)
            let faults: [(String, FaultServer.Mode, Int)] = [
                ("connection reset", .close, 502),
                ("slower than the timeout", .hang, 504),
                ("500", .respond(FaultServer.http("500 Internal Server Error", "text/plain", "boom")), 502),
                ("garbage", .respond(FaultServer.http("200 OK", "application/json", "this is not json")), 502),
                ("an HTML page", .respond(FaultServer.http("200 OK", "text/html", "<html><body>Login</body></html>")), 502),
                ("negative expires_in", .respond(FaultServer.http("200 OK", "application/json", #"{"access_token":"t","expires_in":-5}"#)), 502),
                ("no expires_in", .respond(FaultServer.http("200 OK", "application/json", #"{"access_token":"t"}"#)), 502),
                (
                    "expires_in not a number", .respond(FaultServer.http("200 OK", "application/json", #"{"access_token":"t","expires_in":"soon"}"#)),
                    502
                ),
                ("no access_token", .respond(FaultServer.http("200 OK", "application/json", #"{"expires_in":60}"#)), 502),
            ]
            for (name, mode, expected) in faults {
                token.set(mode)
                let reply = try await call(env, id)
                #expect(reply.status == expected, "\(name): \(reply.status) \(reply.text)")
                #expect(reply.errorMessage != nil, "\(name): OData error body")
                try await Self.expectNothingLeaked(env, [token, data], after: name)
            }
            #expect(env.server.tokens.count == 0, "no failure was cached")
            // Healed: the next call exchanges and succeeds, and the token is cached.
            let before = token.accepted
            token.set(.respond(Self.goodToken))
            #expect(try await call(env, id).status == 200)
            #expect(try await call(env, id).status == 200)
            #expect(token.accepted == before + 1, "one exchange after healing, then the cached token")
            try await Self.expectNothingLeaked(env, [token, data], after: "healing")
        }
    }

    @Test func backEndFaultsAre502Or504AndMidtierRecovers() async throws {
        let token = FaultServer(), data = FaultServer()
        token.set(.respond(Self.goodToken))
        try await Self.environment(token: token, data: data) { env in
            let id = try await env.register(.alice)
            for (name, mode, expected) in [("connection reset", FaultServer.Mode.close, 502), ("slower than the timeout", .hang, 504)] {
                data.set(mode)
                let reply = try await call(env, id)
                #expect(reply.status == expected, "\(name): \(reply.status)")
                try await Self.expectNothingLeaked(env, [token, data], after: name)
            }
            // The leak check sees a connection while one is open (so it can fail).
            data.set(.hang)
            let pending = Task { try await call(env, id) }
            let watchUntil = ContinuousClock.now + .milliseconds(Self.timeout - 100)
            var seenOpen = 0
            while seenOpen == 0, ContinuousClock.now < watchUntil {
                seenOpen = Self.openConnections(to: data.port)
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(seenOpen >= 1, "a call in progress shows as an open connection")
            #expect(try await pending.value.status == 504)
            try await Self.expectNothingLeaked(env, [token, data], after: "a second hang")
            // A (small) body that trickles past the timeout: 504 (its end would be 200).
            data.set(.trickle(interval: 0.05))
            let trickled = try await call(env, id)
            #expect(trickled.status == 504, "trickle: \(trickled.status)")
            try await Self.expectNothingLeaked(env, [token, data], after: "trickle")
            // A large, streamed answer that trickles past the timeout: the answer has begun (200),
            // so Midtier cuts it off at the deadline rather than letting it run on.
            data.set(.trickleLarge(interval: 0.05))
            var cutOff = false
            do {
                let reply = try await call(env, id)
                Issue.record("a trickling streamed answer ran to the end: \(reply.status), \(reply.body.count) bytes")
            } catch {
                cutOff = true
            }
            #expect(cutOff, "the streamed answer is cut off")
            try await Self.expectNothingLeaked(env, [token, data], after: "large trickle")
            // A device that reads slowly is not the back end's fault: a large answer the back end
            // sent at once reaches a device that stops reading for twice the timeout, whole
            // (Midtier's stream is held back meanwhile: 16 MB do not fit in the socket buffers).
            data.set(.large)
            let port = env.midtierPort
            let received = try await offThePool { try Self.slowDeviceRead(port: port, id: id, pause: .milliseconds(2 * Self.timeout)) }
            #expect(received.status == 200 && received.bodyBytes == FaultServer.largeSize, "slow device: \(received)")
            data.set(.respond(Self.goodData))
            let healed = try await call(env, id)
            #expect(healed.status == 200, "recovered: \(healed.text)")
            try await Self.expectNothingLeaked(env, [token, data], after: "healing")
        }
    }
}
