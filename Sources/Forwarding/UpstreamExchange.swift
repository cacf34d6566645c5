package import NIOCore
package import NIOHTTP1

/// How a call to a back end failed, as the forwarding connections see it.
enum UpstreamFailure: Error, Sendable {
    /// The destination's `timeout` passed before the answer (or, streamed, its next part).
    case timedOut
    /// No connection could be made, or it broke before the answer was complete.
    case broken(String)

    /// A call started (or to be sent again) after the pool was shut down or released.
    static let shutDown = UpstreamFailure.broken("Midtier's connections to back ends are shut down")
}

/// A back end's answer: the head, and the body read whole (small ones, announced by
/// `Content-Length`) or streamed.
package struct UpstreamAnswer: Sendable {
    package let head: HTTPResponseHead
    package let body: Body

    package enum Body: Sendable {
        case whole(ByteBuffer)
        case stream(UpstreamBody)
    }
}

/// One call to a back end, from the request head to the end of the answer. Confined to the
/// event loop of its connection pool: every method runs there.
///
/// The call owns its deadline timer. It arms at the start and covers connecting, sending and the
/// head; for a body read whole, the whole answer. For a streamed body only the time spent
/// waiting for the back end counts: while the device's side holds the stream back (the
/// device reads slowly), the clock stops (`pauseClock()` / `resumeClock()`).
///
/// A streamed answer's body is fed through the call (`bodySource`): whatever ends the call
/// (its end, a failure, the timer) also ends the body stream, in one place.
///
/// Lifetimes: the timer holds the call until it fires or the call finishes (which cancels it);
/// the call holds its connection weakly, so a timer that fires after the connection is gone
/// still ends the call, and never reaches a connection that no longer exists.
final class UpstreamExchange {
    let head: HTTPRequestHead
    let origin: UpstreamOrigin
    /// Whether the device's request has a body (sent by the caller, part by part).
    let hasBody: Bool
    let answer: EventLoopPromise<UpstreamAnswer>
    /// Completed when the request head is on a connection, with that connection's channel
    /// (for the body); failed with the answer when no connection could be had.
    let connected: EventLoopPromise<any Channel>
    let loop: any EventLoop
    private var deadline: NIODeadline
    private var timer: NIOScheduledCallback?
    /// The connection carrying the call, once there is one: told first when the timer fires
    /// (it closes, a half-sent request or half-read answer being of no further use).
    weak var connection: UpstreamChannelHandler?
    /// Whether a connection taken from the pool already failed this call once (it is then
    /// sent again, once, on a fresh connection).
    var retried = false
    private(set) var isFinished = false
    /// Where a streamed answer's parts go, from its head to its end.
    var bodySource: UpstreamBody.Producer.Source?

    init(head: HTTPRequestHead, origin: UpstreamOrigin, hasBody: Bool, deadline: NIODeadline, loop: any EventLoop) {
        self.head = head
        self.origin = origin
        self.hasBody = hasBody
        self.deadline = deadline
        self.loop = loop
        answer = loop.makePromise()
        connected = loop.makePromise()
    }

    /// Starts the clock; when it runs out, the call fails with `.timedOut` (and its connection,
    /// if it still has one, closes). A loop that is shutting down takes no timer: the call
    /// fails at once.
    func startClock() {
        loop.preconditionInEventLoop()
        do {
            // A scheduled callback rather than a task: no closure, promise or future per call.
            timer = try loop.scheduleCallback(at: deadline, handler: Deadline(exchange: self))
        } catch {
            connection?.fail(self, .shutDown)
            finish(failing: .shutDown)
        }
    }

    /// The call's deadline, as the event loop holds it until it fires or is cancelled.
    /// Scheduled on the call's loop and run there only, as everything of the call is.
    private struct Deadline: NIOScheduledCallbackHandler, @unchecked Sendable {
        let exchange: UpstreamExchange

        func handleScheduledCallback(eventLoop: some EventLoop) {
            exchange.timer = nil
            exchange.connection?.fail(exchange, .timedOut)
            exchange.finish(failing: .timedOut)
        }

        func didCancelScheduledCallback(eventLoop: some EventLoop) {}
    }

    /// Stops the clock, keeping the time left (a streamed answer the device holds back).
    func pauseClock() {
        guard let timer else { return }
        timer.cancel()
        self.timer = nil
        pausedBudget = deadline - .now()
    }

    private var pausedBudget: TimeAmount?

    /// Restarts the clock with the time that was left when it paused.
    func resumeClock() {
        guard timer == nil, let budget = pausedBudget, !isFinished else { return }
        pausedBudget = nil
        deadline = .now() + budget
        startClock()
    }

    /// The connection is found and the request head written to it.
    func didConnect(_ channel: any Channel) {
        guard !isConnected else { return }
        isConnected = true
        connected.succeed(channel)
    }

    private var isConnected = false
    private var isAnswered = false

    /// Succeeds the call with the answer's head and body.
    func succeed(_ answer: UpstreamAnswer) {
        guard !isAnswered else { return }
        isAnswered = true
        self.answer.succeed(answer)
    }

    /// Hands a part of the streamed answer to the device's side; whether to go on reading.
    func yieldBodyPart(_ part: ByteBuffer) -> UpstreamBody.Producer.Source.YieldResult {
        bodySource?.yield(part) ?? .dropped
    }

    /// The streamed answer is complete.
    func finishBody() {
        bodySource?.finish()
        bodySource = nil
    }

    /// Ends the call: the clock stops, and what has not happened yet (a connection, an
    /// answer, the end of a streamed body) fails with `error`.
    func finish(failing error: UpstreamFailure) {
        guard !isFinished else { return }
        isFinished = true
        timer?.cancel()
        timer = nil
        connection = nil
        if let source = bodySource {
            bodySource = nil
            source.finish(error)
        }
        if !isConnected {
            isConnected = true
            connected.fail(error)
        }
        if !isAnswered {
            isAnswered = true
            answer.fail(error)
        }
    }
}

extension UpstreamFailure: CustomStringConvertible {
    var description: String {
        switch self {
        case .timedOut: "no answer within the destination's timeout"
        case .broken(let reason): reason
        }
    }
}
