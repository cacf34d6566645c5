package import HummingbirdCore
package import Logging
package import MidtierCore
package import NIOCore
package import NIOHTTPTypes

/// Closes the connections of clients that are too slow, and refuses connections over
/// `maxConnectionsPerAddress` (docs/operations.md, "Slow and idle clients"). One per connection
/// on both listeners, right after the HTTP/1 codec (`guardedHTTP1` on `adminListen`,
/// `DeviceProxy/DeviceChannel` on `listen`): it sees the request's parts, the end of every
/// socket read (also of one that completes no part, as half a head), Midtier's requests for
/// more bytes and the answer's end, whoever gives it; ``ConnectionDeadlines`` decides.
/// Its one timer runs on the connection's event loop and is cancelled when the connection closes.
package final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    /// What a listener's connections are held to; read for each new connection.
    package struct Settings: Sendable {
        package var limits: ConnectionLimits
        /// Peers whose connections are not counted for `maxConnectionsPerAddress`: the
        /// `trustedProxies` on `listen`, through which every client comes.
        package var uncounted: [AddressRange]

        package init(limits: ConnectionLimits, uncounted: [AddressRange] = []) {
            self.limits = limits
            self.uncounted = uncounted
        }
    }

    private let settings: Settings
    private let connections: ConnectionsPerAddress
    private let logger: Logger
    /// nil until the connection is active, and again once it closes.
    private var deadlines: ConnectionDeadlines?
    private var closed = false
    /// What this connection is counted under in `connections`.
    private var countedAs: [UInt8]?
    private var timer: Scheduled<Void>?
    private var timerAt: NIODeadline?

    package init(settings: Settings, connections: ConnectionsPerAddress, logger: Logger) {
        self.settings = settings
        self.connections = connections
        self.logger = logger
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        stop()
    }

    package func channelActive(context: ChannelHandlerContext) {
        start(context)
        // A connection refused over the cap is closed already: the handlers after this one
        // never see it open.
        guard !closed else { return }
        context.fireChannelActive()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: deadlines?.headRead()
        case .body(let bytes):
            if deadlines?.bodyRead(bytes.readableBytes) == false {
                logger.debug(
                    "closed a connection: more than the drain limit of body bytes came after its early answer",
                    metadata: ["peer": "\(context.channel.remoteAddress?.ipAddress ?? "")"])
                close(context)
                return
            }
        case .end: deadlines?.endRead(at: .now())
        }
        context.fireChannelRead(data)
        arm(context)
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        deadlines?.bytesArrived(at: .now())
        arm(context)
        context.fireChannelReadComplete()
    }

    package func read(context: ChannelHandlerContext) {
        deadlines?.readRequested(at: .now())
        arm(context)
        context.read()
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        // The wait for the next request starts once the answer is with the operating system:
        // a device that reads a large answer slowly is not idle.
        let sent = promise ?? context.eventLoop.makePromise(of: Void.self)
        sent.futureResult.assumeIsolated().whenSuccess {
            self.deadlines?.answerSent(at: .now())
            self.arm(context)
        }
        context.write(data, promise: sent)
    }

    private func start(_ context: ChannelHandlerContext) {
        guard deadlines == nil, !closed else { return }
        deadlines = ConnectionDeadlines(settings.limits, openedAt: .now())
        if let address = context.channel.remoteAddress?.ipBytes,
            !settings.uncounted.contains(where: { $0.contains(address) })
        {
            let key = ConnectionsPerAddress.key(of: address)
            guard connections.open(key, limit: settings.limits.maxConnectionsPerAddress) else {
                logger.debug(
                    "refused a connection: its address holds maxConnectionsPerAddress already",
                    metadata: [
                        "peer": "\(context.channel.remoteAddress?.ipAddress ?? "")",
                        "maxConnectionsPerAddress": "\(settings.limits.maxConnectionsPerAddress)",
                    ])
                close(context)
                return
            }
            countedAs = key
        }
        arm(context)
    }

    /// Makes sure the timer fires no later than the deadline that applies now. A timer set for
    /// an earlier time is kept: when it fires it looks again (an upload moves the deadline at
    /// every read; this way it is not scheduled anew each time).
    private func arm(_ context: ChannelHandlerContext) {
        guard !closed, let deadline = deadlines?.deadline else { return }
        if let timerAt, timerAt <= deadline.at { return }
        timer?.cancel()
        timerAt = deadline.at
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline.at) { self.fire(context) }
    }

    private func fire(_ context: ChannelHandlerContext) {
        timer = nil
        timerAt = nil
        guard !closed, let deadline = deadlines?.deadline else { return }
        guard deadline.at <= .now() else {
            arm(context)
            return
        }
        logger.log(
            level: deadline.limit == .idle ? .trace : .debug,
            deadline.limit == .idle ? "closed an idle connection" : "closed a slow client's connection",
            metadata: ["limit": "\(deadline.limit.rawValue)", "peer": "\(context.channel.remoteAddress?.ipAddress ?? "")"])
        close(context)
    }

    private func close(_ context: ChannelHandlerContext) {
        stop()
        context.close(promise: nil)
    }

    /// Ends the timer and the count, once.
    private func stop() {
        closed = true
        deadlines = nil
        timer?.cancel()
        timer = nil
        timerAt = nil
        if let countedAs {
            connections.close(countedAs)
            self.countedAs = nil
        }
    }
}

@available(*, unavailable)
extension ConnectionGuard: Sendable {}

extension HTTPServerBuilder {
    /// HTTP/1.1 with a ``ConnectionGuard`` on every connection (the admin listener), the
    /// connections counted per address across the listener. `settings` is read for each new connection, so a reload
    /// applies to the connections opened after it.
    package static func guardedHTTP1(settings: @escaping @Sendable () -> ConnectionGuard.Settings, logger: Logger) -> HTTPServerBuilder {
        let connections = ConnectionsPerAddress()
        var configuration = HTTP1Channel.Configuration()
        configuration.additionalChannelHandlers = { [ConnectionGuard(settings: settings(), connections: connections, logger: logger)] }
        return .http1(configuration: configuration)
    }
}
