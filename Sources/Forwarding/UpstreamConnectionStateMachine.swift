import NIOCore
import NIOHTTP1

/// What a pooled back-end connection is doing, and what to do next: the decisions of
/// ``UpstreamChannelHandler``, without its I/O. Every event is a `mutating` method that moves
/// the state and returns the ``Action`` the handler performs (write, read, answer or fail the
/// call, go back to the pool, close). Confined to the connection's event loop, like its handler.
///
/// ```
///  fresh ─┐                            ┌─▶ collecting ──end──┐
///         ├─start─▶ awaitingHead ─head─┤                     ├─▶ idle (keep-alive, request sent)
///  idle ──┘                            └─▶ streaming ───end──┘   or closed
///                                          (flowing ⇄ paused)
///  any ──error, close, timeout, device gone, unexpected part──▶ closed
/// ```
///
/// A call on a connection that carried one before (`idle`, not `fresh`) that breaks before any
/// of its answer arrives is sent again, once, on a new connection when it has no body: the
/// back end may have closed the idle connection just as it was taken from the pool.
struct UpstreamConnectionStateMachine {
    /// The call a connection carries.
    struct Call {
        let exchange: UpstreamExchange
        /// Whether the request has been sent to its end (the body is written by the caller
        /// after the head, and may still be on its way when the answer arrives).
        var request: Request
        /// Whether the connection carried a call before this one (it came from the pool).
        let onReusedConnection: Bool
    }

    enum Request: Equatable {
        case sending
        case sent
    }

    /// Whether a streamed answer is read from the socket.
    enum Reading: Equatable {
        /// Reads go through.
        case flowing
        /// The device's side has not taken the parts it has: reads are held back (and the
        /// call's clock stops). `readPending`: a read was asked for meanwhile.
        case paused(readPending: Bool)
    }

    enum State {
        /// Connected, never used.
        case fresh
        /// Connected, its last call ended cleanly: in the pool.
        case idle
        /// The request head is out (its body may still be on its way); no answer yet.
        case awaitingHead(Call)
        /// A small answer (announced length at most `wholeBodyLimit`, or none possible), read
        /// whole; `body` is nil until a part arrives.
        case collecting(Call, HTTPResponseHead, body: ByteBuffer?)
        /// A larger answer, streamed to the device as it comes.
        case streaming(Call, keepAlive: Bool, Reading)
        /// Closed or closing: never used again.
        case closed
        /// Only while a method changes the state in place (the collected body is not copied).
        case modifying
    }

    /// What the handler does after an event.
    enum Action {
        /// Nothing.
        case none
        /// Write `exchange`'s request head (and its end when `end`), flush, and hand the channel
        /// to the call for the body.
        case sendRequest(UpstreamExchange, end: Bool)
        /// This connection cannot take the call (busy or closed): the pool finds another.
        case sendElsewhere(UpstreamExchange)
        /// The head of a streamed answer: make the body stream and answer the call with it.
        case answerStreamed(UpstreamExchange, HTTPResponseHead)
        /// A part of the streamed answer: hand it to the call's body stream. If the stream says
        /// to stop producing, tell the machine (`bodyStreamFull`).
        case forwardBodyPart(UpstreamExchange, ByteBuffer)
        /// The whole small answer: answer the call with it and end the call, then `then`.
        case answerWhole(UpstreamExchange, HTTPResponseHead, ByteBuffer, then: AfterCall)
        /// The end of a streamed answer: finish the body stream and end the call, then `then`.
        case finishStream(UpstreamExchange, then: AfterCall)
        /// Stop the call's clock (the device's side holds the stream back).
        case pauseClock(UpstreamExchange)
        /// Restart the call's clock; issue the read that was held back when `read`.
        case resume(UpstreamExchange, read: Bool)
        /// Pass the read on to the socket.
        case read
        /// Close the connection and fail the call (finishing its body stream, if any).
        case closeAndFail(UpstreamExchange, UpstreamFailure)
        /// Close the connection; the call goes again, once, on a new connection.
        case closeAndRetry(UpstreamExchange)
        /// Close the connection (no call on it).
        case close
    }

    /// Where a connection goes once its call ended.
    enum AfterCall: Equatable {
        /// Back to the pool (read first when a read was held back).
        case pool(read: Bool)
        /// Closed: the back end or the request does not allow another call on it.
        case close
    }

    /// Answers announced up to this size are read whole and handed over in one piece.
    static let wholeBodyLimit = 64 * 1024

    private(set) var state = State.fresh

    // MARK: The request

    /// A call is to go on this connection.
    ///
    /// - `fresh`, `idle` → `awaitingHead`; `.sendRequest`, with the end when the call has no body.
    /// - any other → unchanged; `.sendElsewhere` (busy or closed: never two calls at once).
    mutating func start(_ exchange: UpstreamExchange) -> Action {
        let reused: Bool
        switch state {
        case .fresh: reused = false
        case .idle: reused = true
        case .awaitingHead, .collecting, .streaming, .closed: return .sendElsewhere(exchange)
        case .modifying: preconditionFailure("UpstreamConnectionStateMachine: start while modifying")
        }
        state = .awaitingHead(Call(exchange: exchange, request: exchange.hasBody ? .sending : .sent, onReusedConnection: reused))
        return .sendRequest(exchange, end: !exchange.hasBody)
    }

    /// The caller wrote the end of the request body.
    ///
    /// - `awaitingHead`, `collecting`, `streaming` → the same, the request `sent`.
    /// - any other → unchanged (a late write on a connection whose call is over).
    mutating func requestEndWritten() {
        switch state {
        case .awaitingHead(var call):
            call.request = .sent
            state = .awaitingHead(call)
        case .collecting(var call, let head, let body):
            state = .modifying
            call.request = .sent
            state = .collecting(call, head, body: body)
        case .streaming(var call, let keepAlive, let reading):
            call.request = .sent
            state = .streaming(call, keepAlive: keepAlive, reading)
        case .fresh, .idle, .closed:
            break
        case .modifying:
            preconditionFailure("UpstreamConnectionStateMachine: request end while modifying")
        }
    }

    // MARK: The answer

    /// A part of the back end's answer arrived.
    ///
    /// - `awaitingHead` + head → `collecting` (small answer, `.none`) or `streaming(flowing)`
    ///   (`.answerStreamed`); + body or end → `closed`, `.closeAndFail` (an answer without a head).
    /// - `collecting` + body → the part kept, `.none`; + end → `idle` or `closed`,
    ///   `.answerWhole` (then `pool` or `close`); + head → `closed`, `.closeAndFail`.
    /// - `streaming` + body → unchanged, `.forwardBodyPart`; + end → `idle` or `closed`,
    ///   `.finishStream` (then `pool`, reading a held-back read, or `close`); + head → `closed`,
    ///   `.closeAndFail`.
    /// - `fresh`, `idle` → `closed`, `.close`: nothing was asked; what comes is not to be trusted.
    /// - `closed` → `.none`.
    ///
    /// A connection goes back to the pool only when the back end keeps it alive and the request
    /// has been sent to its end; otherwise it closes.
    mutating func received(_ part: HTTPClientResponsePart) -> Action {
        switch state {
        case .awaitingHead(let call):
            guard case .head(let head) = part else {
                state = .closed
                return .closeAndFail(call.exchange, .broken("the back end's answer has no head"))
            }
            if Self.readsWhole(head, method: call.exchange.head.method) {
                state = .collecting(call, head, body: nil)
                return .none
            }
            state = .streaming(call, keepAlive: head.isKeepAlive, .flowing)
            return .answerStreamed(call.exchange, head)

        case .collecting(let call, let head, var body):
            switch part {
            case .body(var chunk):
                state = .modifying  // the buffer grows in place, not as a copy
                if body == nil { body = chunk } else { body!.writeBuffer(&chunk) }
                state = .collecting(call, head, body: body)
                return .none
            case .end:
                let then = callEnded(call, keepAlive: head.isKeepAlive, readPending: false)
                return .answerWhole(call.exchange, head, body ?? ByteBuffer(), then: then)
            case .head:
                state = .closed
                return .closeAndFail(call.exchange, .broken("the back end sent a second head"))
            }

        case .streaming(let call, let keepAlive, let reading):
            switch part {
            case .body(let chunk):
                return .forwardBodyPart(call.exchange, chunk)
            case .end:
                let then = callEnded(call, keepAlive: keepAlive, readPending: reading == .paused(readPending: true))
                return .finishStream(call.exchange, then: then)
            case .head:
                state = .closed
                return .closeAndFail(call.exchange, .broken("the back end sent a second head"))
            }

        case .fresh, .idle:
            state = .closed
            return .close

        case .closed:
            return .none

        case .modifying:
            preconditionFailure("UpstreamConnectionStateMachine: read while modifying")
        }
    }

    /// `idle` when the connection can carry another call, else `closed`.
    private mutating func callEnded(_ call: Call, keepAlive: Bool, readPending: Bool) -> AfterCall {
        guard keepAlive, call.request == .sent else {
            state = .closed
            return .close
        }
        state = .idle
        return .pool(read: readPending)
    }

    /// Small answers are read whole; so are those that cannot have a body.
    static func readsWhole(_ head: HTTPResponseHead, method: HTTPMethod) -> Bool {
        if method == .HEAD || head.status == .noContent || head.status == .notModified { return true }
        let lengths = head.headers["content-length"]
        guard lengths.count == 1, let length = Int(lengths[0]) else { return false }
        return length <= wholeBodyLimit
    }

    // MARK: Backpressure from the device's side

    /// The body stream of `exchange` said to stop producing (its buffer is full).
    ///
    /// - `streaming(flowing)` of that call → `streaming(paused)`, `.pauseClock`.
    /// - any other → unchanged, `.none` (already paused, or the call is over).
    mutating func bodyStreamFull(_ exchange: UpstreamExchange) -> Action {
        guard case .streaming(let call, let keepAlive, .flowing) = state, call.exchange === exchange else { return .none }
        state = .streaming(call, keepAlive: keepAlive, .paused(readPending: false))
        return .pauseClock(exchange)
    }

    /// The device's side of `exchange` wants more of the streamed answer.
    ///
    /// - `streaming(paused)` of that call → `streaming(flowing)`, `.resume` (reading when a read
    ///   was held back).
    /// - any other → unchanged, `.none` (not paused, or the call is over).
    mutating func bodyConsumerWantsMore(_ exchange: UpstreamExchange) -> Action {
        guard case .streaming(let call, let keepAlive, .paused(let readPending)) = state, call.exchange === exchange else { return .none }
        state = .streaming(call, keepAlive: keepAlive, .flowing)
        return .resume(exchange, read: readPending)
    }

    /// The pipeline asks to read from the socket.
    ///
    /// - `streaming(paused)` → `streaming(paused, read pending)`, `.none`: the read waits for
    ///   the device's side (or for the end of the call).
    /// - any other → unchanged, `.read`.
    mutating func read() -> Action {
        guard case .streaming(let call, let keepAlive, .paused) = state else { return .read }
        state = .streaming(call, keepAlive: keepAlive, .paused(readPending: true))
        return .none
    }

    // MARK: Failures

    /// `exchange` failed: its deadline passed, or the device's side stopped reading its stream.
    ///
    /// - `awaitingHead` of that call → `closed`; `.closeAndRetry` when the failure is a broken
    ///   connection, the connection was reused and the call has no body and was not sent
    ///   again before; else `.closeAndFail`.
    /// - `collecting`, `streaming` of that call → `closed`, `.closeAndFail`.
    /// - any other (another call, or none) → unchanged, `.none`.
    mutating func fail(_ exchange: UpstreamExchange, _ failure: UpstreamFailure) -> Action {
        switch state {
        case .awaitingHead(let call) where call.exchange === exchange:
            state = .closed
            if case .broken = failure, call.onReusedConnection, !exchange.hasBody, !exchange.retried {
                return .closeAndRetry(exchange)
            }
            return .closeAndFail(exchange, failure)
        case .collecting(let call, _, _) where call.exchange === exchange, .streaming(let call, _, _) where call.exchange === exchange:
            state = .closed
            return .closeAndFail(exchange, failure)
        case .fresh, .idle, .awaitingHead, .collecting, .streaming, .closed:
            return .none
        case .modifying:
            preconditionFailure("UpstreamConnectionStateMachine: fail while modifying")
        }
    }

    /// The connection broke (an error in the pipeline, or the back end closed it).
    ///
    /// - `awaitingHead`, `collecting`, `streaming` → as `fail(_:_:)` with their call.
    /// - `fresh`, `idle` → `closed`, `.close`.
    /// - `closed` → `.none`.
    mutating func connectionBroke(_ failure: UpstreamFailure) -> Action {
        switch state {
        case .awaitingHead(let call), .collecting(let call, _, _), .streaming(let call, _, _):
            return fail(call.exchange, failure)
        case .fresh, .idle:
            state = .closed
            return .close
        case .closed:
            return .none
        case .modifying:
            preconditionFailure("UpstreamConnectionStateMachine: error while modifying")
        }
    }

    /// Midtier closes the connection (the pool keeps no more of it, or its pool is gone).
    ///
    /// - `awaitingHead`, `collecting`, `streaming` → `closed`, `.closeAndFail` with its call.
    /// - `fresh`, `idle` → `closed`, `.close`.
    /// - `closed` → `.none`.
    mutating func close() -> Action {
        switch state {
        case .awaitingHead(let call), .collecting(let call, _, _), .streaming(let call, _, _):
            state = .closed
            return .closeAndFail(call.exchange, .broken("the connection was closed"))
        case .fresh, .idle:
            state = .closed
            return .close
        case .closed:
            return .none
        case .modifying:
            preconditionFailure("UpstreamConnectionStateMachine: close while modifying")
        }
    }
}
