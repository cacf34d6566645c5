import Forwarding
import HTTPTypes
import Hummingbird
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

    /// Whose answer the connection waits for.
    enum Turn: Equatable {
        /// No request under way.
        case idle
        /// Hummingbird answers the request under way; its parts go on to Hummingbird until its
        /// end. `close`: Hummingbird ends the connection after this answer (`Connection: close`).
        case hummingbird(requestEnded: Bool, answerEnded: Bool, close: Bool)
        /// This handler answers the request under way; `close`: the connection ends after it.
        case proxy(requestEnded: Bool, answerEnded: Bool, close: Bool)
        /// The connection ends: an answer to a `Connection: close` request was given, or
        /// Hummingbird was handed an error or the end of the input, which end its loop. Nothing
        /// more is answered: request parts are dropped, reads pass (so the end of the input is
        /// seen), errors and the end of the input go on to Hummingbird.
        case closing
    }

    /// An inbound event that waits for its turn.
    private enum Waiting {
        case part(HTTPRequestPart)
        case error(any Error)
        case inputClosed
    }

    /// The request path: ``ProxyHandler/handle(_:context:)``.
    private let respond: @Sendable (Request, MidtierRequestContext) async -> Response
    private let logger: Logger
    private(set) var turn = Turn.idle
    private var waiting = CircularBuffer<Waiting>()
    /// A `read` held back while something waits.
    private var readHeld = false
    /// nil once the handler is removed (the connection closed).
    private var context: ChannelHandlerContext?
    /// The connection's peer, worked out at its first proxied request.
    private var peer: MidtierRequestContext.Peer?

    package convenience init(proxy: ProxyHandler, logger: Logger) {
        self.init(respond: proxy.handle, logger: logger)
    }

    init(respond: @escaping @Sendable (Request, MidtierRequestContext) async -> Response, logger: Logger) {
        self.respond = respond
        self.logger = logger
    }

    package func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    package func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    // MARK: Inbound: requests

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard turn != .closing else { return }
        let part = unwrapInboundIn(data)
        guard waiting.isEmpty, takesInbound else {
            waiting.append(.part(part))
            return
        }
        receive(part, context: context)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard turn != .closing else {
            context.fireErrorCaught(error)
            return
        }
        guard waiting.isEmpty, takesInbound else {
            waiting.append(.error(error))
            return
        }
        receive(error, context: context)
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case .inputClosed? = event as? ChannelEvent, turn != .closing else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        guard waiting.isEmpty, takesInbound else {
            waiting.append(.inputClosed)
            return
        }
        receiveInputClosed(context: context)
    }

    package func read(context: ChannelHandlerContext) {
        guard waiting.isEmpty || turn == .closing else {
            readHeld = true
            return
        }
        context.read()
    }

    /// Whether the request under way still takes parts (none is under way, or its end has not
    /// come yet); otherwise what comes waits for the next turn.
    private var takesInbound: Bool {
        switch turn {
        case .idle: true
        case .hummingbird(let requestEnded, _, _), .proxy(let requestEnded, _, _): !requestEnded
        case .closing: false
        }
    }

    private func receive(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch turn {
        case .idle:
            guard case .head(let head) = part else {
                // The decoder begins every request with its head; anything else is Hummingbird's to refuse.
                context.fireChannelRead(wrapInboundOut(part))
                return
            }
            let request = Request(head: head, body: RequestBody(buffer: ByteBuffer()))
            guard !MidtierResponder.isOwnRoute(request), Forwarder.isReplayable(request) else {
                turn = .hummingbird(requestEnded: false, answerEnded: false, close: Self.asksToClose(head))
                context.fireChannelRead(wrapInboundOut(part))
                return
            }
            turn = .proxy(requestEnded: false, answerEnded: false, close: Self.asksToClose(head))
            answer(request, context: context)
        case .hummingbird(_, let answerEnded, let close):
            context.fireChannelRead(wrapInboundOut(part))
            guard case .end = part else { return }
            // (An answer with `close` ended the turn already: see `write`.)
            turn = answerEnded ? .idle : .hummingbird(requestEnded: true, answerEnded: false, close: close)
        case .proxy(_, let answerEnded, let close):
            // A call answered here has no body: only its end comes.
            guard case .end = part else { return }
            turn = answerEnded ? .idle : .proxy(requestEnded: true, answerEnded: false, close: close)
        case .closing:
            return
        }
    }

    private func receive(_ error: any Error, context: ChannelHandlerContext) {
        if case .proxy(false, let answerEnded, let close) = turn {
            // The request cannot go on (it has no body, so this is the connection's next bytes):
            // Hummingbird answers the error once this answer has ended.
            turn = .proxy(requestEnded: true, answerEnded: answerEnded, close: close)
            waiting.append(.error(error))
            if answerEnded { nextTurn(context: context) }
            return
        }
        // Hummingbird ends its loop on an error (a parse error is answered 400 first).
        context.fireErrorCaught(error)
        endTurns(context: context)
    }

    private func receiveInputClosed(context: ChannelHandlerContext) {
        if case .proxy(false, let answerEnded, let close) = turn {
            turn = .proxy(requestEnded: true, answerEnded: answerEnded, close: close)
            waiting.append(.inputClosed)
            if answerEnded { nextTurn(context: context) }
            return
        }
        context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        endTurns(context: context)
    }

    /// The connection ends (`Turn.closing`): what waits is dropped, and a held read goes out
    /// so that the end of the input is seen.
    private func endTurns(context: ChannelHandlerContext) {
        turn = .closing
        waiting.removeAll()
        if readHeld {
            readHeld = false
            context.read()
        }
    }

    /// After an answer ended: what waited is taken in order, until a request is under way
    /// again; reading resumes once nothing waits.
    private func nextTurn(context: ChannelHandlerContext) {
        switch turn {
        case .proxy(true, true, _), .hummingbird(true, true, _): turn = .idle
        default: break
        }
        var replayed = false
        while takesInbound, let next = waiting.popFirst() {
            replayed = true
            switch next {
            case .part(let part): receive(part, context: context)
            case .error(let error): receive(error, context: context)
            case .inputClosed: receiveInputClosed(context: context)
            }
        }
        // Hummingbird's channel hands on what it was given when a read completes.
        if replayed { context.fireChannelReadComplete() }
        if waiting.isEmpty, readHeld {
            readHeld = false
            context.read()
        }
    }

    /// `Connection: close` on the request: the connection ends after the answer. The same rule
    /// as Hummingbird's request loop (the header's value exactly `close`), so that a request
    /// ends the connection whichever of the two answers it.
    static func asksToClose(_ head: HTTPRequest) -> Bool {
        head.headerFields[.connection] == "close"
    }

    // MARK: Outbound: Hummingbird's answers

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
        guard case .end = unwrapOutboundIn(data), case .hummingbird(let requestEnded, false, let close) = turn else { return }
        // After a `Connection: close` request Hummingbird's loop stops and closes its side.
        if close {
            endTurns(context: context)
            return
        }
        turn = .hummingbird(requestEnded: requestEnded, answerEnded: true, close: false)
        if requestEnded { nextTurn(context: context) }
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
        guard case .proxy(let requestEnded, false, let close) = turn else { return }
        if close {
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.end(trailers)), promise: written)
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            endTurns(context: context)
            return
        }
        context.writeAndFlush(wrapOutboundOut(.end(trailers)), promise: nil)
        turn = .proxy(requestEnded: requestEnded, answerEnded: true, close: false)
        if requestEnded { nextTurn(context: context) }
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
