import AsyncHTTPClient
import NIOCore
import NIOPosix

/// One forwarding `HTTPClient` per event loop of NIO's singleton group, so that a call to a back
/// end runs on the connection pool of the loop the device's request is already on.
///
/// AsyncHTTPClient's async API only *prefers* an event loop: with one shared client, a request
/// read on loop A is often written to a pooled connection on loop B, and every step of the
/// call then crosses threads (an eventfd wake-up each way). When `midtier serve` runs Swift
/// concurrency on NIO's event loops (see `Midtier.main`), the task handling a request stays on
/// its channel's loop, and picking that loop's own client keeps the whole call on one thread.
/// Elsewhere (tests, other executors) there is no current loop and `shared` serves.
public final class LoopLocalHTTPClients: Sendable {
    /// The client used off the event loops, and for token exchanges and JWKS fetches.
    public let shared: HTTPClient
    private let byLoop: [ObjectIdentifier: HTTPClient]

    /// - Parameter perLoop: whether to make one client per loop of the singleton group; when
    ///   false, every call uses `shared`.
    public init(perLoop: Bool = true) {
        shared = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Forwarder.clientConfiguration())
        var byLoop: [ObjectIdentifier: HTTPClient] = [:]
        if perLoop {
            for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() {
                byLoop[ObjectIdentifier(loop)] = HTTPClient(eventLoopGroup: loop, configuration: Forwarder.clientConfiguration())
            }
        }
        self.byLoop = byLoop
    }

    /// The client of the event loop this code runs on, else `shared`.
    public var current: HTTPClient {
        guard let loop = MultiThreadedEventLoopGroup.currentEventLoop else { return shared }
        return byLoop[ObjectIdentifier(loop)] ?? shared
    }

    /// Closes every client's connections.
    public func shutdown() async {
        for client in byLoop.values { try? await client.shutdown() }
        try? await shared.shutdown()
    }
}
