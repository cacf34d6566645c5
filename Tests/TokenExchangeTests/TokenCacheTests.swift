import Foundation
import MidtierCore
import MidtierTestSupport
import Synchronization
import Testing

@testable import TokenExchange

/// A clock the test moves by hand (nanoseconds).
final class ManualClock: Sendable {
    private let value = Mutex<UInt64>(1_000_000_000)
    var now: UInt64 { value.withLock { $0 } }
    func advance(seconds: UInt64) { value.withLock { $0 += seconds * 1_000_000_000 } }
}

/// Counts exchanges; can be made to fail or to hang until released.
final class FakeTokenService: Sendable {
    private let state = Mutex<(count: Int, forced: Int, fail: Bool)>((0, 0, false))
    var exchanges: Int { state.withLock { $0.count } }
    var forcedExchanges: Int { state.withLock { $0.forced } }
    func failNext(_ fail: Bool) { state.withLock { $0.fail = fail } }

    func exchange(lifetime: Int = 3600, delay: Duration = .zero) -> TokenCache.Exchange {
        { key, forceNew in
            try await Task.sleep(for: delay)
            let (count, fail) = self.state.withLock { state in
                state.count += 1
                if forceNew { state.forced += 1 }
                return (state.count, state.fail)
            }
            if fail { throw TokenExchangeError.refused(status: 401, reason: "no") }
            return AccessToken(value: "\(key.user)-token-\(count)", lifetimeSeconds: lifetime)
        }
    }
}

/// Holds exchanges until opened, and tells the test as each one starts.
final class ExchangeGate: Sendable {
    private let gate = Gate()
    let started: AsyncStream<Void>
    private let startedContinuation: AsyncStream<Void>.Continuation

    init() { (started, startedContinuation) = AsyncStream.makeStream() }

    func exchange() -> TokenCache.Exchange {
        { key, _ in
            self.startedContinuation.yield()
            await self.gate.wait()
            return AccessToken(value: "\(key.user)-gated", lifetimeSeconds: 3600)
        }
    }

    func open() { gate.open() }
}

@Suite(.timeLimit(.minutes(10))) struct TokenCacheTests {
    let alice = TokenCacheKey(destination: "sf", user: .local("alice"), nameID: "100001")
    let bob = TokenCacheKey(destination: "sf", user: .local("bob"), nameID: "100002")

    @Test func concurrentCallersShareOneExchange() async throws {
        let service = FakeTokenService()
        let cache = TokenCache()
        let exchange = service.exchange(delay: .milliseconds(50))
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<500 { group.addTask { try await cache.token(for: alice, exchange: exchange).0.value } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(service.exchanges == 1)
        #expect(tokens == ["alice-token-1"])
    }

    @Test func eachUserHasTheirOwnToken() async throws {
        let service = FakeTokenService()
        let cache = TokenCache()
        let a = try await cache.token(for: alice, exchange: service.exchange()).0
        let b = try await cache.token(for: bob, exchange: service.exchange()).0
        #expect(a.value.hasPrefix("alice-"))
        #expect(b.value.hasPrefix("bob-"))
        // Keys are two fields, not a joined string: these must not collide.
        let tricky1 = TokenCacheKey(destination: "sf|x", user: .local("y"), nameID: "n")
        let tricky2 = TokenCacheKey(destination: "sf", user: .local("x|y"), nameID: "n")
        let t1 = try await cache.token(for: tricky1, exchange: service.exchange()).0
        let t2 = try await cache.token(for: tricky2, exchange: service.exchange()).0
        #expect(t1 != t2)
    }

    @Test func aFailedExchangeCachesNothing() async throws {
        let service = FakeTokenService()
        let cache = TokenCache()
        service.failNext(true)
        await #expect(throws: TokenExchangeError.self) { try await cache.token(for: alice, exchange: service.exchange()) }
        #expect(cache.count == 0)
        service.failNext(false)
        let (token, outcome) = try await cache.token(for: alice, exchange: service.exchange())
        #expect(token.value == "alice-token-2")
        #expect(outcome == .miss)
    }

    @Test func tokensAreUsedUntilExpiryLessMarginAndRefreshedAhead() async throws {
        let clock = ManualClock()
        let service = FakeTokenService()
        let cache = TokenCache(now: { clock.now })
        let exchange = service.exchange(lifetime: 1000)
        #expect(try await cache.token(for: alice, exchange: exchange).0.value == "alice-token-1")
        clock.advance(seconds: 500)
        let (hit, outcome) = try await cache.token(for: alice, exchange: exchange)
        #expect(hit.value == "alice-token-1")
        #expect(outcome == .hit)
        #expect(service.exchanges == 1)
        // Past three quarters of (lifetime - margin): still served, refreshed in the background.
        clock.advance(seconds: 250)
        #expect(try await cache.token(for: alice, exchange: exchange).0.value == "alice-token-1")
        for _ in 0..<100 where service.exchanges < 2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(service.exchanges == 2)
        #expect(try await cache.token(for: alice, exchange: exchange).0.value == "alice-token-2")
        // Past expiry minus the margin (60 s of 1000 s lifetime: 100 s margin capped at 60): never served.
        clock.advance(seconds: 941)
        #expect(try await cache.token(for: alice, exchange: exchange).0.value == "alice-token-3")
    }

    @Test func renewalAsksForANewTokenOnceForConcurrentCallers() async throws {
        let service = FakeTokenService()
        let cache = TokenCache()
        let exchange = service.exchange(delay: .milliseconds(20))
        let first = try await cache.token(for: alice, exchange: exchange).0
        let renewed = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await cache.renew(for: alice, rejected: first, exchange: exchange).value } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(renewed.count == 1)
        #expect(!renewed.contains(first.value))
        #expect(service.forcedExchanges == 1)
        #expect(service.exchanges == 2)
    }

    @Test func removingAUserDropsTheirTokensAndALateExchangeResult() async throws {
        let service = FakeTokenService()
        let cache = TokenCache()
        _ = try await cache.token(for: alice, exchange: service.exchange())
        _ = try await cache.token(for: TokenCacheKey(destination: "other", user: .local("alice"), nameID: "100001"), exchange: service.exchange())
        _ = try await cache.token(for: bob, exchange: service.exchange())
        #expect(cache.remove(user: .local("alice")) == 2)
        #expect(cache.count == 1)
        // An exchange in flight when the user is removed does not come back into the cache.
        async let pending = cache.token(for: alice, exchange: service.exchange(delay: .milliseconds(100)))
        try await Task.sleep(for: .milliseconds(20))
        cache.remove(user: .local("alice"))
        _ = try await pending
        #expect(cache.count == 1)
    }

    /// An exchange that started before a purge (block, reload) finishes after a new lookup made
    /// the entry again: its token — possibly for the wrong person — must never be cached. With
    /// generations restarting at 0 for a new entry, the old exchange matched the new entry.
    @Test func anExchangeStartedBeforeAPurgeIsNeverCachedAfterIt() async throws {
        let cache = TokenCache()
        let old = Task {
            try await cache.token(for: alice) { _, _ in
                try await Task.sleep(for: .milliseconds(300))
                return AccessToken(value: "old-token-for-the-old-mapping", lifetimeSeconds: 3600)
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        cache.remove(user: .local("alice"))
        let fresh = Task {
            try await cache.token(for: alice) { _, _ in
                try await Task.sleep(for: .milliseconds(700))
                return AccessToken(value: "new-token", lifetimeSeconds: 3600)
            }
        }
        _ = try await old.value
        let (later, _) = try await cache.token(for: alice) { _, _ in AccessToken(value: "third-token", lifetimeSeconds: 3600) }
        #expect(later.value == "new-token")
        #expect(try await fresh.value.0.value == "new-token")
        // The same after removing everything (a reload).
        let older = Task {
            try await cache.token(for: bob) { _, _ in
                try await Task.sleep(for: .milliseconds(300))
                return AccessToken(value: "older", lifetimeSeconds: 3600)
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        cache.removeAll()
        let newer = Task {
            try await cache.token(for: bob) { _, _ in
                try await Task.sleep(for: .milliseconds(700))
                return AccessToken(value: "newer", lifetimeSeconds: 3600)
            }
        }
        _ = try await older.value
        #expect(try await cache.token(for: bob) { _, _ in AccessToken(value: "x", lifetimeSeconds: 3600) }.0.value == "newer")
        _ = try await newer.value
    }

    /// A token is for one NameID: the same user asserting another NameID (a JWT whose claims
    /// map them elsewhere) never gets it, and neither does the same id of another realm.
    @Test func aTokenServesOnlyTheNameIDAndRealmItWasIssuedFor() async throws {
        let service = FakeTokenService()
        let cache = TokenCache()
        let first = try await cache.token(for: alice, exchange: service.exchange()).0
        let elsewhere = TokenCacheKey(destination: "sf", user: .local("alice"), nameID: "100003")
        let otherRealm = TokenCacheKey(destination: "sf", user: UserIdentity(realm: "https://idp.test", id: "alice"), nameID: "100001")
        #expect(try await cache.token(for: elsewhere, exchange: service.exchange()).0 != first)
        #expect(try await cache.token(for: otherRealm, exchange: service.exchange()).0 != first)
        #expect(service.exchanges == 3)
        // Keys compare by bytes: a canonically equivalent spelling is another user.
        let kelvin = TokenCacheKey(destination: "sf", user: .local("\u{212A}im"), nameID: "n")
        let plain = TokenCacheKey(destination: "sf", user: .local("Kim"), nameID: "n")
        #expect(kelvin != plain)
        #expect(cache.remove(user: .local("Kim")) == 0)
        let kelvinToken = try await cache.token(for: kelvin, exchange: service.exchange()).0
        #expect(try await cache.token(for: plain, exchange: service.exchange()).0 != kelvinToken)
        #expect(cache.remove(user: .local("Kim")) == 1, "only the plain spelling's token")
        #expect(try await cache.token(for: kelvin, exchange: service.exchange()) == (kelvinToken, .hit))
    }

    @Test func theCacheIsBounded() async throws {
        let service = FakeTokenService()
        let cache = TokenCache(capacity: 100)
        for index in 0..<1000 {
            _ = try await cache.token(
                for: TokenCacheKey(destination: "sf", user: .local("user\(index)"), nameID: "user\(index)"), exchange: service.exchange())
            #expect(cache.count <= 100)
        }
        #expect(cache.count == 100, "a full cache makes room for one at a time, it never empties")
    }

    /// A full cache lets go of tokens nobody used lately and keeps those in use: users who call
    /// again and again keep their token while hundreds of others come and go.
    @Test func aFullCacheKeepsTheTokensInUseAndLetsColdOnesGo() async throws {
        let service = FakeTokenService()
        let cache = TokenCache(capacity: 100)
        func key(_ index: Int) -> TokenCacheKey { TokenCacheKey(destination: "sf", user: .local("user\(index)"), nameID: "n") }
        for index in 0..<100 { _ = try await cache.token(for: key(index), exchange: service.exchange()) }
        for index in 100..<600 {
            for hot in 0..<10 {
                let (_, outcome) = try await cache.token(for: key(hot), exchange: service.exchange())
                #expect(outcome == .hit, "user\(hot) is in use and keeps their token")
            }
            _ = try await cache.token(for: key(index), exchange: service.exchange())
            #expect(cache.count <= 100)
        }
        #expect(service.exchanges == 600, "one exchange per user: no token in use was let go")
        #expect(try await cache.token(for: key(50), exchange: service.exchange()).1 == .miss, "a cold user's token went")
    }

    /// An expired token goes even when used since the hand last passed; usable tokens in use
    /// stay.
    @Test func expiredTokensGoBeforeTokensInUse() async throws {
        let clock = ManualClock()
        let service = FakeTokenService()
        let cache = TokenCache(capacity: 10, now: { clock.now })
        func key(_ index: Int) -> TokenCacheKey { TokenCacheKey(destination: "sf", user: .local("user\(index)"), nameID: "n") }
        for index in 0..<5 { _ = try await cache.token(for: key(index), exchange: service.exchange(lifetime: 36_000)) }
        for index in 5..<10 { _ = try await cache.token(for: key(index), exchange: service.exchange(lifetime: 600)) }
        // Every token used since: the short-lived ones before they expire, the others after.
        for index in 5..<10 { #expect(try await cache.token(for: key(index), exchange: service.exchange()).1 == .hit) }
        clock.advance(seconds: 1200)
        for index in 0..<5 { #expect(try await cache.token(for: key(index), exchange: service.exchange()).1 == .hit) }
        for index in 10..<15 { _ = try await cache.token(for: key(index), exchange: service.exchange(lifetime: 36_000)) }
        #expect(cache.count == 10)
        for index in 0..<5 { #expect(try await cache.token(for: key(index), exchange: service.exchange()).1 == .hit, "user\(index) kept") }
    }

    /// An entry whose exchange is in flight is never let go, however full the cache: its
    /// callers wait for that exchange, and its token is kept when it comes.
    @Test func anExchangeInFlightIsNeverEvicted() async throws {
        let service = FakeTokenService()
        let gate = ExchangeGate()
        let cache = TokenCache(capacity: 10)
        func key(_ index: Int) -> TokenCacheKey { TokenCacheKey(destination: "sf", user: .local("user\(index)"), nameID: "n") }
        var started = gate.started.makeAsyncIterator()
        var waiting: [Task<(AccessToken, TokenCache.Outcome), any Error>] = []
        for index in 0..<10 {
            waiting.append(Task { try await cache.token(for: key(index), exchange: gate.exchange()) })
            _ = await started.next()
        }
        #expect(cache.exchangesInFlight == 10)
        for index in 10..<100 {
            _ = try await cache.token(for: key(index), exchange: service.exchange())
            #expect(cache.count <= 11, "over capacity by at most the one just kept while every other entry waits")
        }
        #expect(cache.exchangesInFlight == 10)
        gate.open()
        for (index, task) in waiting.enumerated() {
            let (token, outcome) = try await task.value
            #expect(token.value == "user\(index)-gated" && outcome == .miss)
        }
        for index in 0..<10 {
            #expect(try await cache.token(for: key(index), exchange: service.exchange()).1 == .hit, "user\(index)'s token was kept")
        }
        for index in 100..<120 {
            _ = try await cache.token(for: key(index), exchange: service.exchange())
            #expect(cache.count <= 10, "back to its capacity once the exchanges ended")
        }
    }

    /// A user's tokens are found through the cache's index of each user's keys, which follows
    /// every way an entry goes — evicted, failed, removed — so a removal drops exactly the
    /// tokens the user still has, and only theirs.
    @Test func aRemovalDropsExactlyTheUsersRemainingTokens() async throws {
        let service = FakeTokenService()
        let cache = TokenCache(capacity: 50)
        for round in 0..<3 {
            for index in 0..<40 {
                let key = TokenCacheKey(destination: "d\(round)", user: .local("user\(index % 20)"), nameID: "n")
                _ = try await cache.token(for: key, exchange: service.exchange())
            }
        }
        // A failed exchange leaves no entry behind.
        struct Refused: Error {}
        let failing = TokenCacheKey(destination: "failing", user: .local("user3"), nameID: "n")
        _ = try? await cache.token(for: failing) { _, _ in throw Refused() }
        var total = cache.count
        for index in 0..<20 {
            let removed = cache.remove(user: .local("user\(index)"))
            #expect(removed <= 3, "user\(index) had at most a token per destination")
            total -= removed
            #expect(cache.count == total)
        }
        #expect(cache.count == 0)
        #expect(cache.remove(user: .local("user3")) == 0)
    }

    @Test func accessTokensDoNotPrintTheirValue() {
        let token = AccessToken(value: "secret-value-123", lifetimeSeconds: 60)
        #expect(!"\(token)".contains("secret-value-123"))
    }
}

@Suite(.timeLimit(.minutes(10))) struct TokenResponseTests {
    @Test func parsesAndValidatesTheTokenAnswer() throws {
        let token = try TokenResponse.parse(Array(#"{"access_token":"abc","token_type":"Bearer","expires_in":3600}"#.utf8))
        #expect(token.value == "abc")
        #expect(token.lifetimeSeconds == 3600)
        #expect(try TokenResponse.parse(Array(#"{"access_token":"abc","expires_in":"120"}"#.utf8)).lifetimeSeconds == 120)
        #expect(try TokenResponse.parse(Array(#"{"access_token":"abc","expires_in":99999999}"#.utf8)).lifetimeSeconds == 86400)
        for bad in [
            "", "[]", "<html>", #"{"token_type":"Bearer","expires_in":1}"#, #"{"access_token":"","expires_in":1}"#,
            #"{"access_token":"a b","expires_in":1}"#, #"{"access_token":"a","expires_in":0}"#,
            #"{"access_token":"a","expires_in":-5}"#, #"{"access_token":"a","expires_in":"soon"}"#,
            #"{"access_token":"a","expires_in":true}"#, #"{"access_token":"a","token_type":"MAC","expires_in":5}"#,
        ] {
            #expect(throws: TokenExchangeError.self, "\(bad)") { try TokenResponse.parse(Array(bad.utf8)) }
        }
    }

    @Test func errorReasonsAreShortCleanAndNeverEchoTheAssertion() {
        #expect(TokenResponse.reason(fromErrorBody: Array(#"{"errorMessage":"Invalid client"}"#.utf8), avoiding: []) == "Invalid client")
        #expect(
            TokenResponse.reason(fromErrorBody: Array(#"{"error":"invalid_grant","error_description":"expired"}"#.utf8), avoiding: []) == "expired")
        #expect(TokenResponse.reason(fromErrorBody: Array("<html>".utf8), avoiding: []) == "no reason given")
        // A secret followed by a combining mark (canonically another string to Swift's
        // `contains`), or percent-encoded with lower-case digits, is still withheld.
        let withheld = "reason withheld (it echoed a credential Midtier sent)"
        #expect(
            TokenResponse.reason(
                fromErrorBody: Array(#"{"error_description":"bad secret s3cr3t-valué"}"#.utf8),
                avoiding: ["s3cr3t-value"]) == withheld)
        #expect(
            TokenResponse.reason(
                fromErrorBody: Array(#"{"error_description":"bad secret a%2fb%2bc-secret"}"#.utf8),
                avoiding: ["a%2Fb%2Bc-secret"]) == withheld)
        let echoed = TokenResponse.reason(
            fromErrorBody: Array(#"{"errorMessage":"bad assertion PHNhbWwyOkFzc2VydGlvbg"}"#.utf8), avoiding: ["PHNhbWwyOkFzc2VydGlvbg"])
        #expect(!echoed.contains("PHNhbWwy"))
        let long = TokenResponse.reason(
            fromErrorBody: Array(("{\"errorMessage\":\"x " + String(repeating: "A", count: 100) + "\"}").utf8), avoiding: [])
        #expect(!long.contains(String(repeating: "A", count: 65)))
    }

    @Test func formEncodingEscapesEverythingButUnreserved() {
        #expect(FormEncoding.encode([("a b", "c+d/e=f&g"), ("x", "~._-")]) == "a%20b=c%2Bd%2Fe%3Df%26g&x=~._-")
    }
}

/// How the assertion travels in the token request (`samlAssertionEncoding`).
@Suite(.timeLimit(.minutes(10))) struct AssertionEncodingTests {
    /// Bytes whose base64 has `+`, `/` and padding: base64 keeps them, base64url swaps the
    /// alphabet and drops the padding; both decode to the same bytes, and neither breaks lines.
    @Test func base64AndBase64url() {
        let assertion = String(decoding: [0xFB, 0xFF, 0xBF, 0x3E, 0x3F], as: UTF8.self) + String(repeating: "<saml2:Assertion/>", count: 10)
        let base64 = SAMLBearerExchange.encode(assertion, as: .base64)
        let base64url = SAMLBearerExchange.encode(assertion, as: .base64url)
        #expect(base64 == Data(assertion.utf8).base64EncodedString())
        #expect(!base64url.contains("+") && !base64url.contains("/") && !base64url.contains("="))
        #expect(!base64.contains("\n") && !base64url.contains("\n"))
        var padded = base64url.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while padded.count % 4 != 0 { padded += "=" }
        #expect(Data(base64Encoded: padded) == Data(assertion.utf8))
        #expect(base64.contains("+") || base64.contains("/"), "the sample exercises the alphabet difference")
    }
}
