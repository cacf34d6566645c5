import Crypto
import Foundation
package import MidtierCore
package import MidtierStore

/// Who a page session belongs to, as the store keeps it (a realm and an id).
package protocol PageSessionSubject: Hashable, Sendable {
    var storedIdentity: UserIdentity { get }
    init(storedIdentity: UserIdentity)
}

/// A console session's admin (`admin#N`), stored in the realm "".
extension String: PageSessionSubject {
    package var storedIdentity: UserIdentity { UserIdentity(realm: "", id: self) }
    package init(storedIdentity: UserIdentity) { self = storedIdentity.id }
}

extension UserIdentity: PageSessionSubject {
    package var storedIdentity: UserIdentity { self }
    package init(storedIdentity: UserIdentity) { self = storedIdentity }
}

/// Server-side sessions of the pages for people (the admin console and the self-service page),
/// kept in the store, so that every instance sharing it knows them: behind a load balancer
/// without affinity a person stays signed in, and a sign-out on one instance ends the session
/// on all of them at once (docs/console.md, "Sessions"). Every page request reads the store;
/// page traffic is light.
///
/// The browser holds a random 256-bit session id in an `HttpOnly`, `SameSite=Strict` cookie;
/// the store holds only its SHA-256, so a copy of the database does not hand out live sessions.
/// Each session has its own CSRF token (the synchronizer token every state-changing form
/// carries), ends after `idleSeconds` without a request or `lifetimeSeconds` after sign-in,
/// whichever comes first, at sign-out, and when what it was opened with changes.
package final class PageSessions<Subject: PageSessionSubject>: Sendable {
    /// One signed-in person.
    package struct Session: Sendable {
        package let subject: Subject
        /// The SHA-256 (hex) of what the person signed in with, as it was then (the admin token
        /// list, a password hash, an issuer): the session ends when it changes.
        let credentialStamp: String
        /// The synchronizer token of this session's forms.
        package let csrfToken: String
        /// A one-time message for this page (after a change: "alice is blocked"), when taken.
        package let notice: String?

        /// Whether the session was started with credentials stamped `stamp`.
        package func isStamped(_ stamp: String) -> Bool {
            RandomToken.same(credentialStamp, PageSessions.digest(stamp))
        }
    }

    private let store: any StateStore
    /// Which pages the sessions belong to (`console`, `me`).
    private let site: String
    private let idleMilliseconds: Int64
    private let lifetimeMilliseconds: Int64
    private let bounds: PageSessionBounds
    /// Milliseconds since 1970: sessions are shared by instances, so their clocks must agree.
    private let clock: WallClock

    package let idleSeconds: Int

    /// - Parameter capacity: the most sessions the store keeps for `site`; at it, a sign-in
    ///   ends the least recently used one.
    /// - Parameter perSubject: the most sessions one person may hold; signing in once more ends
    ///   their least recently used one (so that one person signing in over and over cannot push
    ///   everybody else out of a full table).
    package init(
        store: any StateStore, site: String, idleSeconds: Int = 15 * 60, lifetimeSeconds: Int = 8 * 3600,
        capacity: Int = 10_000, perSubject: Int = 5,
        clock: WallClock = .system
    ) {
        self.store = store
        self.site = site
        self.idleSeconds = idleSeconds
        self.idleMilliseconds = Int64(idleSeconds) * 1000
        self.lifetimeMilliseconds = Int64(lifetimeSeconds) * 1000
        self.bounds = PageSessionBounds(capacity: capacity, perSubject: perSubject)
        self.clock = clock
    }

    /// The SHA-256 of `text`, as 64 lower-case hex digits.
    static func digest(_ text: String) -> String { Hex.encode(SHA256.hash(data: Array(text.utf8))) }

    /// Starts a session; returns the cookie value that names it. `validSeconds`: how long the
    /// credential it is opened with stays valid, when less than the lifetime (a token's `exp`).
    package func start(_ subject: Subject, credentialStamp: String, validSeconds: Double? = nil) async throws(StoreError) -> String {
        let id = RandomToken.make()
        let now = clock.now()
        var lifetime = lifetimeMilliseconds
        if let validSeconds { lifetime = min(lifetime, Int64(max(0, min(validSeconds, Double(Int32.max))) * 1000)) }
        let session = StoredPageSession(
            key: Self.digest(id), site: site, subject: subject.storedIdentity,
            credentialStamp: Self.digest(credentialStamp), csrfToken: RandomToken.make(),
            startedAt: now, endsAt: now + lifetime, lastSeen: now, idleMilliseconds: idleMilliseconds)
        try await store.startPageSession(session, bounds: bounds, now: now)
        return id
    }

    /// The live session a cookie value names, if any; using it keeps it alive. With
    /// `takingNotice`, the session's one-time notice comes with it (and is gone then).
    package func session(_ cookie: String?, takingNotice: Bool = false) async throws(StoreError) -> Session? {
        guard let cookie, RandomToken.isWellFormed(cookie) else { return nil }
        guard let stored = try await store.usePageSession(key: Self.digest(cookie), site: site, now: clock.now(), takingNotice: takingNotice) else {
            return nil
        }
        return Session(
            subject: Subject(storedIdentity: stored.subject), credentialStamp: stored.credentialStamp,
            csrfToken: stored.csrfToken, notice: stored.notice)
    }

    /// Ends the session a cookie value names, on every instance.
    package func end(_ cookie: String?) async throws(StoreError) {
        guard let cookie, RandomToken.isWellFormed(cookie) else { return }
        try await store.endPageSession(key: Self.digest(cookie), site: site)
    }

    /// Leaves a one-time message for the session's next page.
    package func leaveNotice(_ notice: String, for cookie: String?) async throws(StoreError) {
        guard let cookie, RandomToken.isWellFormed(cookie) else { return }
        try await store.leavePageNotice(notice, key: Self.digest(cookie), site: site)
    }
}

/// Random tokens for session ids and CSRF tokens: 32 bytes from the system's generator
/// (`getrandom`), as 64 lower-case hex digits (valid in a cookie and a form field as they are).
package enum RandomToken {
    package static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return Hex.encode((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    static func isWellFormed(_ token: String) -> Bool {
        token.utf8.count == 64 && token.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// Whether two tokens are equal, in time that depends on their length only.
    package static func same(_ a: String, _ b: String) -> Bool {
        let a = Array(a.utf8), b = Array(b.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
