import Foundation
import MidtierCore
import MidtierHTTP
import NIOCore
import Testing

/// Slow and idle clients (docs/operations.md, "Slow and idle clients"): which limit applies
/// when, and counting connections per address — the guard's value types, without sockets. The
/// guard on both listeners over real sockets is `ConnectionGuardListenerTests` (MidtierServerTests);
/// the end-to-end case, with two hundred connections, is Tests/e2e/slow_clients.py.
@Suite struct ConnectionGuardTests {
    static let limits = ConnectionLimits(requestHeadSeconds: 10, idleSeconds: 60, requestBodySeconds: 30, maxConnectionsPerAddress: 4)

    static func at(_ seconds: Int64) -> NIODeadline { .uptimeNanoseconds(UInt64(1_000 + seconds) * 1_000_000_000) }

    @Test func theFirstHeadCountsFromTheOpeningWhateverTrickles() {
        var deadlines = ConnectionDeadlines(Self.limits, openedAt: Self.at(0))
        #expect(deadlines.deadline?.at == Self.at(10))
        #expect(deadlines.deadline?.limit == .requestHead)
        // A byte a second: each read ends, none completes the head, the deadline stays.
        for second in 1...9 {
            deadlines.readRequested(at: Self.at(Int64(second)))
            deadlines.bytesArrived(at: Self.at(Int64(second)))
        }
        #expect(deadlines.deadline?.at == Self.at(10))
        #expect(deadlines.deadline?.limit == .requestHead)
    }

    @Test func noLimitWhileMidtierAnswersThenIdleThenTheNextHead() {
        var deadlines = ConnectionDeadlines(Self.limits, openedAt: Self.at(0))
        deadlines.headRead()
        deadlines.endRead(at: Self.at(1))
        #expect(deadlines.deadline == nil, "a slow back end or a slow download is not the client's to answer for")
        deadlines.readRequested(at: Self.at(2))
        #expect(deadlines.deadline == nil)
        deadlines.answerSent(at: Self.at(500))
        #expect(deadlines.deadline?.at == Self.at(560))
        #expect(deadlines.deadline?.limit == .idle)
        // The next request's first bytes: its head has requestHeadSeconds from them.
        deadlines.bytesArrived(at: Self.at(520))
        #expect(deadlines.deadline?.at == Self.at(530))
        #expect(deadlines.deadline?.limit == .requestHead)
        deadlines.bytesArrived(at: Self.at(525))
        #expect(deadlines.deadline?.at == Self.at(530), "more bytes of the same head do not move it")
        deadlines.headRead()
        deadlines.endRead(at: Self.at(526))
        #expect(deadlines.deadline == nil)
        deadlines.answerSent(at: Self.at(527))
        #expect(deadlines.deadline?.at == Self.at(587))
        #expect(deadlines.deadline?.limit == .idle)
    }

    @Test func aBodyIsTimedOnlyWhileMidtierWaitsForIt() {
        var deadlines = ConnectionDeadlines(Self.limits, openedAt: Self.at(0))
        deadlines.headRead()
        deadlines.bytesArrived(at: Self.at(1))
        #expect(deadlines.deadline == nil, "Midtier has not asked for more yet")
        deadlines.readRequested(at: Self.at(1))
        #expect(deadlines.deadline?.at == Self.at(31))
        #expect(deadlines.deadline?.limit == .requestBody)
        deadlines.readRequested(at: Self.at(5))
        #expect(deadlines.deadline?.at == Self.at(31), "asking again does not restart the wait")
        // Progress: bytes came, Midtier asks for more.
        deadlines.bytesArrived(at: Self.at(20))
        deadlines.readRequested(at: Self.at(20))
        #expect(deadlines.deadline?.at == Self.at(50))
        // A back end that takes the body slowly: Midtier stops reading; the client waits.
        deadlines.bytesArrived(at: Self.at(21))
        #expect(deadlines.deadline == nil)
        deadlines.readRequested(at: Self.at(400))
        #expect(deadlines.deadline?.at == Self.at(430))
        deadlines.bytesArrived(at: Self.at(401))
        deadlines.endRead(at: Self.at(401))
        #expect(deadlines.deadline == nil, "the answer is Midtier's to send")
    }

    @Test func anAnswerBeforeTheBodyEndsLeavesTheBodyTimed() {
        var deadlines = ConnectionDeadlines(Self.limits, openedAt: Self.at(0))
        deadlines.headRead()
        deadlines.answerSent(at: Self.at(1))  // a refusal, before the body was read
        deadlines.readRequested(at: Self.at(1))  // the rest of the body is read and dropped
        #expect(deadlines.deadline?.at == Self.at(31))
        #expect(deadlines.deadline?.limit == .requestBody)
        deadlines.bytesArrived(at: Self.at(2))
        deadlines.endRead(at: Self.at(2))
        #expect(deadlines.deadline?.at == Self.at(62))
        #expect(deadlines.deadline?.limit == .idle)
    }

    /// A 401 at once, then one byte every ten seconds kept the connection 100 s and more: the
    /// body deadline wanted only some progress. After an early answer the rest of the body has
    /// `requestBodySeconds` from the answer in all, and at most `drainLimit` bytes.
    @Test func aTrickledBodyAfterAnEarlyAnswerDoesNotHoldTheConnection() {
        var deadlines = ConnectionDeadlines(Self.limits, openedAt: Self.at(0))
        deadlines.headRead()
        deadlines.answerSent(at: Self.at(1))
        for second in stride(from: Int64(2), through: 30, by: 2) {
            deadlines.readRequested(at: Self.at(second))
            deadlines.bytesArrived(at: Self.at(second))
            let kept = deadlines.bodyRead(1)
            #expect(kept)
            #expect(deadlines.deadline?.at == Self.at(31), "progress does not move it (second \(second))")
            #expect(deadlines.deadline?.limit == .requestBody)
        }
        // The byte budget closes a fast drain sooner.
        var flooded = ConnectionDeadlines(Self.limits, openedAt: Self.at(0))
        flooded.headRead()
        let early = flooded.bodyRead(ConnectionDeadlines.drainLimit * 4)
        #expect(early, "before the answer, the body is the handler's to limit")
        flooded.answerSent(at: Self.at(1))
        let withinBudget = flooded.bodyRead(ConnectionDeadlines.drainLimit)
        #expect(withinBudget)
        let overBudget = flooded.bodyRead(1)
        #expect(!overBudget)
        // A body that ends in time leaves the connection as usual, and the next body is timed anew.
        var finished = ConnectionDeadlines(Self.limits, openedAt: Self.at(0))
        finished.headRead()
        finished.answerSent(at: Self.at(1))
        finished.endRead(at: Self.at(3))
        #expect(finished.deadline?.limit == .idle)
        finished.headRead()
        finished.readRequested(at: Self.at(10))
        #expect(finished.deadline?.at == Self.at(40))
        let nextBody = finished.bodyRead(ConnectionDeadlines.drainLimit * 2)
        #expect(nextBody)
    }

    @Test func connectionsAreCountedPerAddressAndPerIPv6Slash64() throws {
        let connections = ConnectionsPerAddress()
        let v4 = ConnectionsPerAddress.key(of: try #require(AddressRange.bytes(of: "203.0.113.9")))
        #expect(
            ConnectionsPerAddress.key(of: try #require(AddressRange.bytes(of: "::ffff:203.0.113.9"))) == v4,
            "an IPv4-mapped address is its IPv4 address")
        #expect(ConnectionsPerAddress.key(of: try #require(AddressRange.bytes(of: "203.0.113.10"))) != v4)
        let v6 = ConnectionsPerAddress.key(of: try #require(AddressRange.bytes(of: "2001:db8:1:2::1")))
        #expect(
            ConnectionsPerAddress.key(of: try #require(AddressRange.bytes(of: "2001:db8:1:2:ffff:ffff:ffff:ffff"))) == v6,
            "one /64 is one client")
        #expect(ConnectionsPerAddress.key(of: try #require(AddressRange.bytes(of: "2001:db8:1:3::1"))) != v6)

        for _ in 0..<2 { #expect(connections.open(v4, limit: 2)) }
        #expect(!connections.open(v4, limit: 2), "the third is refused and not counted")
        #expect(connections.count(v4) == 2)
        #expect(connections.open(v6, limit: 2), "another address has its own count")
        connections.close(v4)
        #expect(connections.open(v4, limit: 2), "a closed connection makes room")
        for _ in 0..<3 { connections.close(v4) }
        #expect(connections.count(v4) == 0, "never below zero")
    }
}
