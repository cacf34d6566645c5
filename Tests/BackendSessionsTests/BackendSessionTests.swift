import Foundation
import Logging
import MidtierCore
import MidtierStore
import MidtierTestSupport
import Testing

@testable import BackendSessions

/// Back-end sessions (docs/operations.md): the jar in memory, sealed copies in the store, and
/// two instances continuing one session — on SQLite and PostgreSQL alike.
@Suite(.timeLimit(.minutes(10))) struct BackendSessionTests {
    static let key1 = BackendSessionKey(bytes: Array(repeating: 1, count: 32))!
    static let key2 = BackendSessionKey(bytes: Array(repeating: 2, count: 32))!
    static let logger = Logger(label: "test-sessions")

    @Test func sealerOpensOnlyItsOwnRowsAndRotatesKeys() throws {
        let old = try #require(SessionSealer(keys: [Self.key1]))
        let sealed = try old.seal(Array("SAP_SESSIONID=secret".utf8), registration: "r1", destination: "gw")
        #expect(!String(decoding: sealed, as: UTF8.self).contains("secret"), "sealed bytes hold no cookie in clear")
        #expect(try old.open(sealed, registration: "r1", destination: "gw") == Array("SAP_SESSIONID=secret".utf8))
        #expect(throws: SessionSealer.Failure.notAuthentic, "moved to another registration") {
            try old.open(sealed, registration: "r2", destination: "gw")
        }
        #expect(throws: SessionSealer.Failure.notAuthentic, "moved to another destination") {
            try old.open(sealed, registration: "r1", destination: "gw2")
        }
        #expect(throws: SessionSealer.Failure.notAuthentic, "the pair is length-prefixed") {
            try old.open(sealed, registration: "r1g", destination: "w")
        }
        var tampered = sealed
        tampered[tampered.count - 20] ^= 1
        #expect(throws: SessionSealer.Failure.notAuthentic) { try old.open(tampered, registration: "r1", destination: "gw") }
        #expect(throws: SessionSealer.Failure.malformed) { try old.open([1, 2, 3], registration: "r1", destination: "gw") }

        // Rotation: the new key first seals; the old one second still opens what it sealed.
        let rotating = try #require(SessionSealer(keys: [Self.key2, Self.key1]))
        #expect(try rotating.open(sealed, registration: "r1", destination: "gw") == Array("SAP_SESSIONID=secret".utf8))
        let resealed = try rotating.seal([7], registration: "r1", destination: "gw")
        #expect(throws: SessionSealer.Failure.unknownKey, "the old key alone cannot open what the new one sealed") {
            try old.open(resealed, registration: "r1", destination: "gw")
        }
        let rotated = try #require(SessionSealer(keys: [Self.key2]))
        #expect(throws: SessionSealer.Failure.unknownKey, "a key taken out of the list opens nothing") {
            try rotated.open(sealed, registration: "r1", destination: "gw")
        }
        #expect(SessionSealer(keys: []) == nil)
    }

    @Test func jarKeepsDeletesAndSeparatesSessions() {
        let jar = BackendCookieJar()
        let a = BackendCookieJar.Key(registration: "a", destination: "gw")
        let b = BackendCookieJar.Key(registration: "b", destination: "gw")
        #expect(
            jar.store(
                ["SAP_SESSIONID=s1; path=/; HttpOnly", "sap-usercontext=sap-client=100; path=/"], for: a, requestPath: "/sap/x", startedAt: jar.clock)?
                .cookies.count == 2)
        #expect(jar.cookieHeader(for: a, path: "/sap/opu") == "SAP_SESSIONID=s1; sap-usercontext=sap-client=100")
        #expect(jar.cookieHeader(for: b, path: "/sap/opu") == nil, "another registration has no session")
        #expect(
            jar.store(["SAP_SESSIONID=s1; path=/"], for: a, requestPath: "/sap/x", startedAt: jar.clock) == nil,
            "the same cookie again changes nothing")
        jar.store(["SAP_SESSIONID=; expires=Thu, 01 Jan 1970 00:00:00 GMT; path=/"], for: a, requestPath: "/sap/x", startedAt: jar.clock)
        #expect(jar.cookieHeader(for: a, path: "/sap/opu") == "sap-usercontext=sap-client=100")
        jar.store(["scoped=1; Path=/only"], for: a, requestPath: "/x", startedAt: jar.clock)
        #expect(jar.cookieHeader(for: a, path: "/other")?.contains("scoped") == false)
        #expect(jar.cookieHeader(for: a, path: "/only/here")?.contains("scoped=1") == true)
        jar.store(["gone=1; Max-Age=0"], for: a, requestPath: "/", startedAt: jar.clock)
        #expect(jar.cookieHeader(for: a, path: "/")?.contains("gone") == false)

        // Registration ids compare by bytes: a canonically equivalent id is another registration.
        let composed = BackendCookieJar.Key(registration: "caf\u{E9}", destination: "gw")
        let decomposed = BackendCookieJar.Key(registration: "cafe\u{301}", destination: "gw")
        jar.store(["SAP_SESSIONID=mine"], for: composed, requestPath: "/", startedAt: jar.clock)
        #expect(jar.cookieHeader(for: decomposed, path: "/") == nil)
        jar.remove(registration: "cafe\u{301}")
        #expect(jar.cookieHeader(for: composed, path: "/") == "SAP_SESSIONID=mine")

        // An answer to a call that started before the session ended is not kept.
        let started = jar.clock
        jar.remove(registration: "a")
        #expect(jar.store(["SAP_SESSIONID=late"], for: a, requestPath: "/", startedAt: started) == nil)
        #expect(jar.cookieHeader(for: a, path: "/") == nil)
        // Nor is a load from the store that started before another instance changed the jar.
        let loading = jar.clock
        jar.forget(b)
        let read = [BackendCookieJar.Cookie(name: "old", value: "1", path: "/", expiresAt: nil)]
        #expect(jar.load(read, for: b, startedAt: loading) == .superseded)
        #expect(!jar.holds(b))
        #expect(BackendCookieJar.header(read, path: "/x", now: 0) == "old=1", "what was read still serves the call that read it")
        #expect(jar.load(read, for: a, startedAt: started) == .ended, "an ended registration's read serves nothing")
        #expect(jar.load(read, for: b, startedAt: jar.clock) == .kept)
        #expect(jar.cookieHeader(for: b, path: "/x") == "old=1")
        // A read that started before an answer changed the jar does not replace it.
        let reading = jar.clock
        let change = jar.store(["new=2"], for: b, requestPath: "/", startedAt: jar.clock)
        #expect(jar.load(read, for: b, startedAt: reading) == .older)
        #expect(jar.cookieHeader(for: b, path: "/x") == "new=2; old=1")
        // Changes carry stamps that only grow.
        let next = jar.store(["new=3"], for: b, requestPath: "/", startedAt: jar.clock)
        #expect(change != nil && next != nil && next!.stamp > change!.stamp)
        #expect(jar.store(["new=3"], for: b, requestPath: "/", startedAt: jar.clock) == nil, "no change, nothing to save")
        // forgetAll also guards reads under way.
        let beforeAll = jar.clock
        jar.forgetAll()
        #expect(jar.load(read, for: composed, startedAt: beforeAll) == .superseded)
    }

    /// A full jar lets go of jars not used lately, a bounded look at a time (no sort of all jars
    /// under the lock every call takes): the count stays at the capacity, a jar used since the
    /// clock last passed stays, and ending a registration's sessions drops exactly the jars it
    /// still has, whichever went before (docs/operations.md, "Memory").
    @Test func aFullJarLetsGoOfUnusedJarsAndEndsExactlyARegistrationsSessions() {
        let jar = BackendCookieJar(capacity: 100)
        func key(_ registration: Int, _ destination: String) -> BackendCookieJar.Key {
            BackendCookieJar.Key(registration: "r\(registration)", destination: destination)
        }
        let hot = BackendCookieJar.Key(registration: "hot", destination: "gw")
        jar.store(["s=hot"], for: hot, requestPath: "/", startedAt: jar.clock)
        for n in 0..<150 {
            for destination in ["gw", "sf"] {
                jar.store(["s=\(n)"], for: key(n, destination), requestPath: "/", startedAt: jar.clock)
                #expect(jar.count <= 101, "bounded at every step")
                _ = jar.cookies(for: hot)
            }
        }
        #expect(jar.count == 100)
        #expect(jar.cookieHeader(for: hot, path: "/") == "s=hot", "used at every step: never let go")
        #expect(jar.holds(key(149, "gw")) && jar.holds(key(149, "sf")), "the newest stay")
        #expect(!jar.holds(key(0, "gw")), "an old unused jar went")
        var count = jar.count
        for n in 0..<150 {
            let held = ["gw", "sf"].filter { jar.holds(key(n, $0)) }.count
            jar.remove(registration: "r\(n)")
            count -= held
            #expect(jar.count == count, "r\(n): exactly its \(held) jars")
        }
        #expect(jar.count == 1 && jar.holds(hot))
        // The ended marks are bounded too, and a late answer for a registration ended last is dropped.
        let started = jar.clock
        for n in 0..<300 { jar.remove(registration: "gone\(n)") }
        #expect(
            jar.store(["s=late"], for: BackendCookieJar.Key(registration: "gone299", destination: "gw"), requestPath: "/", startedAt: started) == nil)
    }

    /// A change made on top of another instance's session is stamped after it, even when both
    /// came within the same millisecond: the store keeps the later of the two.
    @Test func aChangeIsStampedAfterTheSessionItWasMadeOn() throws {
        let jar = BackendCookieJar(wallClock: WallClock { 1_800_000_000_000 })
        let key = BackendCookieJar.Key(registration: "r1", destination: "gw")
        let theirs: Int64 = 1_800_000_000_000 * 1000 + 5
        #expect(jar.load([.init(name: "s", value: "1", path: "/", expiresAt: nil)], stamp: theirs, for: key, startedAt: jar.clock) == .kept)
        let held = try #require(jar.session(for: key))
        #expect(held.stamp == theirs)
        let mine = try #require(jar.store(["s=2"], for: key, requestPath: "/", startedAt: jar.clock))
        #expect(mine.stamp > theirs)
        // Memory lost the jar while a call ran: the answer builds on what the call was sent.
        jar.forget(key)
        let late = try #require(
            jar.store(
                ["t=1"], for: key, requestPath: "/", startedAt: jar.clock,
                sent: held.cookies, sentStamp: theirs + 100))
        #expect(late.stamp > theirs + 100)
        #expect(late.cookies.map(\.name) == ["s", "t"])
    }

    @Test(arguments: StoreKind.allCases) func storeKeepsSealedSessionsWhileTheRegistrationIsActive(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            let audit = AuditEntry(at: 1_000, actor: "admin#1", action: "registration.lock", target: "r1")
            #expect(
                try await store.insert(Registration(id: "r1", appId: "demo", user: .local("alice"), createdAt: 1), maximumPerUser: nil, audit: nil)
                    == .inserted)
            func session(_ sealed: [UInt8], stamp: Int64, expiresAt: Int64? = nil, registration: String = "r1") -> SealedBackendSession {
                SealedBackendSession(registration: registration, destination: "gw", sealed: sealed, expiresAt: expiresAt, stamp: stamp)
            }
            let first = session([1, 0, 255, 7], stamp: 10)
            #expect(try await store.saveBackendSession(first, now: 1_000) == .saved)
            #expect(try await store.backendSession(registration: "r1", destination: "gw", now: 1_000) == first)
            #expect(try await store.backendSession(registration: "r1", destination: "other", now: 1_000) == nil)
            #expect(try await store.backendSession(registration: "R1", destination: "gw", now: 1_000) == nil, "ids compare by bytes")

            let expiring = session([2], stamp: 20, expiresAt: 5_000)
            #expect(try await store.saveBackendSession(expiring, now: 1_000) == .saved, "a save replaces the session before")
            #expect(try await store.saveBackendSession(session([3], stamp: 15), now: 1_000) == .stale, "an older answer saved late changes nothing")
            #expect(try await store.saveBackendSession(session([3], stamp: 20), now: 1_000) == .stale)
            #expect(try await store.backendSession(registration: "r1", destination: "gw", now: 4_999) == expiring)
            #expect(try await store.backendSession(registration: "r1", destination: "gw", now: 5_000) == nil, "expired as the back end said")
            #expect(
                try await store.saveBackendSession(session([4], stamp: 1), now: 6_000) == .saved, "an expired session is gone, whatever its stamp")

            #expect(try await store.saveBackendSession(session([5], stamp: 30), now: 6_000) == .saved)
            _ = try await store.transition(id: "r1", to: .locked, allowedFrom: [.active], audit: audit)
            #expect(try await store.backendSession(registration: "r1", destination: "gw", now: 6_000) == nil, "a lock ends the sessions")
            #expect(try await store.saveBackendSession(session([6], stamp: 40), now: 6_000) == .inactive, "a locked registration keeps none")
            #expect(try await store.saveBackendSession(session([1], stamp: 50, registration: "nobody"), now: 6_000) == .inactive)

            _ = try await store.transition(id: "r1", to: .active, allowedFrom: [.locked], audit: audit)
            #expect(try await store.saveBackendSession(session([7], stamp: 1), now: 6_000) == .saved, "a lock ended the old one, stamp and all")
            _ = try await store.delete(id: "r1", allowedFrom: [.active], audit: nil)
            #expect(try await store.backendSession(registration: "r1", destination: "gw", now: 6_000) == nil, "a deletion ends the sessions")
        }
    }

    /// Two instances on one store: a session one starts, the other continues; a write (a
    /// modifying call) sees the newest session even when the other holds an older one.
    @Test(arguments: StoreKind.allCases) func twoInstancesContinueOneSession(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let storeA = try await test.open(cached: false), storeB = try await test.open(cached: false)
            #expect(
                try await storeA.insert(Registration(id: "r1", appId: "demo", user: .local("alice"), createdAt: 1), maximumPerUser: nil, audit: nil)
                    == .inserted)
            // In the middle of a key rotation: A seals with the old key, B with the new; both open both.
            // Both instances' wall clocks stand still: every answer below comes within the same
            // millisecond, as on a fast machine, and each still replaces the one it followed.
            let frozen = WallClock { 1_800_000_000_000 }
            let a = BackendSessions(store: storeA, keys: [Self.key1, Self.key2], logger: Self.logger, wallClock: frozen)
            let b = BackendSessions(store: storeB, keys: [Self.key2, Self.key1], logger: Self.logger, wallClock: frozen)

            let early = await b.begin(registration: "r1", destination: "gw", path: "/sap/opu/odata/x", modifying: false)
            #expect(early.cookieHeader == nil)
            #expect(b.jar.holds(early.key), "an empty session is held, so the next read costs no store round trip")

            let fetch = await a.begin(registration: "r1", destination: "gw", path: "/sap/opu/odata/x", modifying: false)
            await a.finish(fetch, setCookies: ["SAP_SESSIONID=csrf-session; path=/", "sap-usercontext=sap-client=100; path=/"])
            let write = await b.begin(registration: "r1", destination: "gw", path: "/sap/opu/odata/x", modifying: true)
            #expect(write.cookieHeader == "SAP_SESSIONID=csrf-session; sap-usercontext=sap-client=100")

            // B renews the session; A, told by the change feed, reads it again.
            await b.finish(write, setCookies: ["SAP_SESSIONID=renewed; path=/"])
            a.changed(registration: "r1", destination: "gw")
            #expect(
                await a.begin(registration: "r1", destination: "gw", path: "/sap/x", modifying: false).cookieHeader
                    == "SAP_SESSIONID=renewed; sap-usercontext=sap-client=100")

            // An answer that renews one cookie while memory lost the jar (another instance's
            // notice, say) keeps the others: it applies to what the call was sent.
            let renewing = await a.begin(registration: "r1", destination: "gw", path: "/sap/x", modifying: false)
            a.changed(registration: "r1", destination: "gw")
            await a.finish(renewing, setCookies: ["sap-usercontext=sap-client=200; path=/"])
            #expect(
                await b.begin(registration: "r1", destination: "gw", path: "/sap/x", modifying: true).cookieHeader
                    == "SAP_SESSIONID=renewed; sap-usercontext=sap-client=200", "both cookies in the store")

            // Another registration never gets them.
            #expect(await a.begin(registration: "r2", destination: "gw", path: "/sap/x", modifying: true).cookieHeader == nil)

            // Without keys, sessions stay in memory: nothing reaches the store.
            let plain = BackendSessions(store: storeA, keys: [], logger: Self.logger)
            let call = await plain.begin(registration: "r1", destination: "other", path: "/", modifying: false)
            await plain.finish(call, setCookies: ["only=memory"])
            #expect(try await storeA.backendSession(registration: "r1", destination: "other", now: 0) == nil)
            #expect(await plain.begin(registration: "r1", destination: "other", path: "/", modifying: true).cookieHeader == "only=memory")
        }
    }
}
