package import HummingbirdCore
package import Logging
package import MidtierHTTP
package import NIOCore
import NIOHTTP1
package import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// A connection of the device listener: Hummingbird's HTTP/1.1 channel (the same codecs and
/// connection handling as `HTTPServerBuilder.http1`) with a ``ConnectionGuard`` for slow
/// clients and a ``ProxyChannelHandler`` that answers proxy calls before Hummingbird's request
/// loop (docs/architecture.md, "The request path").
package struct DeviceChannel: ServerChildChannel, HTTPChannelHandler {
    package typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    package let responder: HTTPChannelHandler.Responder
    let connectionGuard: @Sendable () -> ConnectionGuard
    let proxy: ProxyHandler

    package func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            // As Hummingbird's HTTP1Channel: HTTP/1.1 requests are taken one at a time
            // (pipelining is handled above), errors are answered by the request loop, and the
            // outbound headers are validated by HTTPTypes already.
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = 80 * 1024
            limits.maxHeaderListSize = 80 * 1024
            limits.maxHeaderFieldCount = 1000
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false,
                withOutboundHeaderValidation: false, withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: limits)
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandler(connectionGuard())
            try pipeline.addHandler(HTTPConnectionStateHandler(logger: logger))
            try pipeline.addHandler(ProxyChannelHandler(proxy: proxy, logger: logger))
            return try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    package func handle(value asyncChannel: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: asyncChannel, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// The device listener: HTTP/1.1 with a ``ConnectionGuard`` on every connection (the
    /// connections counted per address across the listener; `settings` read for each new
    /// connection, so a reload applies to the connections opened after it) and proxy calls
    /// answered by `proxy` from the pipeline.
    package static func device(
        settings: @escaping @Sendable () -> ConnectionGuard.Settings, proxy: ProxyHandler,
        logger: Logger
    ) -> HTTPServerBuilder {
        let connections = ConnectionsPerAddress()
        return HTTPServerBuilder { responder in
            DeviceChannel(
                responder: responder,
                connectionGuard: { ConnectionGuard(settings: settings(), connections: connections, logger: logger) },
                proxy: proxy)
        }
    }
}
