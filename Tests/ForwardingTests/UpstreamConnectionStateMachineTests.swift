import MidtierTestSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import Forwarding

/// `UpstreamConnectionStateMachine` alone: every transition, no channel. The calls are real
/// `UpstreamExchange`s on an embedded loop (only their promises are used, and every call is
/// finished when the test ends: a promise left unfulfilled stops a debug build).
@Suite struct UpstreamConnectionStateMachineTests {
    typealias Machine = UpstreamConnectionStateMachine

    let loop = EmbeddedEventLoop()
    let made = CallsMade()

    final class CallsMade {
        var all: [UpstreamExchange] = []
        deinit { for call in all { call.finish(failing: .broken("the test is over")) } }
    }

    func call(_ method: HTTPMethod = .GET, hasBody: Bool = false) -> UpstreamExchange {
        let head = HTTPRequestHead(version: .http1_1, method: method, uri: "/x", headers: ["Host": "127.0.0.1"])
        let call = UpstreamExchange(
            head: head, origin: UpstreamOrigin(url: "http://127.0.0.1:1")!, hasBody: hasBody,
            deadline: .now() + .seconds(60), loop: loop)
        made.all.append(call)
        return call
    }

    static func head(_ status: HTTPResponseStatus = .ok, _ headers: [(String, String)]) -> HTTPClientResponsePart {
        .head(HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(headers)))
    }

    static func body(_ text: String) -> HTTPClientResponsePart { .body(ByteBuffer(string: text)) }

    /// A small answer, read whole.
    static let small = head(.ok, [("Content-Length", "5")])
    /// A chunked answer, streamed.
    static let chunked = head(.ok, [("Transfer-Encoding", "chunked")])

    /// A machine whose connection has carried one call (`idle`).
    func reused() -> Machine {
        var machine = Machine()
        _ = machine.start(call())
        _ = machine.received(Self.head(.ok, [("Content-Length", "0")]))
        #expect(machine.received(.end(nil)).name == "answerWhole(200, , then: pool(read: false))")
        #expect(machine.state.name == "idle")
        return machine
    }

    /// Where a connection can be, for the events that apply to every state.
    enum Stage: String, CaseIterable, CustomStringConvertible {
        case fresh, idle, awaitingHeadFresh, awaitingHeadReused, collecting, streaming, paused, closed
        var description: String { rawValue }
    }

    /// A machine in `stage`, carrying `exchange` where the stage has a call.
    func machine(in stage: Stage, carrying exchange: UpstreamExchange) -> Machine {
        var machine: Machine
        switch stage {
        case .fresh:
            return Machine()
        case .idle:
            return reused()
        case .awaitingHeadFresh:
            machine = Machine()
            _ = machine.start(exchange)
        case .awaitingHeadReused:
            machine = reused()
            _ = machine.start(exchange)
        case .collecting:
            machine = reused()
            _ = machine.start(exchange)
            _ = machine.received(Self.small)
        case .streaming, .paused:
            machine = reused()
            _ = machine.start(exchange)
            _ = machine.received(Self.chunked)
            if stage == .paused { _ = machine.bodyStreamFull(exchange) }
        case .closed:
            machine = Machine()
            _ = machine.close()
        }
        return machine
    }

    // MARK: The request

    @Test func aFreshConnectionSendsTheHeadAndTheEndOfACallWithoutABody() {
        var machine = Machine()
        let exchange = call()
        let action = machine.start(exchange)
        #expect(action.name == "sendRequest(end: true)")
        #expect(action.exchange === exchange)
        #expect(machine.state.name == "awaitingHead(sent, fresh)")
    }

    @Test func aCallWithABodySendsTheHeadOnlyAndTheCallerWritesTheRest() {
        var machine = reused()
        #expect(machine.start(call(.POST, hasBody: true)).name == "sendRequest(end: false)")
        #expect(machine.state.name == "awaitingHead(sending, reused)")
        machine.requestEndWritten()
        #expect(machine.state.name == "awaitingHead(sent, reused)")
    }

    @Test(arguments: [Stage.awaitingHeadFresh, .collecting, .streaming, .paused, .closed])
    func aConnectionThatIsBusyOrClosedSendsTheCallElsewhere(_ stage: Stage) {
        var machine = machine(in: stage, carrying: call())
        let before = machine.state.name
        let other = call()
        let action = machine.start(other)
        #expect(action.name == "sendElsewhere")
        #expect(action.exchange === other)
        #expect(machine.state.name == before, "a second call changed the state")
    }

    @Test(arguments: [Stage.fresh, .idle, .closed])
    func theEndOfARequestWithoutACallChangesNothing(_ stage: Stage) {
        var machine = machine(in: stage, carrying: call())
        let before = machine.state.name
        machine.requestEndWritten()
        #expect(machine.state.name == before)
    }

    // MARK: Answers read whole

    @Test func aSmallAnswerIsCollectedAndTheConnectionGoesBackToThePool() {
        var machine = Machine()
        let exchange = call()
        _ = machine.start(exchange)
        #expect(machine.received(Self.small).name == "none")
        #expect(machine.state.name == "collecting")
        #expect(machine.received(Self.body("hel")).name == "none")
        #expect(machine.received(Self.body("lo")).name == "none")
        let end = machine.received(.end(nil))
        #expect(end.name == "answerWhole(200, hello, then: pool(read: false))")
        #expect(end.exchange === exchange)
        #expect(machine.state.name == "idle")
        // The next call on it is on a reused connection.
        _ = machine.start(call())
        #expect(machine.state.name == "awaitingHead(sent, reused)")
    }

    @Test(arguments: [
        (HTTPMethod.HEAD, HTTPResponseStatus.ok, [("Content-Length", "5000")]),
        (.GET, .noContent, []),
        (.GET, .notModified, [("Transfer-Encoding", "chunked")]),
        (.GET, .ok, [("Content-Length", String(UpstreamConnectionStateMachine.wholeBodyLimit))]),
    ])
    func answersThatAreSmallOrCannotHaveABodyAreReadWhole(_ method: HTTPMethod, _ status: HTTPResponseStatus, _ headers: [(String, String)]) {
        var machine = Machine()
        _ = machine.start(call(method))
        #expect(machine.received(Self.head(status, headers)).name == "none")
        #expect(machine.state.name == "collecting")
    }

    @Test(arguments: [
        [("Content-Length", String(UpstreamConnectionStateMachine.wholeBodyLimit + 1))],
        [("Transfer-Encoding", "chunked")],
        [],
        [("Content-Length", "5"), ("Content-Length", "5")],
    ])
    func largeOrUnannouncedAnswersAreStreamed(_ headers: [(String, String)]) {
        var machine = Machine()
        let exchange = call()
        _ = machine.start(exchange)
        let action = machine.received(Self.head(.ok, headers))
        #expect(action.name == "answerStreamed(200)")
        #expect(action.exchange === exchange)
        #expect(machine.state.name == "streaming")
    }

    @Test func aConnectionTheBackEndClosesAfterTheAnswerIsNotPooled() {
        var machine = Machine()
        _ = machine.start(call())
        _ = machine.received(Self.head(.ok, [("Content-Length", "2"), ("Connection", "close")]))
        _ = machine.received(Self.body("ok"))
        #expect(machine.received(.end(nil)).name == "answerWhole(200, ok, then: close)")
        #expect(machine.state.name == "closed")
    }

    @Test func anAnswerThatArrivesBeforeTheRequestBodyEndedClosesTheConnection() {
        var machine = Machine()
        _ = machine.start(call(.POST, hasBody: true))
        _ = machine.received(Self.head(.ok, [("Content-Length", "0")]))
        #expect(machine.received(.end(nil)).name == "answerWhole(200, , then: close)", "half a request body is still to come")
        #expect(machine.state.name == "closed")
    }

    @Test func aRequestBodyThatEndsWhileTheAnswerIsReadLetsTheConnectionBePooled() {
        var machine = Machine()
        _ = machine.start(call(.POST, hasBody: true))
        _ = machine.received(Self.small)
        machine.requestEndWritten()
        _ = machine.received(Self.body("hello"))
        #expect(machine.received(.end(nil)).name == "answerWhole(200, hello, then: pool(read: false))")
    }

    // MARK: Streamed answers and back-pressure

    @Test func aStreamedAnswerIsForwardedPartByPartAndTheConnectionGoesBackToThePool() {
        var machine = Machine()
        let exchange = call()
        _ = machine.start(exchange)
        _ = machine.received(Self.chunked)
        let part = machine.received(Self.body("one"))
        #expect(part.name == "forwardBodyPart(one)")
        #expect(part.exchange === exchange)
        #expect(machine.received(Self.body("two")).name == "forwardBodyPart(two)")
        #expect(machine.read().name == "read", "reads go through while the device's side keeps up")
        #expect(machine.received(.end(nil)).name == "finishStream(then: pool(read: false))")
        #expect(machine.state.name == "idle")
    }

    @Test func aRequestBodyThatEndsWhileTheAnswerStreamsLetsTheConnectionBePooled() {
        var machine = Machine()
        _ = machine.start(call(.PUT, hasBody: true))
        _ = machine.received(Self.chunked)
        #expect(machine.received(Self.body("one")).name == "forwardBodyPart(one)")
        machine.requestEndWritten()
        #expect(machine.received(.end(nil)).name == "finishStream(then: pool(read: false))")
    }

    @Test func aStreamTheDeviceHoldsBackHoldsTheReadsBackAndStopsTheClock() {
        var machine = Machine()
        let exchange = call()
        _ = machine.start(exchange)
        _ = machine.received(Self.chunked)
        // The stream's buffer is full.
        let pause = machine.bodyStreamFull(exchange)
        #expect(pause.name == "pauseClock")
        #expect(pause.exchange === exchange)
        #expect(machine.state.name == "paused")
        #expect(machine.bodyStreamFull(exchange).name == "none", "paused once")
        // Reads wait; parts already read still go to the stream.
        #expect(machine.read().name == "none")
        #expect(machine.state.name == "paused, read pending")
        #expect(machine.read().name == "none")
        #expect(machine.received(Self.body("more")).name == "forwardBodyPart(more)")
        // The device's side takes the parts: the held-back read goes out, the clock runs again.
        let resume = machine.bodyConsumerWantsMore(exchange)
        #expect(resume.name == "resume(read: true)")
        #expect(resume.exchange === exchange)
        #expect(machine.state.name == "streaming")
        #expect(machine.bodyConsumerWantsMore(exchange).name == "none", "not paused")
        #expect(machine.read().name == "read")
        // Paused again without a read asked for: nothing to read when it resumes.
        _ = machine.bodyStreamFull(exchange)
        #expect(machine.bodyConsumerWantsMore(exchange).name == "resume(read: false)")
    }

    @Test func aStreamThatEndsWhilePausedReadsOnceBackInThePool() {
        var machine = Machine()
        let exchange = call()
        _ = machine.start(exchange)
        _ = machine.received(Self.chunked)
        _ = machine.bodyStreamFull(exchange)
        _ = machine.read()
        #expect(machine.received(.end(nil)).name == "finishStream(then: pool(read: true))")
        #expect(machine.state.name == "idle")
        #expect(machine.read().name == "read")
    }

    @Test func newsAboutAnotherCallsStreamChangesNothing() {
        var machine = Machine()
        let exchange = call(), earlier = call()
        _ = machine.start(exchange)
        _ = machine.received(Self.chunked)
        #expect(machine.bodyStreamFull(earlier).name == "none")
        #expect(machine.state.name == "streaming")
        _ = machine.bodyStreamFull(exchange)
        #expect(machine.bodyConsumerWantsMore(earlier).name == "none")
        #expect(machine.fail(earlier, .broken("the device's side stopped reading")).name == "none")
        #expect(machine.state.name == "paused")
    }

    // MARK: Failures and timeouts

    @Test(arguments: Stage.allCases)
    func aTimeoutFailsTheCallAndClosesItsConnection(_ stage: Stage) {
        let exchange = call()
        var machine = machine(in: stage, carrying: exchange)
        let action = machine.fail(exchange, .timedOut)
        switch stage {
        case .fresh, .idle, .closed:
            #expect(action.name == "none", "a timeout for a call the connection does not carry")
        case .awaitingHeadFresh, .awaitingHeadReused, .collecting, .streaming, .paused:
            #expect(action.name == "closeAndFail(timedOut)", "a call that timed out is never sent again")
            #expect(action.exchange === exchange)
            #expect(machine.state.name == "closed")
        }
    }

    @Test(arguments: Stage.allCases)
    func aConnectionThatBreaksFailsItsCallOrRetriesItOnceWhenItWasStale(_ stage: Stage) {
        let exchange = call()
        var machine = machine(in: stage, carrying: exchange)
        let action = machine.connectionBroke(.broken("the back end closed the connection"))
        switch stage {
        case .fresh, .idle:
            #expect(action.name == "close")
        case .closed:
            #expect(action.name == "none")
        case .awaitingHeadReused:
            // A pooled connection the back end had dropped: nothing of the answer came.
            #expect(action.name == "closeAndRetry")
            #expect(action.exchange === exchange)
        case .awaitingHeadFresh, .collecting, .streaming, .paused:
            // A new connection is not stale; once the answer began, it cannot be asked again.
            #expect(action.name == "closeAndFail(broken)")
            #expect(action.exchange === exchange)
        }
        #expect(machine.state.name == "closed")
    }

    @Test func aCallIsNotSentTwiceWhenItHasABodyOrWasSentAgainBefore() {
        var withBody = reused()
        _ = withBody.start(call(.POST, hasBody: true))
        #expect(withBody.connectionBroke(.broken("reset")).name == "closeAndFail(broken)")

        let retried = call()
        retried.retried = true
        var again = reused()
        _ = again.start(retried)
        #expect(again.connectionBroke(.broken("reset")).name == "closeAndFail(broken)")
    }

    @Test(arguments: Stage.allCases)
    func closingAConnectionFailsTheCallItCarries(_ stage: Stage) {
        let exchange = call()
        var machine = machine(in: stage, carrying: exchange)
        let action = machine.close()
        switch stage {
        case .fresh, .idle:
            #expect(action.name == "close")
        case .closed:
            #expect(action.name == "none", "closed once")
        case .awaitingHeadFresh, .awaitingHeadReused, .collecting, .streaming, .paused:
            #expect(action.name == "closeAndFail(broken)")
            #expect(action.exchange === exchange)
        }
        #expect(machine.state.name == "closed")
    }

    @Test func aClosedConnectionIgnoresEverything() {
        let exchange = call()
        var machine = machine(in: .closed, carrying: exchange)
        #expect(machine.received(Self.small).name == "none")
        #expect(machine.received(Self.body("x")).name == "none")
        #expect(machine.received(.end(nil)).name == "none")
        #expect(machine.fail(exchange, .timedOut).name == "none")
        #expect(machine.bodyStreamFull(exchange).name == "none")
        #expect(machine.bodyConsumerWantsMore(exchange).name == "none")
        #expect(machine.read().name == "read")
        #expect(machine.state.name == "closed")
    }

    // MARK: What a back end should not send

    @Test(arguments: [Stage.fresh, .idle])
    func anythingFromTheBackEndOnAConnectionWithoutACallClosesIt(_ stage: Stage) {
        var machine = machine(in: stage, carrying: call())
        #expect(machine.received(Self.small).name == "close")
        #expect(machine.state.name == "closed")
    }

    @Test func anAnswerWithoutAHeadFailsTheCall() {
        for part in [Self.body("x"), HTTPClientResponsePart.end(nil)] {
            var machine = Machine()
            _ = machine.start(call())
            #expect(machine.received(part).name == "closeAndFail(broken)")
            #expect(machine.state.name == "closed")
        }
    }

    @Test(arguments: [Stage.collecting, .streaming, .paused])
    func aSecondHeadFailsTheCall(_ stage: Stage) {
        let exchange = call()
        var machine = machine(in: stage, carrying: exchange)
        let action = machine.received(Self.small)
        #expect(action.name == "closeAndFail(broken)")
        #expect(action.exchange === exchange)
        #expect(machine.state.name == "closed")
    }
}

extension UpstreamConnectionStateMachine.State {
    /// The state in a few words, for comparisons in tests.
    var name: String {
        switch self {
        case .fresh: "fresh"
        case .idle: "idle"
        case .awaitingHead(let call): "awaitingHead(\(call.request), \(call.onReusedConnection ? "reused" : "fresh"))"
        case .collecting: "collecting"
        case .streaming(_, _, .flowing): "streaming"
        case .streaming(_, _, .paused(readPending: false)): "paused"
        case .streaming(_, _, .paused(readPending: true)): "paused, read pending"
        case .closed: "closed"
        case .modifying: "modifying"
        }
    }
}

extension UpstreamConnectionStateMachine.Action {
    /// The action in a few words, for comparisons in tests.
    var name: String {
        switch self {
        case .none: "none"
        case .sendRequest(_, let end): "sendRequest(end: \(end))"
        case .sendElsewhere: "sendElsewhere"
        case .answerStreamed(_, let head): "answerStreamed(\(head.status.code))"
        case .forwardBodyPart(_, let part): "forwardBodyPart(\(String(buffer: part)))"
        case .answerWhole(_, let head, let body, let then): "answerWhole(\(head.status.code), \(String(buffer: body)), then: \(then))"
        case .finishStream(_, let then): "finishStream(then: \(then))"
        case .pauseClock: "pauseClock"
        case .resume(_, let read): "resume(read: \(read))"
        case .read: "read"
        case .closeAndFail(_, .timedOut): "closeAndFail(timedOut)"
        case .closeAndFail(_, .broken): "closeAndFail(broken)"
        case .closeAndRetry: "closeAndRetry"
        case .close: "close"
        }
    }

    /// The call the action is about, if any.
    var exchange: UpstreamExchange? {
        switch self {
        case .sendRequest(let exchange, _), .sendElsewhere(let exchange), .answerStreamed(let exchange, _),
            .forwardBodyPart(let exchange, _), .answerWhole(let exchange, _, _, _), .finishStream(let exchange, _),
            .pauseClock(let exchange), .resume(let exchange, _), .closeAndFail(let exchange, _), .closeAndRetry(let exchange):
            exchange
        case .none, .read, .close:
            nil
        }
    }
}
