import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Whose turn it is on one device connection, and what waits for the next turn
/// (docs/architecture.md, "The request path"): the decisions of ``ProxyChannelHandler`` as a
/// value with no I/O, as `Forwarding`'s `UpstreamConnectionStateMachine` is for a back-end
/// connection. Each method takes what happened and says what the handler must do.
///
/// One request at a time, in order, whoever answers it (the proxy here, or Hummingbird's loop):
/// what arrives while a request is answered (HTTP/1.1 pipelining, a parse error, the end of the
/// input) waits until that answer has ended; reading pauses only while something waits.
struct DeviceConnectionStateMachine {
    /// Whose answer the connection waits for.
    enum Turn: Equatable {
        /// No request under way.
        case idle
        /// Hummingbird answers the request under way; its parts go on to Hummingbird until its
        /// end. `close`: Hummingbird ends the connection after this answer.
        case hummingbird(requestEnded: Bool, answerEnded: Bool, close: Bool)
        /// The proxy answers the request under way here; `close`: the connection ends after it.
        case proxy(requestEnded: Bool, answerEnded: Bool, close: Bool)
        /// The connection ends: an answer to a `Connection: close` request was given, or
        /// Hummingbird was handed an error or the end of the input, which end its loop. Nothing
        /// more is answered: request parts are dropped, reads pass (so the end of the input is
        /// seen), errors and the end of the input go on to Hummingbird.
        case closing
    }

    /// What comes in from the connection.
    enum Event {
        case part(HTTPRequestPart)
        case error(any Error)
        case inputClosed
    }

    /// What the handler does with an event.
    enum InboundAction {
        /// Nothing now: the event was dropped, or waits for a later turn.
        case none
        /// Hand the event on to Hummingbird.
        case handOn(Event)
        /// Hand the event on to Hummingbird, whose loop it ends; `read`: pass on the read held
        /// back, so that the end of the input is seen.
        case handOnAndEnd(Event, read: Bool)
        /// Answer this request here (it has no body).
        case answer(HTTPRequest)
        /// The request under way ended while its answer had ended already: take what waits
        /// (``nextWaiting()``).
        case nextTurn
    }

    /// What the handler does once an answer has been written whole.
    enum AnswerEndAction {
        /// Not the turn of the one who answered: nothing.
        case none
        /// The connection stays open; `nextTurn`: the request had ended too, so take what
        /// waits (``nextWaiting()``).
        case keepOpen(nextTurn: Bool)
        /// The connection ends after this answer; `read`: pass on the read held back.
        case close(read: Bool)
    }

    private(set) var turn = Turn.idle
    private var waiting = CircularBuffer<Event>()
    /// A `read` held back while something waits.
    private var readHeld = false
    /// Whether a request head is answered here (a proxy call without a body) rather than by
    /// Hummingbird, and whether it asks to close the connection after its answer.
    private let classify: (HTTPRequest) -> (answeredHere: Bool, close: Bool)

    init(classify: @escaping (HTTPRequest) -> (answeredHere: Bool, close: Bool)) {
        self.classify = classify
    }

    // MARK: Inbound

    /// An event read from the connection.
    mutating func inbound(_ event: Event) -> InboundAction {
        if turn == .closing {
            if case .part = event { return .none }
            return .handOn(event)
        }
        guard waiting.isEmpty, takesInbound else {
            waiting.append(event)
            return .none
        }
        return receive(event)
    }

    /// Whether to pass a `read` on now; otherwise it is held until nothing waits.
    mutating func read() -> Bool {
        guard waiting.isEmpty || turn == .closing else {
            readHeld = true
            return false
        }
        return true
    }

    /// After an answer ended: the next event that waited, while a request can take it (nil
    /// when none can); each goes through ``receive(_:)`` as if it came now.
    mutating func nextWaiting() -> Event? {
        switch turn {
        case .proxy(true, true, _), .hummingbird(true, true, _): turn = .idle
        default: break
        }
        guard takesInbound else { return nil }
        return waiting.popFirst()
    }

    /// After the waiting events were taken: whether to pass on the read held back (nothing
    /// waits any more).
    mutating func releaseHeldRead() -> Bool {
        guard waiting.isEmpty, readHeld else { return false }
        readHeld = false
        return true
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

    /// An event in its turn.
    mutating func receive(_ event: Event) -> InboundAction {
        switch event {
        case .part(let part): return receive(part)
        case .error, .inputClosed:
            if case .proxy(false, let answerEnded, let close) = turn {
                // The request cannot go on (it has no body, so this is the connection's next
                // bytes): Hummingbird is handed it once this answer has ended.
                turn = .proxy(requestEnded: true, answerEnded: answerEnded, close: close)
                waiting.append(event)
                return answerEnded ? .nextTurn : .none
            }
            // Hummingbird ends its loop on an error (a parse error is answered 400 first) and on
            // the end of the input.
            return .handOnAndEnd(event, read: endTurns())
        }
    }

    private mutating func receive(_ part: HTTPRequestPart) -> InboundAction {
        switch turn {
        case .idle:
            // The decoder begins every request with its head; anything else is Hummingbird's to refuse.
            guard case .head(let head) = part else { return .handOn(.part(part)) }
            let (answeredHere, close) = classify(head)
            guard answeredHere else {
                turn = .hummingbird(requestEnded: false, answerEnded: false, close: close)
                return .handOn(.part(part))
            }
            turn = .proxy(requestEnded: false, answerEnded: false, close: close)
            return .answer(head)
        case .hummingbird(_, let answerEnded, let close):
            // (An answer with `close` ended the turn already: see `answerEnded(byHummingbird:)`.)
            if case .end = part { turn = answerEnded ? .idle : .hummingbird(requestEnded: true, answerEnded: false, close: close) }
            return .handOn(.part(part))
        case .proxy(_, let answerEnded, let close):
            // A call answered here has no body: only its end comes.
            if case .end = part { turn = answerEnded ? .idle : .proxy(requestEnded: true, answerEnded: false, close: close) }
            return .none
        case .closing:
            return .none
        }
    }

    // MARK: Answers

    /// Hummingbird wrote the end of an answer.
    mutating func hummingbirdAnswerEnded() -> AnswerEndAction {
        guard case .hummingbird(let requestEnded, false, let close) = turn else { return .none }
        // After a `Connection: close` request Hummingbird's loop stops and closes its side.
        if close { return .close(read: endTurns()) }
        turn = .hummingbird(requestEnded: requestEnded, answerEnded: true, close: false)
        return .keepOpen(nextTurn: requestEnded)
    }

    /// The proxy's answer is to be ended here: `.none` when it is not the proxy's turn (the
    /// connection closed under it), so nothing is written.
    mutating func proxyAnswerEnded() -> AnswerEndAction {
        guard case .proxy(let requestEnded, false, let close) = turn else { return .none }
        if close { return .close(read: endTurns()) }
        turn = .proxy(requestEnded: requestEnded, answerEnded: true, close: false)
        return .keepOpen(nextTurn: requestEnded)
    }

    /// The connection ends (`Turn.closing`): what waits is dropped. Returns whether a held read
    /// is to be passed on, so that the end of the input is seen.
    private mutating func endTurns() -> Bool {
        turn = .closing
        waiting.removeAll()
        defer { readHeld = false }
        return readHeld
    }
}
