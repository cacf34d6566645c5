import NIOCore
import NIOHTTP1

/// The last handler of a pooled back-end connection (after NIO's HTTP/1 client codecs): runs
/// one call at a time from request head to the end of the answer, then goes back to its pool
/// when the connection can be used again. Confined to the connection's event loop.
///
/// ```
///  idle ──start──▶ awaitingHead ──head──▶ collecting (small body) ──end──▶ idle (pool) or closed
///                                    └──▶ streaming (large body)  ──end──▶ idle (pool) or closed
///  any ──error, close, timeout, device gone──▶ closed
/// ```
///
/// The handler holds its pool weakly: the pool may go first (released, or shut down while this
/// connection carries a call or is still closing). A connection whose pool is gone finishes its
/// call and closes; it never reaches the pool.
final class UpstreamChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private enum State {
        /// No call: in the pool, or just connected.
        case idle
        /// The request head is out (its body may still be on its way); no answer yet.
        case awaitingHead(UpstreamExchange)
        /// A small answer (announced length at most `wholeBodyLimit`) read whole.
        case collecting(UpstreamExchange, HTTPResponseHead, ByteBuffer?)
        /// A larger answer, streamed to the device as it comes.
        case streaming(UpstreamExchange, keepAlive: Bool, UpstreamBody.Producer.Source)
        /// Closed or closing: never used again.
        case closed
    }

    /// Answers announced up to this size are read whole and handed over in one piece.
    static let wholeBodyLimit = 64 * 1024

    let origin: UpstreamOrigin
    private weak var pool: UpstreamLoopPool?
    private var state = State.idle
    private var context: ChannelHandlerContext?
    /// When the connection last went back to the pool.
    var idleSince = NIODeadline.now()
    /// Calls this connection has carried (a pooled one may have been closed by the back end
    /// meanwhile, which a call learns only when it fails).
    private var calls = 0
    /// Whether the current call's request has been sent to its end.
    private var requestSent = false
    /// Whether anything of the current call's answer has arrived.
    private var answerBegan = false
    /// Reading is held back while the device's side has not taken the streamed parts.
    private var readingPaused = false
    private var readPending = false

    init(origin: UpstreamOrigin, pool: UpstreamLoopPool) {
        self.origin = origin
        self.pool = pool
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Sends `exchange`'s request head (and its end, when it has no body).
    func start(_ exchange: UpstreamExchange) {
        guard case .idle = state, let context else { return sendElsewhere(exchange) }
        state = .awaitingHead(exchange)
        calls += 1
        requestSent = false
        answerBegan = false
        readingPaused = false
        exchange.connection = self
        context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
        if !exchange.hasBody {
            context.write(wrapOutboundOut(.end(nil)), promise: nil)
            requestSent = true
        }
        context.flush()
        exchange.didConnect(context.channel)
    }

    // MARK: The request body, written by the caller through the channel

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { requestSent = true }
        context.write(data, promise: promise)
    }

    // MARK: The answer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch state {
        case .awaitingHead(let exchange):
            guard case .head(let head) = part else { return fail(exchange, .broken("the back end's answer has no head")) }
            answerBegan = true
            if Self.readsWhole(head, method: exchange.head.method) {
                state = .collecting(exchange, head, nil)
            } else {
                let (body, source) = UpstreamBody.make(handler: self, exchange: exchange, loop: context.eventLoop)
                state = .streaming(exchange, keepAlive: head.isKeepAlive, source)
                exchange.succeed(UpstreamAnswer(head: head, body: .stream(body)))
            }

        case .collecting(let exchange, let head, var collected):
            switch part {
            case .body(var chunk):
                state = .closed  // not holding a second reference while the buffer grows
                if collected == nil { collected = chunk } else { collected!.writeBuffer(&chunk) }
                state = .collecting(exchange, head, collected)
            case .end:
                exchange.succeed(UpstreamAnswer(head: head, body: .whole(collected ?? ByteBuffer())))
                callEnded(exchange, keepAlive: head.isKeepAlive)
            case .head:
                fail(exchange, .broken("the back end sent a second head"))
            }

        case .streaming(let exchange, let keepAlive, let source):
            switch part {
            case .body(let chunk):
                if source.yield(chunk) == .stopProducing {
                    readingPaused = true
                    exchange.pauseClock()
                }
            case .end:
                source.finish()
                callEnded(exchange, keepAlive: keepAlive)
            case .head:
                fail(exchange, .broken("the back end sent a second head"))
            }

        case .idle:
            // Nothing is asked of an idle connection; whatever comes is not an answer to trust.
            close()

        case .closed:
            break
        }
    }

    /// Small answers are read whole; so are those that cannot have a body.
    private static func readsWhole(_ head: HTTPResponseHead, method: HTTPMethod) -> Bool {
        if method == .HEAD || head.status == .noContent || head.status == .notModified { return true }
        let lengths = head.headers["content-length"]
        guard lengths.count == 1, let length = Int(lengths[0]) else { return false }
        return length <= wholeBodyLimit
    }

    private func callEnded(_ exchange: UpstreamExchange, keepAlive: Bool) {
        exchange.finish(failing: .broken("the call has ended"))
        guard keepAlive, requestSent, let context, let pool else { return close() }
        state = .idle
        readingPaused = false
        if readPending {
            readPending = false
            context.read()
        }
        pool.release(self)
    }

    // MARK: Backpressure from the device's side

    func read(context: ChannelHandlerContext) {
        if readingPaused {
            readPending = true
        } else {
            context.read()
        }
    }

    func consumerWantsMore(of exchange: UpstreamExchange) {
        guard case .streaming(let current, _, _) = state, current === exchange else { return }
        readingPaused = false
        exchange.resumeClock()
        if readPending, let context {
            readPending = false
            context.read()
        }
    }

    func consumerLeft(_ exchange: UpstreamExchange) {
        guard case .streaming(let current, _, _) = state, current === exchange else { return }
        fail(exchange, .broken("the device's side stopped reading"))
    }

    // MARK: Failures

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failCurrent(.broken(String(describing: error)))
    }

    func channelInactive(context: ChannelHandlerContext) {
        failCurrent(.broken("the back end closed the connection"))
        state = .closed
        pool?.forget(self)
        context.fireChannelInactive()
    }

    private func failCurrent(_ failure: UpstreamFailure) {
        switch state {
        case .awaitingHead(let exchange), .collecting(let exchange, _, _), .streaming(let exchange, _, _):
            fail(exchange, failure)
        case .idle:
            close()
        case .closed:
            break
        }
    }

    /// Fails `exchange` if it is this connection's current call, and closes the connection.
    /// A call without a body that failed on a reused connection before any answer is sent
    /// again, once, on a new connection: the back end may have closed an idle connection just
    /// as it was taken from the pool.
    func fail(_ exchange: UpstreamExchange, _ failure: UpstreamFailure) {
        switch state {
        case .awaitingHead(let current) where current === exchange:
            state = .closed
            close()
            if case .broken = failure, !answerBegan, calls > 1, !exchange.hasBody, !exchange.retried {
                exchange.retried = true
                exchange.connection = nil
                sendElsewhere(exchange)
            } else {
                exchange.finish(failing: failure)
            }
        case .collecting(let current, _, _) where current === exchange:
            state = .closed
            close()
            exchange.finish(failing: failure)
        case .streaming(let current, _, let source) where current === exchange:
            state = .closed
            close()
            source.finish(failure)
            exchange.finish(failing: failure)
        default:
            break
        }
    }

    /// Hands `exchange` back to the pool for a new connection; fails it when the pool is gone.
    private func sendElsewhere(_ exchange: UpstreamExchange) {
        guard let pool else { return exchange.finish(failing: .shutDown) }
        pool.retry(exchange)
    }

    /// Closes the connection (an idle one, or one whose call failed).
    func close() {
        state = .closed
        context?.close(promise: nil)
    }
}
