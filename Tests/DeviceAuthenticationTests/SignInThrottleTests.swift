import Foundation
import MidtierCore
import Synchronization
import Testing

@testable import DeviceAuthentication

/// The failed sign-in throttle and the budget in front of bcrypt (docs/identity.md, "Sign-in
/// rules"). Time is a clock the test moves: nothing here waits or measures.
@Suite(.timeLimit(.minutes(10))) struct SignInThrottleTests {
    /// A clock the test sets; starts at 1000 s.
    final class Clock: Sendable {
        private let nanoseconds = Mutex<UInt64>(1_000 * 1_000_000_000)
        var now: @Sendable () -> UInt64 { { [self] in nanoseconds.withLock { $0 } } }
        func advance(seconds: Double) { nanoseconds.withLock { $0 += UInt64(seconds * 1_000_000_000) } }
    }

    /// An IPv6 client holds a /64: its addresses count as one. Another /64 is another client;
    /// an IPv4 client as a dual-stack listener sees it (`::ffff:a.b.c.d`) is that IPv4 address.
    @Test func addressesOfOneIPv6Slash64ShareACount() {
        let clock = Clock()
        let throttle = SignInThrottle(freeFailuresPerAddress: 5, freeFailuresPerUser: 1000, now: clock.now)
        for host in 1...10 {
            throttle.recordFailure(address: "2001:db8:0:7::\(String(host, radix: 16))", user: "user\(host)")
        }
        #expect(
            throttle.retryAfter(address: "2001:db8:0:7:ffff:ffff:ffff:ffff", user: "someone") != nil,
            "ten failures from ten addresses of one /64 must close that /64")
        #expect(throttle.retryAfter(address: "2001:db8:0:8::1", user: "someone") == nil, "another /64 is another client")

        for _ in 0..<6 { throttle.recordFailure(address: "::ffff:192.0.2.7", user: "x") }
        #expect(throttle.retryAfter(address: "192.0.2.7", user: "y") != nil, "an IPv4-mapped address is its IPv4 address")
        #expect(throttle.retryAfter(address: "192.0.2.8", user: "y") == nil, "IPv4 addresses count one by one")
    }

    /// An attacker who holds one valid account cannot reset the count of the names they guess
    /// by signing in with it; the user whose password it is clears what their own typos cost.
    @Test func aSuccessForOneNameKeepsTheCountsOfOthers() {
        let clock = Clock()
        let throttle = SignInThrottle(freeFailuresPerAddress: 3, freeFailuresPerUser: 3, now: clock.now)
        let attacker = "198.51.100.4"
        for _ in 0..<4 { throttle.recordFailure(address: attacker, user: "bob") }
        #expect(throttle.retryAfter(address: nil, user: "bob") != nil)
        #expect(throttle.retryAfter(address: attacker, user: "carol") != nil)

        throttle.recordSuccess(address: attacker, user: "mallory")
        #expect(throttle.retryAfter(address: nil, user: "bob") != nil, "mallory's success cleared bob's count")
        #expect(throttle.retryAfter(address: attacker, user: "carol") != nil, "mallory's success reopened the address her guesses of bob closed")

        // The back-off is over; the count is not: the next failure closes again at once.
        clock.advance(seconds: 120)
        #expect(throttle.retryAfter(address: attacker, user: "bob") == nil)
        throttle.recordSuccess(address: attacker, user: "mallory")
        throttle.recordFailure(address: attacker, user: "bob")
        #expect(throttle.retryAfter(address: nil, user: "bob") != nil, "bob's count survived mallory's success")
    }

    /// A success for a name clears that name and what it cost the address: a user who mistyped
    /// and then got it right is not held back by their own typos.
    @Test func aSuccessClearsItsOwnNameAndWhatItsFailuresCostTheAddress() {
        let clock = Clock()
        let throttle = SignInThrottle(freeFailuresPerAddress: 3, freeFailuresPerUser: 3, now: clock.now)
        let office = "203.0.113.20"
        for _ in 0..<2 { throttle.recordFailure(address: office, user: "carol") }
        for _ in 0..<2 { throttle.recordFailure(address: office, user: "alice") }
        #expect(throttle.retryAfter(address: office, user: "dave") != nil)
        throttle.recordSuccess(address: office, user: "alice")
        #expect(throttle.retryAfter(address: office, user: "dave") == nil, "alice's typos no longer count against the office")
        throttle.recordFailure(address: office, user: "alice")
        throttle.recordFailure(address: office, user: "dave")
        #expect(throttle.retryAfter(address: office, user: "erin") != nil, "carol's two failures still count: 2 + 2 > 3")
    }

    /// At most `perSecond` verifications may start per second, in bursts of `burst`, whatever
    /// addresses they come from; past that the caller is turned away (503) without bcrypt.
    @Test func theVerificationBudgetRefusesPastItsRate() async {
        let clock = Clock()
        let limiter = VerificationLimiter(concurrent: 8, waiting: 8, perSecond: 2, burst: 3, now: clock.now)
        var started = 0
        for _ in 0..<5 { if await limiter.run({ 1 }) != nil { started += 1 } }
        #expect(started == 3, "a burst of 3, then nothing until the budget refills")
        clock.advance(seconds: 1)
        started = 0
        for _ in 0..<5 { if await limiter.run({ 1 }) != nil { started += 1 } }
        #expect(started == 2, "one second later: two more")
    }

    /// The budget is of bcrypt work: a check of cost 11 takes half of one of cost 12, one of
    /// cost 13 twice as much (but never more than the bucket holds, or it could never start).
    @Test func theBudgetCountsBcryptWork() async {
        let clock = Clock()
        let limiter = VerificationLimiter(concurrent: 8, waiting: 8, perSecond: 1, burst: 2, now: clock.now)
        var started = 0
        for _ in 0..<6 { if await limiter.run(cost: 11, { 1 }) != nil { started += 1 } }
        #expect(started == 4)
        clock.advance(seconds: 2)
        #expect(await limiter.run(cost: 13, { 1 }) != nil)
        #expect(await limiter.run(cost: 4, { 1 }) == nil, "the bucket is empty")
        clock.advance(seconds: 2)
        #expect(await limiter.run(cost: 20, { 1 }) != nil, "a check dearer than the bucket takes all of it")
    }

    /// Over budget, a new password costs no bcrypt (503), while a credential verified before is
    /// recognised as ever. (Cost 12: the budget counts in checks of that cost.)
    @Test func overBudgetSignInsAreBusyButRememberedOnesPass() async throws {
        let clock = Clock()
        let users = ["alice": LocalUser(id: "alice", passwordHash: SecretHashing.hash("right", cost: 12))]
        let limiter = VerificationLimiter(concurrent: 8, waiting: 8, perSecond: 1, burst: 1, now: clock.now)
        let authenticator = BasicAuthenticator(users: users, cacheSeconds: 300, limiter: limiter)
        let header = { (user: String, password: String) in "Basic " + Data("\(user):\(password)".utf8).base64EncodedString() }
        #expect(try await authenticator.authenticate(authorization: header("alice", "right"), client: "10.0.0.1").get().id == "alice")
        for address in 2...10 {
            #expect(
                await authenticator.authenticate(authorization: header("alice", "guess\(address)"), client: "10.0.0.\(address)")
                    == .failure(.busy(retryAfterSeconds: 1)))
        }
        #expect(try await authenticator.authenticate(authorization: header("alice", "right"), client: "10.0.0.1").get().id == "alice")
    }
}
