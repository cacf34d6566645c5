import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Testing

@testable import DeviceProxy

/// The turns of one device connection on their own (``DeviceConnectionStateMachine``): who
/// answers each request, what waits, when reading pauses and when the connection ends. The same
/// through a channel is `ProxyChannelHandlerTests`.
@Suite struct DeviceConnectionStateMachineTests {
    struct Malformed: Error {}

    /// `/own/…` is Hummingbird's; everything else is answered here; `Connection: close` closes.
    static func machine() -> DeviceConnectionStateMachine {
        DeviceConnectionStateMachine { head in
            (!(head.path ?? "").hasPrefix("/own"), head.headerFields[.connection] == "close")
        }
    }

    static func head(_ path: String, close: Bool = false) -> DeviceConnectionStateMachine.Event {
        var fields = HTTPFields()
        if close { fields[.connection] = "close" }
        return .part(.head(HTTPRequest(method: .get, scheme: "http", authority: "m", path: path, headerFields: fields)))
    }
    static let end = DeviceConnectionStateMachine.Event.part(.end(nil))

    /// What an inbound action is, without its payload (the event carries no equality).
    static func kind(_ action: DeviceConnectionStateMachine.InboundAction) -> String {
        switch action {
        case .none: "none"
        case .handOn(.part(.head)): "handOn head"
        case .handOn(.part(.end)): "handOn end"
        case .handOn(.part(.body)): "handOn body"
        case .handOn(.error): "handOn error"
        case .handOn(.inputClosed): "handOn inputClosed"
        case .handOnAndEnd(.error, let read): "end with error\(read ? ", read" : "")"
        case .handOnAndEnd(.inputClosed, let read): "end with inputClosed\(read ? ", read" : "")"
        case .handOnAndEnd(.part, _): "end with part"
        case .answer(let head): "answer \(head.path ?? "")"
        case .nextTurn: "nextTurn"
        }
    }

    static func kind(_ event: DeviceConnectionStateMachine.Event?) -> String {
        switch event {
        case nil: "nothing"
        case .part(.head(let head))?: "head \(head.path ?? "")"
        case .part(.end)?: "end"
        case .part(.body)?: "body"
        case .error?: "error"
        case .inputClosed?: "inputClosed"
        }
    }

    @Test func aBodilessProxyCallIsAnsweredHereAndTheConnectionStaysOpen() {
        var machine = Self.machine()
        let seen1 = Self.kind(machine.inbound(Self.head("/dest/a")))
        #expect(seen1 == "answer /dest/a")
        let seen2 = Self.kind(machine.inbound(Self.end))
        #expect(seen2 == "none")
        #expect(machine.turn == .proxy(requestEnded: true, answerEnded: false, close: false))
        guard case .keepOpen(nextTurn: true) = machine.proxyAnswerEnded() else {
            Issue.record("the answer ends the turn")
            return
        }
        let seen3 = Self.kind(machine.nextWaiting())
        #expect(seen3 == "nothing")
        #expect(machine.turn == .idle)
        let seen4 = machine.read()
        #expect(seen4)
    }

    @Test func hummingbirdsRequestsGoOnToHummingbirdWithTheirEnd() {
        var machine = Self.machine()
        let seen5 = Self.kind(machine.inbound(Self.head("/own/x")))
        #expect(seen5 == "handOn head")
        let seen6 = Self.kind(machine.inbound(Self.end))
        #expect(seen6 == "handOn end")
        guard case .none = machine.proxyAnswerEnded() else {
            Issue.record("the proxy does not end Hummingbird's answer")
            return
        }
        guard case .keepOpen(nextTurn: true) = machine.hummingbirdAnswerEnded() else {
            Issue.record("Hummingbird's answer ends the turn")
            return
        }
        _ = machine.nextWaiting()
        #expect(machine.turn == .idle)
    }

    /// Pipelined requests wait, reading pauses while they do, and they are taken in order
    /// once the answer before them has ended, whoever answers each.
    @Test func pipelinedRequestsWaitForTheAnswerBeforeThem() {
        var machine = Self.machine()
        let seen7 = Self.kind(machine.inbound(Self.head("/dest/1")))
        #expect(seen7 == "answer /dest/1")
        let seen8 = Self.kind(machine.inbound(Self.end))
        #expect(seen8 == "none")
        let seen9 = machine.read()
        #expect(seen9, "nothing waits yet")
        for event in [Self.head("/own/2"), Self.end, Self.head("/dest/3"), Self.end] {
            let seen10 = Self.kind(machine.inbound(event))
            #expect(seen10 == "none")
        }
        let seen11 = machine.read()
        #expect(!seen11, "something waits: the read is held")
        guard case .keepOpen(nextTurn: true) = machine.proxyAnswerEnded() else {
            Issue.record("the first answer ends its turn")
            return
        }
        var taken: [String] = []
        while let next = machine.nextWaiting() { taken.append(Self.kind(machine.receive(next))) }
        #expect(taken == ["handOn head", "handOn end"], "only the next request, to its end")
        let seen12 = machine.releaseHeldRead()
        #expect(!seen12, "the third request still waits")
        guard case .keepOpen(nextTurn: true) = machine.hummingbirdAnswerEnded() else {
            Issue.record("Hummingbird's answer ends its turn")
            return
        }
        taken = []
        while let next = machine.nextWaiting() { taken.append(Self.kind(machine.receive(next))) }
        #expect(taken == ["answer /dest/3", "none"])
        let seen13 = machine.releaseHeldRead()
        #expect(seen13, "nothing waits: the held read goes out")
    }

    @Test func connectionCloseEndsTheConnectionAfterTheProxysAnswer() {
        var machine = Self.machine()
        let seen14 = Self.kind(machine.inbound(Self.head("/dest/a", close: true)))
        #expect(seen14 == "answer /dest/a")
        let seen15 = Self.kind(machine.inbound(Self.end))
        #expect(seen15 == "none")
        let seen16 = Self.kind(machine.inbound(Self.head("/dest/b")))
        #expect(seen16 == "none")
        let seen17 = machine.read()
        #expect(!seen17)
        guard case .close(read: true) = machine.proxyAnswerEnded() else {
            Issue.record("the answer closes the connection and lets the held read go")
            return
        }
        #expect(machine.turn == .closing)
        let seen18 = Self.kind(machine.inbound(Self.head("/dest/c")))
        #expect(seen18 == "none", "nothing more is answered")
        let seen19 = Self.kind(machine.inbound(.inputClosed))
        #expect(seen19 == "handOn inputClosed")
        let seen20 = machine.read()
        #expect(seen20, "reads pass, so the end of the input is seen")
    }

    @Test func nothingIsAnsweredAfterHummingbirdsConnectionClose() {
        var machine = Self.machine()
        let seen21 = Self.kind(machine.inbound(Self.head("/own/a", close: true)))
        #expect(seen21 == "handOn head")
        let seen22 = Self.kind(machine.inbound(Self.end))
        #expect(seen22 == "handOn end")
        let seen23 = Self.kind(machine.inbound(Self.head("/dest/b")))
        #expect(seen23 == "none")
        guard case .close(read: false) = machine.hummingbirdAnswerEnded() else {
            Issue.record("Hummingbird closes after its answer")
            return
        }
        let seen24 = Self.kind(machine.nextWaiting())
        #expect(seen24 == "nothing", "what waited is dropped")
        let seen25 = Self.kind(machine.inbound(Self.head("/dest/c")))
        #expect(seen25 == "none")
    }

    /// A parse error while an answer is under way is Hummingbird's once that answer has ended;
    /// it ends Hummingbird's loop.
    @Test func aParseErrorWaitsForTheAnswerUnderWay() {
        var machine = Self.machine()
        let seen26 = Self.kind(machine.inbound(Self.head("/dest/a")))
        #expect(seen26 == "answer /dest/a")
        let seen27 = Self.kind(machine.inbound(.error(Malformed())))
        #expect(seen27 == "none")
        #expect(machine.turn == .proxy(requestEnded: true, answerEnded: false, close: false))
        guard case .keepOpen(nextTurn: true) = machine.proxyAnswerEnded() else {
            Issue.record("the answer ends its turn")
            return
        }
        let next = machine.nextWaiting()
        #expect(Self.kind(next) == "error")
        if let next {
            let action = Self.kind(machine.receive(next))
            #expect(action == "end with error")
        }
        #expect(machine.turn == .closing)
    }

    /// The answer may end before the request's end has come: the end then closes the turn.
    @Test func anAnswerBeforeTheRequestsEnd() {
        var machine = Self.machine()
        let seen28 = Self.kind(machine.inbound(Self.head("/dest/a")))
        #expect(seen28 == "answer /dest/a")
        guard case .keepOpen(nextTurn: false) = machine.proxyAnswerEnded() else {
            Issue.record("the request has not ended: nothing to take yet")
            return
        }
        let seen29 = Self.kind(machine.inbound(Self.end))
        #expect(seen29 == "none")
        #expect(machine.turn == .idle)
        // …and an error in its place, the same.
        let seen30 = Self.kind(machine.inbound(Self.head("/dest/b")))
        #expect(seen30 == "answer /dest/b")
        _ = machine.proxyAnswerEnded()
        let seen31 = Self.kind(machine.inbound(.error(Malformed())))
        #expect(seen31 == "nextTurn")
    }

    @Test func theEndOfTheInputWhileIdleEndsHummingbirdsLoop() {
        var machine = Self.machine()
        let seen32 = Self.kind(machine.inbound(.inputClosed))
        #expect(seen32 == "end with inputClosed")
        #expect(machine.turn == .closing)
        let seen33 = Self.kind(machine.inbound(.error(Malformed())))
        #expect(seen33 == "handOn error")
    }
}

/// Which requests the pipeline answers: a destination call without a body; Midtier's own
/// routes and calls with a body go on to Hummingbird, whatever form the target has.
@Suite struct ProxyCallClassificationTests {
    static func head(_ target: String, _ fields: HTTPFields = [:]) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "http", authority: "m", path: target, headerFields: fields)
    }

    @Test(arguments: [
        ("/sf/odata/v2/User", true), ("/healthz", false), ("/odata/applications/v1/demo/Connections", false),
        ("/mobileservices/settingsExchange/v1/demo", false), ("/sf/x?a=/healthz", true),
        // An absolute-form target that URLComponents refuses reaches HTTPTypes as it came:
        // its path is still an own route, as Hummingbird's router reads it.
        ("http://h:abc/healthz", false), ("http://h%zz/mobileservices/settingsExchange/v1/demo", false),
    ])
    func ownRoutesAreHummingbirds(target: String, answeredHere: Bool) {
        #expect(ProxyChannelHandler.classify(Self.head(target)).answeredHere == answeredHere, "\(target)")
    }

    @Test func aCallWithABodyIsHummingbirds() {
        #expect(!ProxyChannelHandler.classify(Self.head("/sf/x", [.contentLength: "2"])).answeredHere)
        #expect(!ProxyChannelHandler.classify(Self.head("/sf/x", [.transferEncoding: "chunked"])).answeredHere)
        #expect(ProxyChannelHandler.classify(Self.head("/sf/x", [.contentLength: "0"])).answeredHere)
        #expect(ProxyChannelHandler.classify(Self.head("/sf/x", [.connection: "close"])).close)
    }
}
