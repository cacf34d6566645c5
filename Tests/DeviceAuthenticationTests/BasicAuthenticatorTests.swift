import Foundation
import MidtierCore
import Synchronization
import Testing

@testable import DeviceAuthentication

@Suite(.timeLimit(.minutes(10))) struct BasicAuthenticatorTests {
    static let users = ["alice": LocalUser(id: "alice", passwordHash: SecretHashing.hash("right", cost: 4), attributes: ["sfUserId": "100001"])]

    func header(_ user: String, _ password: String) -> String { "Basic " + Data("\(user):\(password)".utf8).base64EncodedString() }

    @Test func acceptsTheRightPasswordOnly() async throws {
        let authenticator = BasicAuthenticator(users: Self.users, cacheSeconds: 300)
        #expect(try await authenticator.authenticate(authorization: header("alice", "right")).get().attributes["sfUserId"] == "100001")
        #expect(await authenticator.authenticate(authorization: header("alice", "wrong")) == .failure(.invalidCredentials))
        #expect(await authenticator.authenticate(authorization: header("mallory", "right")) == .failure(.invalidCredentials))
        // The remembered credential is for that password only.
        #expect(await authenticator.authenticate(authorization: header("alice", "wrong")) == .failure(.invalidCredentials))
        #expect(await authenticator.authenticate(authorization: header("alice", "right:")) == .failure(.invalidCredentials))
    }

    @Test func malformedHeadersAreClearFailures() async {
        let authenticator = BasicAuthenticator(users: Self.users, cacheSeconds: 300)
        #expect(await authenticator.authenticate(authorization: nil) == .failure(.missingCredentials))
        for bad in [
            "Bearer abc", "Basic", "Basic !!!", "Basic " + Data("nocolon".utf8).base64EncodedString(),
            "Basic " + Data(":pw".utf8).base64EncodedString(), "Basic " + String(repeating: "A", count: 10000),
        ] {
            guard case .failure(.malformedCredentials) = await authenticator.authenticate(authorization: bad) else {
                Issue.record("\(bad.prefix(40)) was not refused as malformed")
                continue
            }
        }
    }

    @Test func aPasswordWithAColonWorks() async throws {
        let users = ["bob": LocalUser(id: "bob", passwordHash: SecretHashing.hash("a:b:c", cost: 4))]
        let authenticator = BasicAuthenticator(users: users, cacheSeconds: 0)
        #expect(try await authenticator.authenticate(authorization: header("bob", "a:b:c")).get().id == "bob")
    }

    /// KELVIN SIGN + "im" is canonically equivalent to "Kim" (Swift's `==` says equal): it must
    /// not sign in as Kim, and Kim signs in as the id configured, byte for byte.
    @Test func userNamesAreMatchedByTheirBytes() async throws {
        let users = ["Kim": LocalUser(id: "Kim", passwordHash: SecretHashing.hash("kim-pw", cost: 4))]
        let authenticator = BasicAuthenticator(users: users, cacheSeconds: 300)
        #expect("\u{212A}im" == "Kim", "the premise: Swift's == merges the two spellings")
        #expect(await authenticator.authenticate(authorization: header("\u{212A}im", "kim-pw")) == .failure(.invalidCredentials))
        let kim = try await authenticator.authenticate(authorization: header("Kim", "kim-pw")).get()
        #expect(Array(kim.identity.id.utf8) == Array("Kim".utf8))
        #expect(kim.identity == .local("Kim"))
        // Remembered for the exact spelling only.
        #expect(await authenticator.authenticate(authorization: header("\u{212A}im", "kim-pw")) == .failure(.invalidCredentials))
        #expect(UserIdentity.local("\u{212A}im") != .local("Kim"))
    }

    /// bcrypt stops at NUL and reads 72 bytes: neither may let a wrong password in.
    @Test func controlCharactersAndOverlongPasswordsAreRefused() async throws {
        let long = String(repeating: "p", count: 72)
        let users = [
            "alice": LocalUser(id: "alice", passwordHash: SecretHashing.hash("right", cost: 4)),
            "bob": LocalUser(id: "bob", passwordHash: SecretHashing.hash(long, cost: 4)),
        ]
        let authenticator = BasicAuthenticator(users: users, cacheSeconds: 0)
        for bad in ["right\u{0}", "right\u{0}tail", "right\u{1}", "ri\u{7F}ght", "right\t"] {
            guard case .failure(.malformedCredentials) = await authenticator.authenticate(authorization: header("alice", bad)) else {
                Issue.record("a password with a control character was not refused")
                continue
            }
        }
        #expect(try await authenticator.authenticate(authorization: header("bob", long)).get().id == "bob")
        #expect(await authenticator.authenticate(authorization: header("bob", long + "x")) == .failure(.invalidCredentials))
        #expect(throws: SecretHashing.Problem.self) { try SecretHashing.check(long + "x") }
        #expect(throws: SecretHashing.Problem.self) { try SecretHashing.check("a\u{0}b") }
        try SecretHashing.check(long)
    }

    /// The decoy for unknown users costs what the configured hashes cost.
    @Test func theDecoyHasTheCostOfTheConfiguredHashes() {
        let users = [
            "a": LocalUser(id: "a", passwordHash: SecretHashing.hash("x", cost: 5)),
            "b": LocalUser(id: "b", passwordHash: SecretHashing.hash("y", cost: 6)),
        ]
        let authenticator = BasicAuthenticator(users: users, cacheSeconds: 0)
        #expect(authenticator.decoyCost == 6)
        #expect(Decoy.cost(of: Decoy.hash(cost: 6)) == 6)
        #expect(BasicAuthenticator(users: [:], cacheSeconds: 0).decoyCost == 12, "no users: the cost hash-secret makes")
    }

    /// Failures close the user name (and the address) with a growing backoff; a remembered
    /// credential is still recognised; a full verification queue turns callers away at once.
    @Test func failedSignInsAreThrottledButVerifiedUsersAreNot() async throws {
        let throttle = SignInThrottle(freeFailuresPerAddress: 100, freeFailuresPerUser: 3, now: { 1_000 * 1_000_000_000 })
        let authenticator = BasicAuthenticator(users: Self.users, cacheSeconds: 300, throttle: throttle)
        _ = try await authenticator.authenticate(authorization: header("alice", "right"), client: "10.0.0.1").get()
        for _ in 0..<3 {
            #expect(await authenticator.authenticate(authorization: header("alice", "wrong"), client: "10.0.0.9") == .failure(.invalidCredentials))
        }
        #expect(await authenticator.authenticate(authorization: header("alice", "wrong"), client: "10.0.0.9") == .failure(.invalidCredentials))
        guard case .failure(.throttled(let seconds)) = await authenticator.authenticate(authorization: header("alice", "wrong2"), client: "10.0.0.9")
        else {
            Issue.record("the fifth failure in a row was not throttled")
            return
        }
        #expect(seconds >= 1)
        // alice's remembered credential is served as before.
        #expect(try await authenticator.authenticate(authorization: header("alice", "right"), client: "10.0.0.9").get().id == "alice")

        let limiter = VerificationLimiter(concurrent: 1, waiting: 0)
        // The only place in the queue is taken (known, not waited for by time) until `gate` opens.
        let (gate, blocker) = await Self.occupy(limiter)
        let busy = BasicAuthenticator(users: Self.users, cacheSeconds: 0, limiter: limiter)
        #expect(await busy.authenticate(authorization: header("alice", "right")) == .failure(.busy(retryAfterSeconds: 1)))
        gate.yield()
        _ = await blocker.value
        #expect(try await busy.authenticate(authorization: header("alice", "right")).get().id == "alice")
    }

    /// A header that verified is remembered by its bytes, and only as long as the credential it
    /// carries: bcrypt (here a verification queue with no place left) is not asked again until
    /// the credential's own memory ends, not `cacheSeconds` after the header was first seen.
    @Test func aVerifiedHeaderIsRememberedUntilItsCredentialExpires() async throws {
        let clock = Mutex<UInt64>(1_000_000_000)
        let limiter = VerificationLimiter(concurrent: 1, waiting: 0)
        let authenticator = BasicAuthenticator(users: Self.users, cacheSeconds: 300, limiter: limiter, now: { clock.withLock { $0 } })
        // Verified through the form's path at t = 0; the header is seen first at t = 200 s.
        #expect(try await authenticator.authenticate(user: "alice", password: "right", client: nil).get().id == "alice")
        clock.withLock { $0 += 200_000_000_000 }
        // The only place in the queue is taken (known, not waited for by time) until `gate` opens.
        let (gate, blocker) = await Self.occupy(limiter)
        #expect(try await authenticator.authenticate(authorization: header("alice", "right")).get().id == "alice")
        #expect(try await authenticator.authenticate(authorization: header("alice", "right")).get().id == "alice")
        // Other bytes for the same credential are not the remembered header, but the credential is remembered.
        #expect(try await authenticator.authenticate(authorization: "basic " + header("alice", "right").dropFirst(6)).get().id == "alice")
        // A wrong password is never served from the header memory.
        #expect(await authenticator.authenticate(authorization: header("alice", "wrong")) == .failure(.busy(retryAfterSeconds: 1)))
        // t = 301 s: the credential's memory ended, and with it the header's.
        clock.withLock { $0 += 101_000_000_000 }
        #expect(await authenticator.authenticate(authorization: header("alice", "right")) == .failure(.busy(retryAfterSeconds: 1)))
        gate.yield()
        _ = await blocker.value
        #expect(try await authenticator.authenticate(authorization: header("alice", "right")).get().id == "alice")
    }

    /// Takes a place in `limiter` until the returned gate is opened (`yield()`), and returns
    /// once the place is taken.
    static func occupy(_ limiter: VerificationLimiter) async -> (gate: AsyncStream<Void>.Continuation, blocker: Task<Void?, Never>) {
        let gate = AsyncStream<Void>.makeStream()
        let entered = AsyncStream<Void>.makeStream()
        let blocker = Task {
            await limiter.run {
                entered.continuation.yield()
                for await _ in gate.stream { break }
            }
        }
        for await _ in entered.stream { break }
        return (gate.continuation, blocker)
    }

    /// The keyed digest is HMAC-SHA256 (RFC 4231, test cases 1 and 2), from reused keyed
    /// contexts, however many call it at once and however often.
    @Test func theKeyedDigestIsHMACSHA256() async {
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        let jefe = KeyedDigester(key: Array("Jefe".utf8))
        for _ in 0..<3 {
            #expect(hex(jefe.mac(Array("what do ya want for nothing?".utf8))) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        }
        let first = KeyedDigester(key: [UInt8](repeating: 0x0b, count: 20))
        let expected = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        let results = await withTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { hex(first.mac(Array("Hi There".utf8))) } }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: expected, count: 200))
        // Field lists are length-prefixed: ["ab", "c"] and ["a", "bc"] differ.
        #expect(first.digest(["ab", "c"]) != first.digest(["a", "bc"]))
        #expect(first.digest(["ab", "c"]) == first.digest(["ab", "c"]))
        // Fed field by field, it is the HMAC of the length-prefixed message (an empty field and
        // a non-ASCII one included), from a fresh digester and from reused contexts alike.
        let fields = ["user", "", "p\u{E4}ssword:\u{301}"]
        var message: [UInt8] = []
        for field in fields {
            message += withUnsafeBytes(of: UInt32(field.utf8.count).bigEndian) { Array($0) }
            message += Array(field.utf8)
        }
        let expectedDigest = first.mac(message).withUnsafeBufferPointer { CredentialDigest($0) }
        for _ in 0..<3 { #expect(first.digest(fields) == expectedDigest) }
        #expect(KeyedDigester(key: [UInt8](repeating: 0x0b, count: 20)).digest(fields) == expectedDigest)
    }
}
