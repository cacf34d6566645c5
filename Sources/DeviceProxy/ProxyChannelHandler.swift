import Forwarding
import HTTPTypes
import Hummingbird
import HummingbirdCore
package import Logging
import MidtierHTTP
package import NIOCore
package import NIOHTTPTypes

/// Answers the device listener's proxy calls from the connection's channel pipeline
/// (docs/architecture.md, "The request path"). A call to a destination without a request body
/// runs ``ProxyHandler`` in a task started at once on the connection's event loop, and the
/// answer goes to the connection from here: no request loop, no stream of request parts and no
/// response writer in between. Everything else — Midtier's own routes, and proxy calls with a
/// body, whose bodies stream through Hummingbird's request loop to the same ``ProxyHandler`` —
/// goes on to Hummingbird, the next handler.
///
/// One request at a time, in order: what arrives while a request is answered (HTTP/1.1
/// pipelining, a parse error, the end of the input) waits here until that answer has ended,
/// whichever of the two answers it; reading pauses only while something waits, so a connection
/// that sends one request at a time never has its read interest toggled.
package final class ProxyChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    /// The request path: ``MidtierResponder/respondToProxyCall(_:context:)``.
    private let respond: @Sendable (Request, MidtierRequestContext) async -> Response
    private let logger: Logger
    /// Whose turn it is, and what waits (all the decisions; this handler does the I/O).
    private(set) var state = DeviceConnectionStateMachine(classify: ProxyChannelHandler.classify)
    /// nil once the handler is removed (the connection closed).
    private var context: ChannelHandlerContext?
    /// The connection's peer, worked out at its first proxied request.
    private var peer: MidtierRequestContext.Peer?

    package convenience init(edge: MidtierResponder, logger: Logger) {
        self.init(respond: edge.respondToProxyCall, logger: logger)
    }

    init(respond: @escaping @Sendable (Request, MidtierRequestContext) async -> Response, logger: Logger) {
        self.respond = respond
        self.logger = logger
    }

    package func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    package func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    // MARK: Inbound: requests

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(state.inbound(.part(unwrapInboundIn(data))), context: context)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        perform(state.inbound(.error(error)), context: context)
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .inputClosed? = event as? ChannelEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        perform(state.inbound(.inputClosed), context: context)
    }

    package func read(context: ChannelHandlerContext) {
        if state.read() { context.read() }
    }

    /// Whether a request is answered here — a proxy call without a request body — and whether
    /// it asks to close the connection after its answer.
    static func classify(_ head: HTTPRequest) -> (answeredHere: Bool, close: Bool) {
        // The path as Hummingbird's router reads it (`URI`), so that a target in any form an own
        // route would take (an absolute form HTTPTypes leaves whole, say) goes to that route.
        let path = URI(head.path ?? "").path
        let answeredHere = !MidtierResponder.isOwnRoute(path: path[...]) && Forwarder.isReplayable(head.headerFields)
        return (answeredHere, asksToClose(head))
    }

    private func perform(_ action: DeviceConnectionStateMachine.InboundAction, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .handOn(let event):
            handOn(event, context: context)
        case .handOnAndEnd(let event, let read):
            handOn(event, context: context)
            if read { context.read() }
        case .answer(let head):
            answer(Request(head: head, body: RequestBody(buffer: ByteBuffer())), context: context)
        case .nextTurn:
            nextTurn(context: context)
        }
    }

    private func handOn(_ event: DeviceConnectionStateMachine.Event, context: ChannelHandlerContext) {
        switch event {
        case .part(let part): context.fireChannelRead(wrapInboundOut(part))
        case .error(let error): context.fireErrorCaught(error)
        case .inputClosed: context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
    }

    /// After an answer ended: what waited is taken in order, until a request is under way
    /// again; reading resumes once nothing waits.
    private func nextTurn(context: ChannelHandlerContext) {
        var replayed = false
        while let next = state.nextWaiting() {
            replayed = true
            perform(state.receive(next), context: context)
        }
        // Hummingbird's channel hands on what it was given when a read completes.
        if replayed { context.fireChannelReadComplete() }
        if state.releaseHeldRead() { context.read() }
    }

    /// `Connection: close` on the request: the connection ends after the answer. Hummingbird's
    /// request loop closes on exactly this value (`HTTPChannelHandler.handleHTTP`), and a
    /// request must end the connection whichever of the two answers it, so the proxy's answers
    /// follow the same rule (`ProxyPipelineTests` checks it against Hummingbird's loop).
    static func asksToClose(_ head: HTTPRequest) -> Bool {
        head.headerFields[.connection] == "close"
    }

    // MARK: Outbound: Hummingbird's answers

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
        guard case .end = unwrapOutboundIn(data) else { return }
        switch state.hummingbirdAnswerEnded() {
        case .none: break
        case .keepOpen(let next): if next { nextTurn(context: context) }
        // Hummingbird's loop stops and closes its side itself.
        case .close(let read): if read { context.read() }
        }
    }

    // MARK: The answers given here

    /// Runs the request path for `request` and writes its answer. The task starts on this
    /// event loop once the loop has read what is ready on all its connections (so that, with
    /// many connections, the back-end requests of one turn of the loop leave together: starting
    /// at once cost more CPU per call, docs/benchmarks.md), and runs on it until its first
    /// wait; with Swift concurrency on NIO's event loops (`midtier serve`) it resumes on the
    /// loop that woke it, which for the back end's answer is this one.
    private func answer(_ request: Request, context: ChannelHandlerContext) {
        let peer = self.peer ?? MidtierRequestContext.peer(of: context.channel)
        self.peer = peer
        let requestContext = MidtierRequestContext(source: .init(channel: context.channel, logger: logger), peer: peer)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let respond = self.respond
        context.eventLoop.execute {
            Task.immediate {
                let response = await respond(request, requestContext)
                let writer = ProxyAnswerWriter(handler: handler, contentLength: response.body.contentLength)
                do {
                    try await writer.writeHead(response.head)
                    try await response.body.write(writer)
                } catch {
                    // The connection closed under the answer, or the back end broke off a streamed
                    // body: the device sees the connection close before the end.
                    try? await writer.perform { handler in
                        handler.abort()
                        return nil
                    }
                }
            }
        }
    }

    /// Writes the head of the answer; flushed with `flush` (a streamed body: the device sees
    /// the status before the back end's first bytes), else with the body.
    fileprivate func writeHead(_ head: HTTPResponse, flush: Bool) throws {
        guard let context, context.channel.isActive else { throw ChannelError.ioOnClosedChannel }
        var head = head
        head.headerFields[.date] = HTTPDate.now
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if flush { context.flush() }
    }

    /// Writes a part of the body; flushed with `flush`, and when the connection takes no more
    /// for now — then the returned future says when it has.
    fileprivate func writeBody(_ buffer: ByteBuffer, flush: Bool) throws -> EventLoopFuture<Void>? {
        guard let context, context.channel.isActive else { throw ChannelError.ioOnClosedChannel }
        guard context.channel.isWritable else {
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.body(buffer)), promise: written)
            return written.futureResult
        }
        context.write(wrapOutboundOut(.body(buffer)), promise: nil)
        if flush { context.flush() }
        return nil
    }

    fileprivate func writeEnd(_ trailers: HTTPFields?) throws {
        guard let context, context.channel.isActive else { throw ChannelError.ioOnClosedChannel }
        switch state.proxyAnswerEnded() {
        case .none:
            return
        case .close(let read):
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.end(trailers)), promise: written)
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            if read { context.read() }
        case .keepOpen(let next):
            context.writeAndFlush(wrapOutboundOut(.end(trailers)), promise: nil)
            if next { nextTurn(context: context) }
        }
    }

    fileprivate func abort() {
        context?.close(promise: nil)
    }
}

@available(*, unavailable)
extension ProxyChannelHandler: Sendable {}

/// Writes the answer of a call ``ProxyChannelHandler`` took to the device's connection, on the
/// connection's event loop (at once when the task is there already). A body of known length is
/// flushed with its end, in one write with the head; a streamed one part by part, waiting
/// whenever the connection takes no more for now.
struct ProxyAnswerWriter: ResponseBodyWriter {
    let handler: NIOLoopBound<ProxyChannelHandler>
    let contentLength: Int?
    var written = 0

    func writeHead(_ head: HTTPResponse) async throws {
        let flush = contentLength == nil
        try await perform { handler in
            try handler.writeHead(head, flush: flush)
            return nil
        }
    }

    mutating func write(_ buffer: ByteBuffer) async throws {
        written += buffer.readableBytes
        let flush = contentLength.map { written < $0 } ?? true
        try await perform { handler in try handler.writeBody(buffer, flush: flush) }
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        try await perform { handler in
            try handler.writeEnd(trailingHeaders)
            return nil
        }
    }

    /// Runs `work` on the connection's event loop and waits for the future it returns, if any.
    func perform(_ work: @escaping @Sendable (ProxyChannelHandler) throws -> EventLoopFuture<Void>?) async throws {
        let handler = self.handler
        if handler.eventLoop.inEventLoop {
            if let wait = try work(handler.value) { try await wait.get() }
            return
        }
        try await handler.eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
            do {
                return try work(handler.value) ?? handler.eventLoop.makeSucceededVoidFuture()
            } catch {
                return handler.eventLoop.makeFailedFuture(error)
            }
        }.get()
    }
}
