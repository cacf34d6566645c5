import NIOCore
import NIOHTTP1

/// Where a connection reports to: its pool (``UpstreamLoopPool``). Tests put a stand-in here.
protocol UpstreamConnectionOwner: AnyObject {
    /// The connection's call ended cleanly and it can carry another.
    func release(_ handler: UpstreamChannelHandler)
    /// The connection closed.
    func forget(_ handler: UpstreamChannelHandler)
    /// The call is to go again on a new connection (this one had gone stale).
    func retry(_ exchange: UpstreamExchange)
}

/// The last handler of a pooled back-end connection (after NIO's HTTP/1 client codecs): runs
/// one call at a time from request head to the end of the answer, then goes back to its pool
/// when the connection can be used again. Confined to the connection's event loop.
///
/// Every decision is ``UpstreamConnectionStateMachine``'s (states and transitions are described
/// there); this handler feeds it the pipeline's events and performs the actions it returns.
///
/// The handler holds its pool weakly: the pool may go first (released, or shut down while this
/// connection carries a call or is still closing). A connection whose pool is gone finishes its
/// call and closes; it never reaches the pool.
final class UpstreamChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    /// Answers announced up to this size are read whole and handed over in one piece.
    static let wholeBodyLimit = UpstreamConnectionStateMachine.wholeBodyLimit

    let origin: UpstreamOrigin
    private weak var pool: (any UpstreamConnectionOwner)?
    private(set) var stateMachine = UpstreamConnectionStateMachine()
    private var context: ChannelHandlerContext?
    /// When the connection last went back to the pool.
    var idleSince = NIODeadline.now()

    init(origin: UpstreamOrigin, pool: any UpstreamConnectionOwner) {
        self.origin = origin
        self.pool = pool
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Sends `exchange`'s request head (and its end, when it has no body).
    func start(_ exchange: UpstreamExchange) {
        guard context != nil else { return sendElsewhere(exchange) }
        perform(stateMachine.start(exchange))
    }

    // MARK: The request body, written by the caller through the channel

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { stateMachine.requestEndWritten() }
        context.write(data, promise: promise)
    }

    // MARK: The answer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(stateMachine.received(unwrapInboundIn(data)))
    }

    // MARK: Backpressure from the device's side

    func read(context: ChannelHandlerContext) {
        perform(stateMachine.read())
    }

    func consumerWantsMore(of exchange: UpstreamExchange) {
        perform(stateMachine.bodyConsumerWantsMore(exchange))
    }

    func consumerLeft(_ exchange: UpstreamExchange) {
        perform(stateMachine.fail(exchange, .broken("the device's side stopped reading")))
    }

    // MARK: Failures

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        perform(stateMachine.connectionBroke(.broken(String(describing: error))))
    }

    func channelInactive(context: ChannelHandlerContext) {
        perform(stateMachine.connectionBroke(.broken("the back end closed the connection")))
        pool?.forget(self)
        context.fireChannelInactive()
    }

    /// Fails `exchange` if it is this connection's current call, and closes the connection
    /// (the call's timer ran out). A call that may go again does (see the state machine).
    func fail(_ exchange: UpstreamExchange, _ failure: UpstreamFailure) {
        perform(stateMachine.fail(exchange, failure))
    }

    /// Closes the connection (an idle one, from the pool), failing its call if it has one.
    func close() {
        perform(stateMachine.close())
    }

    // MARK: Actions

    private func perform(_ action: UpstreamConnectionStateMachine.Action) {
        switch action {
        case .none:
            break
        case .sendRequest(let exchange, let end):
            guard let context else { return }
            exchange.connection = self
            context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
            if end { context.write(wrapOutboundOut(.end(nil)), promise: nil) }
            context.flush()
            exchange.didConnect(context.channel)
        case .sendElsewhere(let exchange):
            sendElsewhere(exchange)
        case .answerStreamed(let exchange, let head):
            let (body, source) = UpstreamBody.make(handler: self, exchange: exchange, loop: exchange.loop)
            exchange.bodySource = source
            exchange.succeed(UpstreamAnswer(head: head, body: .stream(body)))
        case .forwardBodyPart(let exchange, let part):
            if exchange.yieldBodyPart(part) == .stopProducing {
                perform(stateMachine.bodyStreamFull(exchange))
            }
        case .answerWhole(let exchange, let head, let body, let then):
            exchange.succeed(UpstreamAnswer(head: head, body: .whole(body)))
            exchange.finish(failing: .broken("the call has ended"))
            afterCall(then)
        case .finishStream(let exchange, let then):
            exchange.finishBody()
            exchange.finish(failing: .broken("the call has ended"))
            afterCall(then)
        case .pauseClock(let exchange):
            exchange.pauseClock()
        case .resume(let exchange, let read):
            exchange.resumeClock()
            if read { context?.read() }
        case .read:
            context?.read()
        case .closeAndFail(let exchange, let failure):
            context?.close(promise: nil)
            exchange.finish(failing: failure)
        case .closeAndRetry(let exchange):
            context?.close(promise: nil)
            exchange.retried = true
            exchange.connection = nil
            sendElsewhere(exchange)
        case .close:
            context?.close(promise: nil)
        }
    }

    /// Back to the pool, or closed (also when the pool is gone).
    private func afterCall(_ then: UpstreamConnectionStateMachine.AfterCall) {
        switch then {
        case .pool(let read):
            guard let context, let pool else { return close() }
            if read { context.read() }
            pool.release(self)
        case .close:
            context?.close(promise: nil)
        }
    }

    /// Hands `exchange` back to the pool for a new connection; fails it when the pool is gone.
    private func sendElsewhere(_ exchange: UpstreamExchange) {
        guard let pool else { return exchange.finish(failing: .shutDown) }
        pool.retry(exchange)
    }
}
