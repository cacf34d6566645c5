import Crypto
import Dispatch
import Synchronization

/// Server-side sessions of the pages for people (the admin console and the self-service page),
/// in this process's memory: a restart ends them all, and so does a change of what the person
/// signed in with (docs/console.md, "Sessions").
///
/// The browser holds a random 256-bit session id in an `HttpOnly`, `SameSite=Strict` cookie;
/// memory holds only its SHA-256, so a memory dump does not hand out live sessions. Each session
/// has its own CSRF token (the synchronizer token every state-changing form carries), ends after
/// `idleSeconds` without a request or `lifetimeSeconds` after sign-in, whichever comes first, and
/// at sign-out.
package final class PageSessions<Subject: Hashable & Sendable>: Sendable {
    /// One signed-in person.
    package struct Session: Sendable {
        package let subject: Subject
        /// The SHA-256 of what the person signed in with, as it was then (the admin token
        /// list, a password hash, an issuer): the session ends when it changes.
        let credentialStamp: [UInt8]
        /// The synchronizer token of this session's forms.
        package let csrfToken: String
        let startedAt: UInt64
        /// When it ends whatever happens (`lifetimeSeconds` after sign-in, or earlier when the
        /// credential it was opened with expires sooner).
        let endsAt: UInt64
        var lastSeen: UInt64
        /// A one-time message for the next page (after a change: "alice is blocked").
        var notice: String?

        /// Whether the session was started with credentials stamped `stamp`.
        package func isStamped(_ stamp: String) -> Bool {
            credentialStamp == Array(SHA256.hash(data: Array(stamp.utf8)))
        }
    }

    private let sessions = Mutex<[SessionKey: Session]>([:])
    private let idleNanoseconds: UInt64
    private let lifetimeNanoseconds: UInt64
    private let capacity: Int
    private let perSubject: Int
    private let now: @Sendable () -> UInt64

    package let idleSeconds: Int

    /// - Parameter perSubject: the most sessions one person may hold; signing in once more ends
    ///   their least recently used one (so that one person signing in over and over cannot push
    ///   everybody else out of a full table).
    package init(idleSeconds: Int = 15 * 60, lifetimeSeconds: Int = 8 * 3600, capacity: Int = 10_000, perSubject: Int = 5,
                 now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.idleSeconds = idleSeconds
        self.idleNanoseconds = UInt64(idleSeconds) * 1_000_000_000
        self.lifetimeNanoseconds = UInt64(lifetimeSeconds) * 1_000_000_000
        self.capacity = capacity
        self.perSubject = perSubject
        self.now = now
    }

    /// Starts a session; returns the cookie value that names it. `validSeconds`: how long the
    /// credential it is opened with stays valid, when less than the lifetime (a token's `exp`).
    package func start(_ subject: Subject, credentialStamp: String, validSeconds: Double? = nil) -> String {
        let id = RandomToken.make()
        let stamp = Array(SHA256.hash(data: Array(credentialStamp.utf8)))
        let csrfToken = RandomToken.make()
        sessions.withLock { sessions in
            // The clock is read under the lock: a time read before it could be older than a
            // `lastSeen` another request set meanwhile.
            let now = self.now()
            var lifetime = lifetimeNanoseconds
            if let validSeconds { lifetime = min(lifetime, UInt64(max(0, min(validSeconds, Double(Int32.max))) * 1_000_000_000)) }
            let session = Session(subject: subject, credentialStamp: stamp, csrfToken: csrfToken, startedAt: now,
                                  endsAt: now &+ lifetime, lastSeen: now)
            let own = sessions.filter { $0.value.subject == subject }
            if own.count >= perSubject, let oldest = own.min(by: { $0.value.lastSeen < $1.value.lastSeen }) {
                sessions[oldest.key] = nil
            }
            if sessions.count >= capacity {
                sessions = sessions.filter { !isOver($0.value, at: now) }
                if sessions.count >= capacity, let oldest = sessions.min(by: { $0.value.lastSeen < $1.value.lastSeen }) {
                    sessions[oldest.key] = nil
                }
            }
            sessions[SessionKey(id)] = session
        }
        return id
    }

    /// The live session a cookie value names, if any; using it keeps it alive.
    package func session(_ cookie: String?) -> Session? {
        guard let cookie, RandomToken.isWellFormed(cookie) else { return nil }
        let key = SessionKey(cookie)
        return sessions.withLock { sessions in
            let now = self.now()
            guard var session = sessions[key] else { return nil }
            guard !isOver(session, at: now) else {
                sessions[key] = nil
                return nil
            }
            session.lastSeen = now
            sessions[key] = session
            return session
        }
    }

    /// Ends the session a cookie value names.
    package func end(_ cookie: String?) {
        guard let cookie, RandomToken.isWellFormed(cookie) else { return }
        _ = sessions.withLock { $0.removeValue(forKey: SessionKey(cookie)) }
    }

    /// Leaves a one-time message for the session's next page.
    package func leaveNotice(_ notice: String, for cookie: String?) {
        guard let cookie, RandomToken.isWellFormed(cookie) else { return }
        sessions.withLock { $0[SessionKey(cookie)]?.notice = notice }
    }

    /// The session's one-time message, which is gone once taken.
    package func takeNotice(for cookie: String?) -> String? {
        guard let cookie, RandomToken.isWellFormed(cookie) else { return nil }
        return sessions.withLock { sessions in
            let key = SessionKey(cookie)
            defer { sessions[key]?.notice = nil }
            return sessions[key]?.notice
        }
    }

    package var count: Int { sessions.withLock { $0.count } }

    private func isOver(_ session: Session, at now: UInt64) -> Bool {
        // Saturating: a clock that stood still or went back means no time has passed.
        let idle = now > session.lastSeen ? now - session.lastSeen : 0
        return idle >= idleNanoseconds || now >= session.endsAt
    }
}

/// A session as memory keys it: the SHA-256 of its cookie value.
private struct SessionKey: Hashable {
    let digest: [UInt8]
    init(_ cookie: String) { digest = Array(SHA256.hash(data: Array(cookie.utf8))) }
}

/// Random tokens for session ids and CSRF tokens: 32 bytes from the system's generator
/// (`getrandom`), as 64 lower-case hex digits (valid in a cookie and a form field as they are).
package enum RandomToken {
    package static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for _ in 0..<32 {
            let byte = UInt8.random(in: .min ... .max, using: &generator)
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
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
