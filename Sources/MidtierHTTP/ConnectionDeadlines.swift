package import MidtierCore
package import NIOCore

/// What one connection waits for and by when (docs/operations.md, "Slow and idle clients"):
/// the events of ``ConnectionGuard`` in, the deadline of the limit that applies now out. No
/// clock of its own: every event brings the time.
///
/// - Before the first request: its head must be complete `requestHeadSeconds` after the
///   connection opened.
/// - After an answer, on a kept-alive connection: the next request's first bytes must come
///   within `idleSeconds` of it, and its head must be complete `requestHeadSeconds` after them.
/// - While a request body is read: bytes must come within `requestBodySeconds` whenever Midtier
///   waits for them. While Midtier does not read (a back end that takes the body slowly holds
///   it back), nothing is counted against the client.
/// - While Midtier answers (a slow back end, a download the device reads slowly): no limit; the
///   destination's `timeout` is for back ends.
/// - After an early answer (a 401 or 413 sent before the request's body was all read): the
///   rest of the body must come within `requestBodySeconds` of the answer in all — progress
///   does not extend it — and be at most ``drainLimit`` bytes; else the connection closes. A
///   trickled body cannot hold a connection that has nothing more to say.
package struct ConnectionDeadlines {
    /// The limits a connection can be closed by, named by their configuration keys.
    package enum Limit: String, Sendable {
        case requestHead = "requestHeadTimeoutSeconds"
        case idle = "idleTimeoutSeconds"
        case requestBody = "requestBodyTimeoutSeconds"
    }

    let requestHead: TimeAmount
    let idle: TimeAmount
    let requestBody: TimeAmount

    /// A request head has been read and its end not yet.
    private var readingBody = false
    /// Heads read whose answers are not completely sent yet.
    private var answersOwed = 0
    /// Whether an answer has been sent on this connection (it is kept alive).
    private var answered = false
    /// When the current wait for a request began: the opening, or the end of the last exchange.
    private var waitingSince: NIODeadline
    /// When the next request's first bytes came, during that wait.
    private var headStarted: NIODeadline?
    /// Since when Midtier has asked for bytes that have not come yet; nil when it is not reading.
    private var readingSince: NIODeadline?
    /// When the answer to a request whose body was still coming was sent; nil otherwise.
    private var answeredEarlyAt: NIODeadline?
    /// Body bytes read since that early answer.
    private var drained = 0

    /// The most body bytes read after an early answer before the connection is closed.
    package static let drainLimit = 1 << 20

    package init(_ limits: ConnectionLimits, openedAt now: NIODeadline) {
        requestHead = .seconds(Int64(limits.requestHeadSeconds))
        idle = .seconds(Int64(limits.idleSeconds))
        requestBody = .seconds(Int64(limits.requestBodySeconds))
        waitingSince = now
    }

    /// The limit that applies now and when it runs out; nil while none does.
    package var deadline: (at: NIODeadline, limit: Limit)? {
        if readingBody, let answeredEarlyAt {
            return (answeredEarlyAt + requestBody, .requestBody)
        }
        if readingBody {
            return readingSince.map { ($0 + requestBody, .requestBody) }
        }
        if answersOwed > 0 { return nil }
        if !answered { return (waitingSince + requestHead, .requestHead) }
        if let headStarted { return (headStarted + requestHead, .requestHead) }
        return (waitingSince + idle, .idle)
    }

    /// Midtier asks for more bytes (a `read` on its way to the socket).
    package mutating func readRequested(at now: NIODeadline) {
        if readingSince == nil { readingSince = now }
    }

    /// Bytes came from the client (the end of a socket read, whether or not they completed a part).
    package mutating func bytesArrived(at now: NIODeadline) {
        readingSince = nil
        if !readingBody, answersOwed == 0, answered, headStarted == nil { headStarted = now }
    }

    /// A request head is complete.
    package mutating func headRead() {
        readingBody = true
        answersOwed += 1
        headStarted = nil
    }

    /// Body bytes of the current request were read. False when, after an early answer, more
    /// than ``drainLimit`` have come: close the connection.
    package mutating func bodyRead(_ count: Int) -> Bool {
        guard answeredEarlyAt != nil else { return true }
        drained += count
        return drained <= Self.drainLimit
    }

    /// A request's body (if any) is complete.
    package mutating func endRead(at now: NIODeadline) {
        readingBody = false
        answeredEarlyAt = nil
        drained = 0
        if answersOwed == 0 { waitingSince = now }
    }

    /// An answer has been handed whole to the operating system.
    package mutating func answerSent(at now: NIODeadline) {
        answersOwed = max(0, answersOwed - 1)
        answered = true
        if readingBody, answeredEarlyAt == nil { answeredEarlyAt = now }
        if answersOwed == 0, !readingBody {
            waitingSince = now
            headStarted = nil
        }
    }
}
