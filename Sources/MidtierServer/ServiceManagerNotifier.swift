import Foundation
package import Logging
package import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// systemd's readiness protocol (`sd_notify(3)`; docs/operations.md, "Under systemd"): with
/// `Type=notify`, systemd starts the next unit, and counts Midtier as started, only once it says
/// `READY=1`; `STOPPING=1` tells it the drain has begun. The messages are datagrams to the
/// `AF_UNIX` socket `NOTIFY_SOCKET` names (a path, or `@` for the abstract namespace); without
/// that variable (not under systemd) nothing is sent.
package struct ServiceManagerNotifier: Sendable {
    private let socketPath: String?

    package init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"] ?? ""
        socketPath = path.hasPrefix("/") || path.hasPrefix("@") ? path : nil
    }

    /// Whether a service manager listens.
    package var isActive: Bool { socketPath != nil }

    /// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=…`, newline-separated); false when there
    /// is no socket or the datagram could not be sent.
    @discardableResult
    package func notify(_ state: String) -> Bool {
        guard let socketPath else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        // An abstract socket's name starts with a NUL byte instead of `@`.
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
        }
        #if canImport(Glibc)
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let descriptor = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)
        #endif
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                message.withUnsafeBytes { bytes in
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), socketAddress, length)
                }
            }
        }
        return sent == message.count
    }
}

/// Says `READY=1` once every listener is bound (and runs what waits for that), and
/// `STOPPING=1` when the graceful shutdown begins: put it last among the service group's services, which are told to stop in reverse
/// order, so it hears of the shutdown first.
package final class ReadinessAnnouncer: Service, Sendable {
    private let notifier: ServiceManagerNotifier
    private let expected: Int
    private let running = Mutex(0)
    private let logger: Logger
    private let onReady: @Sendable () async -> Void

    /// - Parameters:
    ///   - listeners: how many listeners must be bound before Midtier is ready.
    ///   - onReady: what runs once they are (whether or not a service manager listens).
    package init(
        listeners: Int, notifier: ServiceManagerNotifier = ServiceManagerNotifier(), logger: Logger,
        onReady: @escaping @Sendable () async -> Void = {}
    ) {
        self.notifier = notifier
        self.expected = listeners
        self.logger = logger
        self.onReady = onReady
    }

    /// Called by each listener once it is bound (`onServerRunning`).
    package func listenerRunning() {
        let count = running.withLock { count in
            count += 1
            return count
        }
        guard count == expected else { return }
        Task { await onReady() }
        guard notifier.isActive else { return }
        if notifier.notify("READY=1\nSTATUS=listening") {
            logger.info("told the service manager Midtier is ready")
        } else {
            logger.warning("could not tell the service manager Midtier is ready (NOTIFY_SOCKET)")
        }
    }

    package func run() async throws {
        try? await gracefulShutdown()
        notifier.notify("STOPPING=1\nSTATUS=draining")
    }
}
