import DeviceAuthentication
import Foundation
import MidtierCore
import Synchronization
import Testing

/// A `backend` app's sign-in (docs/identity.md, "Signing in with the back end's own users"):
/// the back end answers, Midtier remembers a yes (never the password) and throttles noes.
/// The throttles' clock stands still: a loaded machine's pauses never open a closed user.
@Suite(.timeLimit(.minutes(10))) struct BackendSignInTests {
    /// A back end that knows one password per (upper-case) user and counts its checks.
    final class Backend: Sendable {
        let checks = Mutex<[String]>([])
        let answer = Mutex<BasicAuthenticator.RemoteOutcome?>(nil)
        let passwords: [String: String]
        init(_ passwords: [String: String]) { self.passwords = passwords }

        var check: BasicAuthenticator.RemoteCheck {
            { user, password in
                self.checks.withLock { $0.append(user) }
                if let forced = self.answer.withLock({ $0 }) { return forced }
                return self.passwords[user.uppercased()] == password ? .accepted : .refused
            }
        }
    }

    static func header(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    @Test func theBackEndDecidesAndAYesIsRemembered() async {
        let backend = Backend(["ALICE": "alice-sap-pw"])
        let authenticator = BasicAuthenticator(remote: .init(realm: "backend:gw", check: backend.check), cacheSeconds: 600)
        let first = await authenticator.authenticate(authorization: Self.header("alice", "alice-sap-pw"))
        #expect(first == .success(AuthenticatedUser(identity: UserIdentity(realm: "backend:gw", id: "ALICE"))))
        // The same credentials again: remembered, the back end is not asked.
        _ = await authenticator.authenticate(authorization: Self.header("alice", "alice-sap-pw"))
        _ = await authenticator.authenticate(user: "alice", password: "alice-sap-pw", client: nil)
        #expect(backend.checks.withLock { $0.count } == 1)
        // A wrong password is the back end's no, every time.
        #expect(await authenticator.authenticate(authorization: Self.header("alice", "wrong")) == .failure(.invalidCredentials))
        #expect(backend.checks.withLock { $0.count } == 2)
    }

    @Test func oneSapUserIsOneIdentityInAnyLetterCase() async {
        let backend = Backend(["ALICE": "pw-123456"])
        let authenticator = BasicAuthenticator(remote: .init(realm: "backend:gw", check: backend.check), cacheSeconds: 600)
        let lower = await authenticator.authenticate(authorization: Self.header("alice", "pw-123456"))
        let upper = await authenticator.authenticate(authorization: Self.header("ALICE", "pw-123456"))
        #expect(lower == upper)
        #expect((try? lower.get().identity) == UserIdentity(realm: "backend:gw", id: "ALICE"))
    }

    @Test func anUnreachableBackEndIsNotAWrongPassword() async {
        let backend = Backend([:])
        backend.answer.withLock { $0 = .unavailable("HTTP 500") }
        let throttle = SignInThrottle(freeFailuresPerAddress: 100, freeFailuresPerUser: 1, now: { 1_000 * 1_000_000_000 })
        let authenticator = BasicAuthenticator(remote: .init(realm: "backend:gw", check: backend.check), cacheSeconds: 600, throttle: throttle)
        for _ in 0..<3 {
            #expect(await authenticator.authenticate(authorization: Self.header("bob", "pw"), client: "10.0.0.1") == .failure(.checkerUnavailable))
        }
        // Nothing was counted against bob: once the back end answers, he signs in.
        backend.answer.withLock { $0 = .accepted }
        #expect((try? await authenticator.authenticate(authorization: Self.header("bob", "pw"), client: "10.0.0.1").get())?.id == "BOB")
    }

    @Test func failuresAreThrottledBeforeTheBackEndIsAsked() async {
        let backend = Backend(["CAROL": "right"])
        let throttle = SignInThrottle(freeFailuresPerAddress: 100, freeFailuresPerUser: 2, now: { 1_000 * 1_000_000_000 })
        let authenticator = BasicAuthenticator(remote: .init(realm: "backend:gw", check: backend.check), cacheSeconds: 600, throttle: throttle)
        // Two free failures and one more are the back end's to answer; the next is not asked.
        for attempt in 0..<3 {
            #expect(
                await authenticator.authenticate(authorization: Self.header("carol", "wrong-\(attempt)"), client: "10.0.0.2")
                    == .failure(.invalidCredentials))
        }
        let asked = backend.checks.withLock { $0.count }
        guard case .failure(.throttled) = await authenticator.authenticate(authorization: Self.header("carol", "wrong-9"), client: "10.0.0.2") else {
            Issue.record("the fourth failure in a row should be throttled")
            return
        }
        #expect(backend.checks.withLock { $0.count } == asked)
    }

    @Test func everySpellingOfAUserShareItsFailures() async {
        let backend = Backend(["CAROL": "right"])
        let throttle = SignInThrottle(freeFailuresPerAddress: 100, freeFailuresPerUser: 2, now: { 1_000 * 1_000_000_000 })
        let authenticator = BasicAuthenticator(remote: .init(realm: "backend:gw", check: backend.check), cacheSeconds: 600, throttle: throttle)
        for spelling in ["carol", "Carol", "CAROL"] {
            #expect(
                await authenticator.authenticate(authorization: Self.header(spelling, "wrong-" + spelling), client: "10.0.0.3")
                    == .failure(.invalidCredentials))
        }
        guard case .failure(.throttled) = await authenticator.authenticate(authorization: Self.header("cArOl", "wrong-4"), client: "10.0.0.3") else {
            Issue.record("a fourth spelling should meet the same closed user")
            return
        }
    }

    /// Only ASCII letters fold: `straße` must not become the `STRASSE` another account is.
    @Test func namesFoldOnlyASCIILetters() async {
        let backend = Backend([:])
        backend.answer.withLock { $0 = .accepted }
        let authenticator = BasicAuthenticator(remote: .init(realm: "backend:gw", check: backend.check), cacheSeconds: 600)
        for name in ["stra\u{DF}e", "\u{FB00}", "\u{1C6}", "alice bob", "\u{212A}elvin"] {  // ß, ﬀ, ǆ, a space, the Kelvin sign
            guard case .failure(.malformedCredentials) = await authenticator.authenticate(authorization: Self.header(name, "pw")) else {
                Issue.record("\(name) should be refused, not folded into another name")
                continue
            }
        }
        #expect(backend.checks.withLock { $0.isEmpty }, "a refused name never reaches the back end")
        #expect((try? await authenticator.authenticate(authorization: Self.header("dAvE_1", "pw")).get())?.id == "DAVE_1")
    }
}
