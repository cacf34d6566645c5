import Foundation
import HTTPTypes
import Hummingbird
import MidtierHTTP
import NIOCore
import Synchronization
import Testing
@testable import WebPages

/// A clock the tests move by hand, in nanoseconds (what `PageSessions` takes as `now:`).
private final class PageClock: Sendable {
    private let nanoseconds = Mutex<UInt64>(5_000_000_000)

    var now: UInt64 { nanoseconds.withLock { $0 } }

    func advance(seconds: UInt64) { nanoseconds.withLock { $0 += seconds * 1_000_000_000 } }
}

/// Whether `text` is 64 lower-case hex digits, as session ids and CSRF tokens are.
private func isLowerHex64(_ text: String) -> Bool {
    text.utf8.count == 64 && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
}

/// What the pages for people (the admin console, the self-service page) are built on: their
/// sessions, the comparison of their tokens, and the reading of their forms.
@Suite struct WebPagesTests {}

extension WebPagesTests {
    /// The server-side sessions of the console and the self-service page (docs/console.md,
    /// "Sessions"), on a clock the test moves.
    @Suite struct PageSessionsTests {
        static let idle: UInt64 = 60
        static let lifetime: UInt64 = 600

        private static func sessions(_ clock: PageClock, capacity: Int = 100) -> PageSessions<String> {
            PageSessions<String>(idleSeconds: Int(idle), lifetimeSeconds: Int(lifetime), capacity: capacity, now: { clock.now })
        }

        /// The cookie value `start` returns names the session, and only it.
        @Test func startedSessionIsFoundByItsCookie() {
            let clock = PageClock()
            let sessions = Self.sessions(clock)
            let alice = sessions.start("alice", credentialStamp: "stamp")
            let bob = sessions.start("bob", credentialStamp: "stamp")
            #expect(sessions.session(alice)?.subject == "alice")
            #expect(sessions.session(bob)?.subject == "bob")
            #expect(sessions.count == 2)
            #expect(sessions.idleSeconds == Int(Self.idle))
        }

        /// An unknown cookie, none, an empty one, or one that is not 64 lower-case hex digits
        /// (upper case, too short, too long, other characters) finds nothing, and does not end the
        /// real session.
        @Test func unknownOrMalformedCookiesFindNothing() {
            let clock = PageClock()
            let sessions = Self.sessions(clock)
            let cookie = sessions.start("alice", credentialStamp: "stamp")
            let malformed: [String?] = [
                nil, "", RandomToken.make(),
                cookie.uppercased(), String(cookie.dropLast()), cookie + "0", " " + cookie,
                String(cookie.dropLast()) + "g", String(cookie.dropLast()) + "\u{E9}",
                String(repeating: "0", count: 64),
            ]
            for candidate in malformed {
                #expect(sessions.session(candidate) == nil, "\(String(describing: candidate))")
                sessions.end(candidate)
            }
            #expect(sessions.session(cookie)?.subject == "alice")
        }

        /// A session ends `idleSeconds` after its last use; each use keeps it alive, here well past
        /// one idle period (but within the lifetime).
        @Test func idleSessionEndsButUseKeepsItAlive() {
            let clock = PageClock()
            let sessions = Self.sessions(clock)
            let cookie = sessions.start("alice", credentialStamp: "stamp")
            for touch in 1...9 {
                clock.advance(seconds: Self.idle - 1)
                #expect(sessions.session(cookie) != nil, "use \(touch), \(UInt64(touch) * (Self.idle - 1)) s after the start")
            }
            clock.advance(seconds: Self.idle)
            #expect(sessions.session(cookie) == nil, "idle for idleSeconds")
            #expect(sessions.count == 0, "an ended session is removed")

            let untouched = sessions.start("bob", credentialStamp: "stamp")
            clock.advance(seconds: Self.idle)
            #expect(sessions.session(untouched) == nil, "never used after sign-in")
        }

        /// A session ends `lifetimeSeconds` after sign-in even when it is used all the time.
        @Test func sessionEndsAfterItsLifetimeEvenWhenUsed() {
            let clock = PageClock()
            let sessions = Self.sessions(clock)
            let cookie = sessions.start("alice", credentialStamp: "stamp")
            var elapsed: UInt64 = 0
            while elapsed + Self.idle - 1 < Self.lifetime {
                clock.advance(seconds: Self.idle - 1)
                elapsed += Self.idle - 1
                #expect(sessions.session(cookie) != nil, "\(elapsed) s after the start")
            }
            clock.advance(seconds: Self.lifetime - elapsed)
            #expect(sessions.session(cookie) == nil, "lifetimeSeconds after the start, though used \(Self.lifetime - elapsed) s ago")
        }

        /// `end` ends the session its cookie names, and no other.
        @Test func endEndsTheSession() {
            let clock = PageClock()
            let sessions = Self.sessions(clock)
            let alice = sessions.start("alice", credentialStamp: "stamp")
            let bob = sessions.start("bob", credentialStamp: "stamp")
            sessions.end(alice)
            #expect(sessions.session(alice) == nil)
            #expect(sessions.session(bob)?.subject == "bob")
            sessions.end(alice)
            #expect(sessions.count == 1)
        }

        /// `isStamped` holds for the exact stamp the session started with: not for another, nor for
        /// one Swift's `==` calls equal by Unicode canonical equivalence (KELVIN SIGN and K).
        @Test func stampComparesExactBytes() throws {
            #expect("\u{212A}" == "K", "the premise: String == merges the two")
            let clock = PageClock()
            let sessions = Self.sessions(clock)
            let kelvin = try #require(sessions.session(sessions.start("alice", credentialStamp: "hash-\u{212A}")))
            #expect(kelvin.isStamped("hash-\u{212A}"))
            #expect(!kelvin.isStamped("hash-K"))
            #expect(!kelvin.isStamped("hash-\u{212A} "))
            #expect(!kelvin.isStamped(""))
            let plain = try #require(sessions.session(sessions.start("alice", credentialStamp: "hash-K")))
            #expect(plain.isStamped("hash-K"))
            #expect(!plain.isStamped("hash-\u{212A}"))
            #expect(!plain.isStamped("hash-k"))
        }

        /// A notice left for a session is given once, to that session only.
        @Test func noticeIsGivenOnce() {
            let clock = PageClock()
            let sessions = Self.sessions(clock)
            let alice = sessions.start("alice", credentialStamp: "stamp")
            let bob = sessions.start("bob", credentialStamp: "stamp")
            #expect(sessions.takeNotice(for: alice) == nil)
            sessions.leaveNotice("bob is blocked", for: alice)
            #expect(sessions.takeNotice(for: bob) == nil)
            #expect(sessions.takeNotice(for: alice) == "bob is blocked")
            #expect(sessions.takeNotice(for: alice) == nil, "gone once taken")
            #expect(sessions.takeNotice(for: nil) == nil)
            #expect(sessions.session(alice)?.subject == "alice", "taking the notice does not end the session")
        }

        /// Every session has its own cookie value and CSRF token, each 64 lower-case hex digits.
        @Test func sessionsGetDistinctRandomTokens() throws {
            let clock = PageClock()
            let sessions = Self.sessions(clock)
            let first = sessions.start("alice", credentialStamp: "stamp")
            let second = sessions.start("alice", credentialStamp: "stamp")
            let firstToken = try #require(sessions.session(first)?.csrfToken)
            let secondToken = try #require(sessions.session(second)?.csrfToken)
            for token in [first, second, firstToken, secondToken] {
                #expect(isLowerHex64(token), "\(token)")
            }
            #expect(first != second)
            #expect(firstToken != secondToken)
            #expect(Set([first, second, firstToken, secondToken]).count == 4, "a CSRF token is not a session id")
        }

        /// At capacity, a new session evicts the least recently used one (by last use, not by
        /// sign-in), and no other.
        @Test func fullTableEvictsTheLeastRecentlyUsed() {
            let clock = PageClock()
            let sessions = Self.sessions(clock, capacity: 3)
            let a = sessions.start("a", credentialStamp: "stamp")
            clock.advance(seconds: 1)
            let b = sessions.start("b", credentialStamp: "stamp")
            clock.advance(seconds: 1)
            let c = sessions.start("c", credentialStamp: "stamp")
            clock.advance(seconds: 1)
            #expect(sessions.session(a) != nil, "a is now the most recently used; b the least")
            clock.advance(seconds: 1)
            let d = sessions.start("d", credentialStamp: "stamp")
            #expect(sessions.count == 3)
            #expect(sessions.session(b) == nil, "evicted")
            #expect(sessions.session(a)?.subject == "a")
            #expect(sessions.session(c)?.subject == "c")
            #expect(sessions.session(d)?.subject == "d")
        }

        /// One person signing in over and over holds at most `perSubject` sessions: their least
        /// recently used one ends, nobody else's (a full table would otherwise push everybody
        /// else out).
        @Test func onePersonHoldsAtMostPerSubjectSessions() {
            let clock = PageClock()
            let sessions = PageSessions<String>(capacity: 100, perSubject: 2, now: { clock.now })
            let bob = sessions.start("bob", credentialStamp: "stamp")
            let first = sessions.start("mallory", credentialStamp: "stamp")
            clock.advance(seconds: 1)
            let second = sessions.start("mallory", credentialStamp: "stamp")
            clock.advance(seconds: 1)
            #expect(sessions.session(first) != nil, "used: now the more recent of the two")
            for _ in 0..<50 {
                clock.advance(seconds: 1)
                _ = sessions.start("mallory", credentialStamp: "stamp")
            }
            #expect(sessions.count == 3, "bob's one and mallory's two")
            #expect(sessions.session(bob)?.subject == "bob")
            #expect(sessions.session(first) == nil && sessions.session(second) == nil, "mallory's older ones ended")
        }

        /// A session opened with a credential that expires sooner (a token's `exp`) ends then.
        @Test func sessionEndsWithItsCredential() {
            let clock = PageClock()
            let sessions = PageSessions<String>(idleSeconds: 900, lifetimeSeconds: 28_800, now: { clock.now })
            let cookie = sessions.start("alice", credentialStamp: "issuer", validSeconds: 120)
            clock.advance(seconds: 119)
            #expect(sessions.session(cookie) != nil)
            clock.advance(seconds: 1)
            #expect(sessions.session(cookie) == nil, "the token it was opened with has expired")
            let expired = sessions.start("alice", credentialStamp: "issuer", validSeconds: -5)
            #expect(sessions.session(expired) == nil, "a token already expired opens nothing lasting")
        }

        /// At capacity, sessions that are over anyway go first, before a live one is evicted.
        @Test func fullTableDropsEndedSessionsFirst() {
            let clock = PageClock()
            let sessions = Self.sessions(clock, capacity: 3)
            let a = sessions.start("a", credentialStamp: "stamp")
            clock.advance(seconds: Self.idle - 10)
            let b = sessions.start("b", credentialStamp: "stamp")
            let c = sessions.start("c", credentialStamp: "stamp")
            clock.advance(seconds: 10)
            let d = sessions.start("d", credentialStamp: "stamp")
            #expect(sessions.count == 3)
            #expect(sessions.session(a) == nil, "idle for idleSeconds")
            #expect(sessions.session(b)?.subject == "b")
            #expect(sessions.session(c)?.subject == "c")
            #expect(sessions.session(d)?.subject == "d")
        }

        /// A clock reading older than a session's `lastSeen` (the session was used by another
        /// request that read the clock later; or a clock that stood still or went back). It
        /// trapped (SIGILL: `now - lastSeen` below zero in UInt64) when `PageSessions` read the
        /// clock before taking its lock, so that two requests with one cookie at once (two tabs,
        /// a double submit) could stop the server; the clock is now read under the lock and the
        /// difference saturates. Run in a child process, as a trap would end it.
        /// `atCapacity`: the older reading meets a sign-in at capacity, whose sweep of ended
        /// sessions makes the same subtraction for every session.
        static func olderClockReading(atCapacity: Bool) {
            let readings = Mutex<[UInt64]>([3_000_000_000, 2_000_000_000, 2_000_000_000])
            let sessions = PageSessions<String>(capacity: atCapacity ? 1 : 100, now: {
                readings.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
            })
            let cookie = sessions.start("alice", credentialStamp: "stamp")
            if atCapacity {
                _ = sessions.start("bob", credentialStamp: "stamp")
            } else {
                precondition(sessions.session(cookie)?.subject == "alice", "a session used at an older reading is still alive")
            }
        }

        /// Concurrent requests with one cookie must not stop the server.
        @Test func olderClockReadingOfASessionDoesNotTrap() async {
            await #expect(processExitsWith: .success) { PageSessionsTests.olderClockReading(atCapacity: false) }
        }

        /// The same against a sign-in when the table is full.
        @Test func olderClockReadingAtCapacityDoesNotTrap() async {
            await #expect(processExitsWith: .success) { PageSessionsTests.olderClockReading(atCapacity: true) }
        }
    }

    /// The comparison of CSRF tokens.
    @Suite struct RandomTokenTests {
        /// Equal only for the same bytes: not for another length, nor one byte off.
        @Test func sameComparesBytes() {
            let token = RandomToken.make()
            #expect(RandomToken.same(token, String(decoding: Array(token.utf8), as: UTF8.self)))
            #expect(RandomToken.same("", ""))
            #expect(!RandomToken.same(token, String(token.dropLast())))
            #expect(!RandomToken.same(token, token + "0"))
            #expect(!RandomToken.same(token, ""))
            var bytes = Array(token.utf8)
            bytes[31] = bytes[31] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
            #expect(!RandomToken.same(token, String(decoding: bytes, as: UTF8.self)))
            #expect(!RandomToken.same("\u{212A}", "K"), "bytes, not canonical equivalence")
        }
    }

    /// Reading the forms the pages post (`application/x-www-form-urlencoded`).
    @Suite struct FormBodyTests {
        /// `+` is a space; fields are found by name; an absent one is nil.
        @Test func parsesFields() throws {
            let form = try FormBody.parse("a=1&b=two+words")
            #expect(form["a"] == "1")
            #expect(form["b"] == "two words")
            #expect(form["c"] == nil)
        }

        /// Percent-encoded UTF-8 is decoded, and `%2B` is a literal `+` (not a space).
        @Test func decodesPercentEncoding() throws {
            let form = try FormBody.parse("name=caf%C3%A9&sum=1%2B1&mixed=a+%2B+b&space=a%20b")
            #expect(form["name"] == "caf\u{E9}")
            #expect(form["sum"] == "1+1")
            #expect(form["mixed"] == "a + b")
            #expect(form["space"] == "a b")
        }

        /// A field given twice is a 400 that names the field.
        @Test func refusesAFieldGivenTwice() {
            let refusal = #expect(throws: Refusal.self) { try FormBody.parse("csrf=1&reason=x&csrf=2") }
            #expect(refusal?.status == .badRequest)
            #expect(refusal?.message.contains("csrf") == true, "\(refusal?.message ?? "")")
        }

        /// A malformed percent-encoding, in a value or a name, is a 400.
        @Test(arguments: ["a=%zz", "a=%", "a=%4", "%zz=1", "a=1&b=%G0"])
        func refusesMalformedPercentEncoding(_ text: String) {
            let refusal = #expect(throws: Refusal.self) { try FormBody.parse(text) }
            #expect(refusal?.status == .badRequest)
        }

        /// An empty value (`a=`, or a bare `a`) reads as ""; `required` refuses it, and an absent
        /// field, with a 400 that names the field.
        @Test func emptyValueIsNotRequiredValue() throws {
            let form = try FormBody.parse("reason=&bare&&id=r1")
            #expect(form["reason"] == "")
            #expect(form["bare"] == "")
            #expect(try form.required("id") == "r1")
            let empty = #expect(throws: Refusal.self) { try form.required("reason") }
            #expect(empty?.status == .badRequest)
            #expect(empty?.message.contains("reason") == true)
            let absent = #expect(throws: Refusal.self) { try form.required("token") }
            #expect(absent?.status == .badRequest)
            #expect(absent?.message.contains("token") == true)
        }

        /// Values keep their exact bytes: a decomposed é stays decomposed, whether it came
        /// percent-encoded or not.
        @Test func keepsExactBytes() throws {
            let form = try FormBody.parse("encoded=e%CC%81&raw=e\u{301}&composed=%C3%A9")
            #expect(form["encoded"].map { Array($0.utf8) } == Array("e\u{301}".utf8))
            #expect(form["raw"].map { Array($0.utf8) } == Array("e\u{301}".utf8))
            #expect(form["encoded"].map { Array($0.utf8) } != Array("\u{E9}".utf8))
            #expect(form["composed"].map { Array($0.utf8) } == Array("\u{E9}".utf8))
        }

        private static func request(contentType: String?, body: String) -> Request {
            var head = HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/console/users")
            if let contentType { head.headerFields[.contentType] = contentType }
            return Request(head: head, body: RequestBody(buffer: ByteBuffer(string: body)))
        }

        /// `read` takes the body of a form post (with or without a charset), refuses another content
        /// type and a body over the limit.
        @Test func readsAPostedForm() async throws {
            let form = try await FormBody.read(Self.request(contentType: "application/x-www-form-urlencoded; charset=UTF-8", body: "a=1&b=two+words"))
            #expect(form["b"] == "two words")

            for type in ["application/json", "multipart/form-data; boundary=x", nil] as [String?] {
                await #expect(throws: Refusal.self, "\(type ?? "no content type")") {
                    try await FormBody.read(Self.request(contentType: type, body: "a=1"))
                }
            }
            let refusal = await #expect(throws: Refusal.self) {
                try await FormBody.read(Self.request(contentType: "application/x-www-form-urlencoded", body: "a=" + String(repeating: "x", count: FormBody.limit)))
            }
            #expect(refusal?.status == .contentTooLarge)

            let twice = await #expect(throws: Refusal.self) {
                try await FormBody.read(Self.request(contentType: "application/x-www-form-urlencoded", body: "a=1&a=2"))
            }
            #expect(twice?.status == .badRequest)
        }

        /// `query` reads a page address's query as a form.
        @Test func readsAQuery() throws {
            var head = HTTPRequest(method: .get, scheme: "http", authority: "localhost", path: "/console/audit?user=caf%C3%A9&before=12")
            head.headerFields[.accept] = "text/html"
            let form = try FormBody.query(Request(head: head, body: RequestBody(buffer: ByteBuffer())))
            #expect(form["user"] == "caf\u{E9}")
            #expect(form["before"] == "12")
        }
    }
}
