package import HummingbirdCore
package import Logging
package import MidtierHTTP
package import NIOCore
package import NIOHTTPTypes

/// A connection of the device listener: Hummingbird's HTTP/1.1 channel (`HTTP1Channel`: its
/// codecs, connection handling and request loop) with a ``ConnectionGuard`` for slow clients
/// and, after Hummingbird's connection state handler, a ``ProxyChannelHandler`` that answers
/// proxy calls before Hummingbird's request loop (docs/architecture.md, "The request path").
package struct DeviceChannel: ServerChildChannel, HTTPChannelHandler {
    package typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let http1: HTTP1Channel
    let edge: MidtierResponder
    package var responder: HTTPChannelHandler.Responder { http1.responder }

    init(responder: @escaping HTTPChannelHandler.Responder, connectionGuard: @escaping @Sendable () -> ConnectionGuard, edge: MidtierResponder) {
        self.http1 = HTTP1Channel(responder: responder, configuration: .init(additionalChannelHandlers: [connectionGuard()]))
        self.edge = edge
    }

    package func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let edge = self.edge
        return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            // After the connection state handler, so that it sees every request and answer
            // (a graceful shutdown waits for the proxy's answers too).
            let pipeline = channel.pipeline.syncOperations
            let connectionState = try pipeline.handler(type: HTTPConnectionStateHandler.self)
            try pipeline.addHandler(ProxyChannelHandler(edge: edge, logger: logger), position: .after(connectionState))
            return value
        }
    }

    package func handle(value asyncChannel: Value, logger: Logger) async {
        await http1.handle(value: asyncChannel, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// The device listener: HTTP/1.1 with a ``ConnectionGuard`` on every connection (the
    /// connections counted per address across the listener; `settings` read for each new
    /// connection, so a reload applies to the connections opened after it) and proxy calls
    /// without a body answered from the pipeline by `edge`, the application's responder.
    package static func device(
        settings: @escaping @Sendable () -> ConnectionGuard.Settings, edge: MidtierResponder,
        logger: Logger
    ) -> HTTPServerBuilder {
        let connections = ConnectionsPerAddress()
        return HTTPServerBuilder { responder in
            DeviceChannel(
                responder: responder,
                connectionGuard: { ConnectionGuard(settings: settings(), connections: connections, logger: logger) },
                edge: edge)
        }
    }
}
