package import NIOCore
package import NIOHTTP1
package import NIOPosix
import NIOSSL
import Synchronization

/// Midtier's keep-alive connections to back ends: one pool per event loop, so that a call runs
/// on the loop that read the device's request, from the device's socket to the back end's
/// and back, without crossing threads (`midtier serve` runs Swift concurrency on the same
/// loops, see `Midtier.main`). Off the loops (`MIDTIER_GLOBAL_EXECUTOR=swift`, other
/// executors) a loop is picked and the call hops to it; nothing else differs.
///
/// Per loop and back end (scheme, host, port) up to `maximumIdlePerOrigin` idle connections
/// are kept, each for at most `idleTimeout`; there is no limit on connections in use. TLS
/// (https destinations) checks the back end's certificate against the system's roots and the
/// destination's host name. docs/operations.md ("Connections to back ends").
///
/// Lifetimes: after `shutdown()` the pool takes no more calls (they fail at once). Calls already
/// under way finish; their connections then close. A pool released without a shutdown closes
/// its idle connections as it goes. A connection or timer that outlives its pool never reaches
/// it (connections hold their pool weakly, the sweeper too). Shut the pool down before its
/// event loop group.
package final class UpstreamConnectionPool: Sendable {
    private let pools: [ObjectIdentifier: UpstreamLoopPool]
    private let group: MultiThreadedEventLoopGroup
    private let isShutDown = Atomic(false)

    package static let maximumIdlePerOrigin = 64
    package static let idleTimeout = TimeAmount.seconds(60)
    static let connectTimeout = TimeAmount.seconds(10)
    /// How often idle connections are checked for `idleTimeout`.
    static let sweepInterval = TimeAmount.seconds(10)

    /// `sweepInterval` is shorter in tests, so that the sweeper runs while pools come and go.
    package init(group: MultiThreadedEventLoopGroup = .singleton, sweepInterval: TimeAmount = sweepInterval) {
        self.group = group
        let tls = TLSContextHolder()
        var pools: [ObjectIdentifier: UpstreamLoopPool] = [:]
        for loop in group.makeIterator() {
            pools[ObjectIdentifier(loop)] = UpstreamLoopPool(loop: loop, tls: tls, sweepInterval: sweepInterval)
        }
        self.pools = pools
    }

    /// The pool of the loop this code runs on, else any loop's.
    private var currentPool: UpstreamLoopPool {
        if let loop = MultiThreadedEventLoopGroup.currentEventLoop, let pool = pools[ObjectIdentifier(loop)] { return pool }
        return pools[ObjectIdentifier(group.next())]!
    }

    /// Starts a call: sends `head` on a pooled or new connection. `connected` gives the
    /// connection's channel once the head is on it (write the body there, then `.end`);
    /// `answer` the back end's answer. Both fail with ``UpstreamFailure``.
    package func start(
        _ head: HTTPRequestHead, to origin: UpstreamOrigin, hasBody: Bool, deadline: NIODeadline
    )
        -> (connected: EventLoopFuture<any Channel>, answer: EventLoopFuture<UpstreamAnswer>)
    {
        let pool = currentPool
        let loop = pool.loop
        guard !isShutDown.load(ordering: .acquiring) else {
            return (loop.makeFailedFuture(UpstreamFailure.shutDown), loop.makeFailedFuture(UpstreamFailure.shutDown))
        }
        let exchange = UpstreamExchange(head: head, origin: origin, hasBody: hasBody, deadline: deadline, loop: loop)
        let started = (exchange.connected.futureResult, exchange.answer.futureResult)
        if loop.inEventLoop {
            pool.start(exchange)
        } else {
            // Made here, used only on the loop from now on.
            nonisolated(unsafe) let exchange = exchange
            loop.execute { pool.start(exchange) }
        }
        return started
    }

    /// Closes the idle connections and keeps none from now on; calls started from now on fail.
    /// Calls under way finish, then their connections close. A second call does nothing.
    package func shutdown() async {
        guard isShutDown.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        for pool in pools.values {
            try? await pool.loop.submit { pool.shutdown() }.get()
        }
    }
}

/// The TLS context for https back ends (TLS 1.2 or newer, the system's roots), made once per
/// pool.
final class TLSContextHolder: Sendable {
    private let made: Result<NIOSSLContext, any Error> = Result {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        return try NIOSSLContext(configuration: configuration)
    }

    var context: NIOSSLContext {
        get throws { try made.get() }
    }
}

/// The idle connections of one event loop, by back end. Confined to `loop`: every method
/// runs there (``UpstreamConnectionPool`` hops to it), hence `@unchecked Sendable`.
///
/// Its connections hold it weakly, and so does the sweeper: it may go first. A connection
/// being made holds it until the connection is made or has failed (at most `connectTimeout`).
final class UpstreamLoopPool: UpstreamConnectionOwner, @unchecked Sendable {
    let loop: any EventLoop
    private let tls: TLSContextHolder
    private let sweepInterval: TimeAmount
    private var idle: [UpstreamOrigin: [UpstreamChannelHandler]] = [:]
    /// Runs while there are idle connections.
    private var sweeper: RepeatedTask?
    private var isShutDown = false

    init(loop: any EventLoop, tls: TLSContextHolder, sweepInterval: TimeAmount) {
        self.loop = loop
        self.tls = tls
        self.sweepInterval = sweepInterval
    }

    /// A pool released without `shutdown()` closes its idle connections (on their loop; none
    /// are left once the loop's group has shut down, which closed them).
    deinit {
        nonisolated(unsafe) let connections = idle.values.flatMap { $0 }
        guard !connections.isEmpty else { return }
        loop.execute {
            for handler in connections { handler.close() }
        }
    }

    func start(_ exchange: UpstreamExchange) {
        loop.preconditionInEventLoop()
        guard !isShutDown else { return exchange.finish(failing: .shutDown) }
        exchange.startClock()
        guard !exchange.isFinished else { return }
        if var connections = idle[exchange.origin], let handler = connections.popLast() {
            idle[exchange.origin] = connections
            handler.start(exchange)
        } else {
            connect(exchange)
        }
    }

    /// Sends `exchange` again on a new connection (its pooled one had gone stale).
    func retry(_ exchange: UpstreamExchange) {
        guard !exchange.isFinished else { return }
        guard !isShutDown else { return exchange.finish(failing: .shutDown) }
        connect(exchange)
    }

    private func connect(_ exchange: UpstreamExchange) {
        let origin = exchange.origin
        let tls: NIOSSLContext?
        do {
            tls = origin.tls ? try origin.trust ?? self.tls.context : nil
        } catch {
            return exchange.finish(failing: .broken("TLS cannot be set up: \(error)"))
        }
        let pool = self
        ClientBootstrap(group: loop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(UpstreamConnectionPool.connectTimeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls {
                        try pipeline.addHandler(NIOSSLClientHandler(context: tls, serverHostname: origin.isIPAddress ? nil : origin.host))
                    }
                    try pipeline.addHTTPClientHandlers()
                    try pipeline.addHandler(UpstreamChannelHandler(origin: origin, pool: pool))
                }
            }
            .connect(host: origin.host, port: origin.port)
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    guard let handler = try? channel.pipeline.syncOperations.handler(type: UpstreamChannelHandler.self) else {
                        channel.close(promise: nil)
                        return exchange.finish(failing: .broken("the connection to \(origin) could not be set up"))
                    }
                    if exchange.isFinished {
                        // The call timed out meanwhile; the connection serves the next one.
                        self.release(handler)
                    } else {
                        handler.start(exchange)
                    }
                case .failure(let error):
                    exchange.finish(failing: .broken("cannot connect to \(origin): \(error)"))
                }
            }
    }

    /// Takes a connection whose call has ended back into the pool, or closes it.
    func release(_ handler: UpstreamChannelHandler) {
        var connections = idle[handler.origin] ?? []
        guard !isShutDown, connections.count < handler.origin.maximumIdle else { return handler.close() }
        handler.idleSince = .now()
        connections.append(handler)
        idle[handler.origin] = connections
        if sweeper == nil {
            sweeper = loop.scheduleRepeatedTask(initialDelay: sweepInterval, delay: sweepInterval) { [weak self] task in
                guard let self else { return task.cancel() }
                self.closeExpired()
            }
        }
    }

    /// Forgets a connection that closed (idle or not).
    func forget(_ handler: UpstreamChannelHandler) {
        guard var connections = idle[handler.origin], let index = connections.firstIndex(where: { $0 === handler }) else { return }
        connections.remove(at: index)
        idle[handler.origin] = connections.isEmpty ? nil : connections
    }

    private func closeExpired() {
        let limit = NIODeadline.now() - UpstreamConnectionPool.idleTimeout
        for (origin, connections) in idle {
            let (expired, kept) = (connections.filter { $0.idleSince < limit }, connections.filter { $0.idleSince >= limit })
            idle[origin] = kept.isEmpty ? nil : kept
            for handler in expired { handler.close() }
        }
        if idle.isEmpty {
            sweeper?.cancel()
            sweeper = nil
        }
    }

    func shutdown() {
        isShutDown = true
        sweeper?.cancel()
        sweeper = nil
        let all = idle.values.flatMap { $0 }
        idle = [:]
        for handler in all { handler.close() }
    }
}

extension UpstreamOrigin {
    /// Whether the host is an IPv4 or IPv6 address (sent without SNI).
    var isIPAddress: Bool {
        (try? SocketAddress(ipAddress: host, port: port)) != nil
    }
}
