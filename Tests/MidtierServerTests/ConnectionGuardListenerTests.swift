import Foundation
import MidtierCore
import MidtierHTTP
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// The connection guard on both listeners, over real sockets (docs/operations.md, "Slow and
/// idle clients"); its rules alone are `ConnectionGuardTests` (MidtierHTTPTests).
@Suite(.timeLimit(.minutes(10))) struct ConnectionGuardListenerTests {
    // MARK: Both listeners, over real sockets

    @Test func halfHeadsAreClosedOnBothListenersWhileRealClientsAreServed() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.server.connectionLimits = ConnectionLimits(requestHeadSeconds: 1, idleSeconds: 1, requestBodySeconds: 1)
        }) { environment in
            let device = try RawConnection(port: environment.midtierPort)
            let admin = try RawConnection(port: environment.adminPort)
            try device.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Half: ")
            try admin.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Half: ")
            let health = try await environment.call(.GET, "/healthz")
            #expect(health.status == 200)
            #expect(try await device.closedByPeer() == "", "closed without an answer")
            #expect(try await admin.closedByPeer() == "")
        }
    }

    @Test func trustedProxiesAreNotCountedOnListenButEveryPeerIsOnAdminListen() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.server.connectionLimits = ConnectionLimits(maxConnectionsPerAddress: 1)
            configuration.server.trustedProxies = [AddressRange("127.0.0.1")!]
        }) { environment in
            let get = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
            // listen: the load balancer's address is not capped; both connections are served.
            let first = try RawConnection(port: environment.midtierPort)
            try first.send(get)
            #expect(try await first.answerHead().hasPrefix("HTTP/1.1 200"))
            let second = try RawConnection(port: environment.midtierPort)
            try second.send(get)
            #expect(try await second.answerHead().hasPrefix("HTTP/1.1 200"))
            // adminListen: trustedProxies mean nothing there; the second connection is refused.
            let admin = try RawConnection(port: environment.adminPort)
            try admin.send(get)
            #expect(try await admin.answerHead().hasPrefix("HTTP/1.1 200"))
            let over = try RawConnection(port: environment.adminPort)
            try? over.send(get)
            #expect(try await over.closedByPeer() == "", "closed at once, without an answer")
            admin.close()
            // Once the first has closed, the address is served again (the count comes down
            // when Midtier sees the close).
            var served = false
            for _ in 0..<200 where !served {
                let again = try RawConnection(port: environment.adminPort)
                try? again.send(get)
                served = (try? await again.answerHead())?.hasPrefix("HTTP/1.1 200") == true
                if !served { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(served)
        }
    }
}

/// A client socket that sends raw bytes and reads without blocking a thread of the cooperative
/// pool (it polls, with a generous bound).
final class RawConnection: @unchecked Sendable {
    private let descriptor: Int32
    private var closed = false

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            Glibc.close(descriptor)
            throw Failure(description: "cannot connect to port \(port)")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    }

    deinit { close() }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(descriptor)
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw Failure(description: "send failed") }
    }

    /// Reads until the peer closes (end of stream or reset); what came before. Throws when it
    /// is still open after the bound.
    func closedByPeer(within seconds: Int = 30) async throws -> String {
        let (received, closed) = try await read(within: seconds) { _ in false }
        guard closed else { throw Failure(description: "still open after \(seconds) s") }
        return received
    }

    /// Reads until the end of an answer's head; empty when the peer closes first.
    func answerHead(within seconds: Int = 30) async throws -> String {
        let (received, closed) = try await read(within: seconds) { $0.contains("\r\n\r\n") }
        if closed { return "" }
        guard received.contains("\r\n\r\n") else { throw Failure(description: "no answer within \(seconds) s") }
        return received
    }

    /// Reads until `enough` says so of what came, the peer closes (`closed`), or the bound
    /// passes (a guard against a hang, never a timing assertion).
    private func read(within seconds: Int, until enough: (String) -> Bool) async throws -> (received: String, closed: Bool) {
        var received: [UInt8] = []
        let end = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < end {
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += buffer.prefix(count)
                let text = String(decoding: received, as: UTF8.self)
                if enough(text) { return (text, false) }
            } else if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                return (String(decoding: received, as: UTF8.self), true)
            } else {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        return (String(decoding: received, as: UTF8.self), false)
    }
}
