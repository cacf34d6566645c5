import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP
import MidtierStore
import MidtierTestSupport
import NIOCore
import Synchronization
import Testing

@testable import WebPages

/// A wall clock the tests move by hand, in milliseconds since 1970 (what `PageSessions` takes
/// as `now:`).
private final class PageClock: Sendable {
    private let milliseconds = Mutex<Int64>(1_800_000_000_000)

    var now: Int64 { milliseconds.withLock { $0 } }

    func advance(seconds: Int64) { milliseconds.withLock { $0 += seconds * 1000 } }
    func set(_ value: Int64) { milliseconds.withLock { $0 = value } }
}

/// Whether `text` is 64 lower-case hex digits, as session ids and CSRF tokens are.
private func isLowerHex64(_ text: String) -> Bool {
    text.utf8.count == 64
        && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
}

/// What the pages for people (the admin console, the self-service page) are built on: their
/// sessions, the comparison of their tokens, and the reading of their forms.
@Suite(.timeLimit(.minutes(10))) struct WebPagesTests {}

extension WebPagesTests {
    /// The server-side sessions of the console and the self-service page (docs/console.md,
    /// "Sessions"), kept in the store — SQLite and PostgreSQL —, on a clock the test moves.
    @Suite struct PageSessionsTests {
        static let idle: Int64 = 60
        static let lifetime: Int64 = 600

        private static func sessions(
            _ store: any StateStore, _ clock: PageClock, site: String = "console", capacity: Int = 100,
            perSubject: Int = 5
        ) -> PageSessions<String> {
            PageSessions<String>(
                store: store, site: site, idleSeconds: Int(idle), lifetimeSeconds: Int(lifetime), capacity: capacity,
                perSubject: perSubject, clock: WallClock { clock.now })
        }

        /// The cookie value `start` returns names the session, and only it; the store keeps only
        /// its SHA-256.
        @Test(arguments: StoreKind.allCases) func startedSessionIsFoundByItsCookie(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock)
                let alice = try await sessions.start("alice", credentialStamp: "stamp")
                let bob = try await sessions.start("bob", credentialStamp: "stamp")
                #expect(try await sessions.session(alice)?.subject == "alice")
                #expect(try await sessions.session(bob)?.subject == "bob")
                #expect(sessions.idleSeconds == Int(Self.idle))
                let raw = try await test.open(cached: false)
                #expect(
                    try await raw.usePageSession(key: alice, site: "console", now: clock.now, takingNotice: false) == nil,
                    "the cookie value is no key")
                let stored = try #require(
                    try await raw.usePageSession(
                        key: PageSessions<String>.digest(alice), site: "console",
                        now: clock.now, takingNotice: false))
                #expect(stored.subject == UserIdentity(realm: "", id: "alice"))
                #expect(stored.key != alice && isLowerHex64(stored.key))
            }
        }

        /// A session of one site (the console) is nothing to the other (the self-service page).
        @Test(arguments: StoreKind.allCases) func sitesAreApart(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let store = try await test.open()
                let console = Self.sessions(store, clock, site: "console")
                let me = PageSessions<UserIdentity>(store: store, site: "me", clock: WallClock { clock.now })
                let admin = try await console.start("admin#1", credentialStamp: "stamp")
                let user = try await me.start(UserIdentity(realm: "https://idp", id: "alice"), credentialStamp: "stamp")
                #expect(try await me.session(admin) == nil)
                #expect(try await console.session(user) == nil)
                try await me.end(admin)
                #expect(try await console.session(admin)?.subject == "admin#1", "another site's end does not end it")
                #expect(try await me.session(user)?.subject == UserIdentity(realm: "https://idp", id: "alice"))
            }
        }

        /// An unknown cookie, none, an empty one, or one that is not 64 lower-case hex digits
        /// (upper case, too short, too long, other characters) finds nothing, and does not end the
        /// real session.
        @Test(arguments: StoreKind.allCases) func unknownOrMalformedCookiesFindNothing(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock)
                let cookie = try await sessions.start("alice", credentialStamp: "stamp")
                let malformed: [String?] = [
                    nil, "", RandomToken.make(),
                    cookie.uppercased(), String(cookie.dropLast()), cookie + "0", " " + cookie,
                    String(cookie.dropLast()) + "g", String(cookie.dropLast()) + "\u{E9}",
                    String(repeating: "0", count: 64),
                ]
                for candidate in malformed {
                    #expect(try await sessions.session(candidate) == nil, "\(String(describing: candidate))")
                    try await sessions.end(candidate)
                }
                #expect(try await sessions.session(cookie)?.subject == "alice")
            }
        }

        /// A session ends `idleSeconds` after its last use; each use keeps it alive, here well past
        /// one idle period (but within the lifetime).
        @Test(arguments: StoreKind.allCases) func idleSessionEndsButUseKeepsItAlive(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock)
                let cookie = try await sessions.start("alice", credentialStamp: "stamp")
                for touch in 1...9 {
                    clock.advance(seconds: Self.idle - 1)
                    #expect(try await sessions.session(cookie) != nil, "use \(touch), \(Int64(touch) * (Self.idle - 1)) s after the start")
                }
                clock.advance(seconds: Self.idle)
                #expect(try await sessions.session(cookie) == nil, "idle for idleSeconds")

                let untouched = try await sessions.start("bob", credentialStamp: "stamp")
                clock.advance(seconds: Self.idle)
                #expect(try await sessions.session(untouched) == nil, "never used after sign-in")
            }
        }

        /// A session ends `lifetimeSeconds` after sign-in even when it is used all the time.
        @Test(arguments: StoreKind.allCases) func sessionEndsAfterItsLifetimeEvenWhenUsed(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock)
                let cookie = try await sessions.start("alice", credentialStamp: "stamp")
                var elapsed: Int64 = 0
                while elapsed + Self.idle - 1 < Self.lifetime {
                    clock.advance(seconds: Self.idle - 1)
                    elapsed += Self.idle - 1
                    #expect(try await sessions.session(cookie) != nil, "\(elapsed) s after the start")
                }
                clock.advance(seconds: Self.lifetime - elapsed)
                #expect(try await sessions.session(cookie) == nil, "lifetimeSeconds after the start, though used \(Self.lifetime - elapsed) s ago")
            }
        }

        /// `end` ends the session its cookie names, and no other; on every instance sharing the
        /// store at once (the sessions of another instance on the same data, a cache in front).
        @Test(arguments: StoreKind.allCases) func endEndsTheSessionOnEveryInstance(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let here = Self.sessions(try await test.open(), clock)
                let there = Self.sessions(try await test.open(), clock)
                let alice = try await here.start("alice", credentialStamp: "stamp")
                let bob = try await here.start("bob", credentialStamp: "stamp")
                let aliceThere = try #require(try await there.session(alice), "opened here, used there")
                #expect(aliceThere.subject == "alice")
                #expect(try await there.session(alice)?.csrfToken == (try await here.session(alice))?.csrfToken, "one CSRF token everywhere")
                try await there.end(alice)
                #expect(try await here.session(alice) == nil, "ended there: ended here")
                #expect(try await here.session(bob)?.subject == "bob")
                try await here.end(alice)
            }
        }

        /// Sessions survive a restart (a store opened again on the same data).
        @Test(arguments: StoreKind.allCases) func sessionsSurviveARestart(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let cookie = try await Self.sessions(try await test.open(), clock).start("alice", credentialStamp: "stamp")
                clock.advance(seconds: 1)
                #expect(try await Self.sessions(try await test.open(), clock).session(cookie)?.subject == "alice")
            }
        }

        /// `isStamped` holds for the exact stamp the session started with: not for another, nor for
        /// one Swift's `==` calls equal by Unicode canonical equivalence (KELVIN SIGN and K).
        @Test(arguments: StoreKind.allCases) func stampComparesExactBytes(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                #expect("\u{212A}" == "K", "the premise: String == merges the two")
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock)
                let kelvin = try #require(try await sessions.session(try await sessions.start("alice", credentialStamp: "hash-\u{212A}")))
                #expect(kelvin.isStamped("hash-\u{212A}"))
                #expect(!kelvin.isStamped("hash-K"))
                #expect(!kelvin.isStamped("hash-\u{212A} "))
                #expect(!kelvin.isStamped(""))
                let plain = try #require(try await sessions.session(try await sessions.start("alice", credentialStamp: "hash-K")))
                #expect(plain.isStamped("hash-K"))
                #expect(!plain.isStamped("hash-\u{212A}"))
                #expect(!plain.isStamped("hash-k"))
            }
        }

        /// A notice left for a session is given once, to that session only, on whichever instance
        /// serves the next page.
        @Test(arguments: StoreKind.allCases) func noticeIsGivenOnce(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock)
                let other = Self.sessions(try await test.open(), clock)
                let alice = try await sessions.start("alice", credentialStamp: "stamp")
                let bob = try await sessions.start("bob", credentialStamp: "stamp")
                #expect(try await sessions.session(alice, takingNotice: true)?.notice == nil)
                try await sessions.leaveNotice("bob is blocked", for: alice)
                #expect(try await sessions.session(bob, takingNotice: true)?.notice == nil)
                #expect(try await sessions.session(alice)?.notice == nil, "only given when taken")
                #expect(try await other.session(alice, takingNotice: true)?.notice == "bob is blocked")
                #expect(try await sessions.session(alice, takingNotice: true)?.notice == nil, "gone once taken")
                try await sessions.leaveNotice("lost", for: nil)
                #expect(try await sessions.session(alice)?.subject == "alice", "taking the notice does not end the session")
            }
        }

        /// Every session has its own cookie value and CSRF token, each 64 lower-case hex digits.
        @Test(arguments: StoreKind.allCases) func sessionsGetDistinctRandomTokens(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock)
                let first = try await sessions.start("alice", credentialStamp: "stamp")
                let second = try await sessions.start("alice", credentialStamp: "stamp")
                let firstToken = try #require(try await sessions.session(first)?.csrfToken)
                let secondToken = try #require(try await sessions.session(second)?.csrfToken)
                for token in [first, second, firstToken, secondToken] {
                    #expect(isLowerHex64(token), "\(token)")
                }
                #expect(first != second)
                #expect(firstToken != secondToken)
                #expect(Set([first, second, firstToken, secondToken]).count == 4, "a CSRF token is not a session id")
            }
        }

        /// At capacity, a new session evicts the least recently used one (by last use, not by
        /// sign-in), and no other.
        @Test(arguments: StoreKind.allCases) func fullTableEvictsTheLeastRecentlyUsed(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock, capacity: 3)
                let a = try await sessions.start("a", credentialStamp: "stamp")
                clock.advance(seconds: 1)
                let b = try await sessions.start("b", credentialStamp: "stamp")
                clock.advance(seconds: 1)
                let c = try await sessions.start("c", credentialStamp: "stamp")
                clock.advance(seconds: 1)
                #expect(try await sessions.session(a) != nil, "a is now the most recently used; b the least")
                clock.advance(seconds: 1)
                let d = try await sessions.start("d", credentialStamp: "stamp")
                #expect(try await sessions.session(b) == nil, "evicted")
                #expect(try await sessions.session(a)?.subject == "a")
                #expect(try await sessions.session(c)?.subject == "c")
                #expect(try await sessions.session(d)?.subject == "d")
            }
        }

        /// One person signing in over and over holds at most `perSubject` sessions: their least
        /// recently used one ends, nobody else's (a full table would otherwise push everybody
        /// else out).
        @Test(arguments: StoreKind.allCases) func onePersonHoldsAtMostPerSubjectSessions(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock, capacity: 4, perSubject: 2)
                let bob = try await sessions.start("bob", credentialStamp: "stamp")
                let first = try await sessions.start("mallory", credentialStamp: "stamp")
                clock.advance(seconds: 1)
                let second = try await sessions.start("mallory", credentialStamp: "stamp")
                clock.advance(seconds: 1)
                #expect(try await sessions.session(first) != nil, "used: now the more recent of the two")
                var last = ""
                for _ in 0..<20 {
                    clock.advance(seconds: 1)
                    last = try await sessions.start("mallory", credentialStamp: "stamp")
                }
                #expect(try await sessions.session(bob)?.subject == "bob", "the oldest of the table, and kept")
                #expect(try await sessions.session(first) == nil, "mallory's older ones ended")
                #expect(try await sessions.session(second) == nil)
                #expect(try await sessions.session(last)?.subject == "mallory")
            }
        }

        /// A session opened with a credential that expires sooner (a token's `exp`) ends then.
        @Test(arguments: StoreKind.allCases) func sessionEndsWithItsCredential(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = PageSessions<String>(
                    store: try await test.open(), site: "me", idleSeconds: 900, lifetimeSeconds: 28_800,
                    clock: WallClock { clock.now })
                let cookie = try await sessions.start("alice", credentialStamp: "issuer", validSeconds: 120)
                clock.advance(seconds: 119)
                #expect(try await sessions.session(cookie) != nil)
                clock.advance(seconds: 1)
                #expect(try await sessions.session(cookie) == nil, "the token it was opened with has expired")
                let expired = try await sessions.start("alice", credentialStamp: "issuer", validSeconds: -5)
                #expect(try await sessions.session(expired) == nil, "a token already expired opens nothing lasting")
            }
        }

        /// At capacity, sessions that are over anyway go first, before a live one is evicted.
        @Test(arguments: StoreKind.allCases) func fullTableDropsEndedSessionsFirst(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock, capacity: 3)
                let a = try await sessions.start("a", credentialStamp: "stamp")
                clock.advance(seconds: Self.idle - 10)
                let b = try await sessions.start("b", credentialStamp: "stamp")
                let c = try await sessions.start("c", credentialStamp: "stamp")
                clock.advance(seconds: 10)
                let d = try await sessions.start("d", credentialStamp: "stamp")
                #expect(try await sessions.session(a) == nil, "idle for idleSeconds")
                #expect(try await sessions.session(b)?.subject == "b")
                #expect(try await sessions.session(c)?.subject == "c")
                #expect(try await sessions.session(d)?.subject == "d")
            }
        }

        /// A clock reading older than a session's last use (another instance's clock a little
        /// behind, or a clock that went back) counts as no time passed: the session lives on and
        /// its last use does not move back.
        @Test(arguments: StoreKind.allCases) func olderClockReadingKeepsTheSession(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock, capacity: 1)
                let cookie = try await sessions.start("alice", credentialStamp: "stamp")
                clock.advance(seconds: Self.idle - 1)
                #expect(try await sessions.session(cookie) != nil)
                let later = clock.now
                clock.set(later - 3_600_000)
                #expect(try await sessions.session(cookie) != nil, "an hour behind")
                clock.set(later + (Self.idle - 1) * 1000)
                #expect(try await sessions.session(cookie) != nil, "idle counted from the latest use, not moved back")
                clock.set(later - 7_200_000)
                _ = try await sessions.start("bob", credentialStamp: "stamp")
            }
        }

        /// The store fails: every operation says so (the pages answer 503), none traps.
        @Test(arguments: StoreKind.allCases) func storeFailureIsAnError(_ kind: StoreKind) async throws {
            try await withTestStore(kind) { test in
                let clock = PageClock()
                let sessions = Self.sessions(try await test.open(), clock)
                let cookie = try await sessions.start("alice", credentialStamp: "stamp")
                let table = kind == .sqlite ? "page_session" : "midtier_page_session"
                try await test.execute("ALTER TABLE \(table) RENAME TO broken")
                await #expect(throws: StoreError.self) { try await sessions.session(cookie) }
                await #expect(throws: StoreError.self) { try await sessions.start("bob", credentialStamp: "stamp") }
                await #expect(throws: StoreError.self) { try await sessions.end(cookie) }
                try await test.execute("ALTER TABLE broken RENAME TO \(table)")
                #expect(try await sessions.session(cookie)?.subject == "alice")
            }
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
                try await FormBody.read(
                    Self.request(contentType: "application/x-www-form-urlencoded", body: "a=" + String(repeating: "x", count: FormBody.limit)))
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
