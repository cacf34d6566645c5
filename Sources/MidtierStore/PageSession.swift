package import MidtierCore

/// A person's session on the pages for people — the web console or the self-service page —
/// as the store keeps it, so that every instance sharing the store knows it
/// (docs/console.md, "Sessions"). Keyed by the SHA-256 of the cookie value, never the value
/// itself: a copy of the database does not hand out live sessions.
package struct StoredPageSession: Sendable, Equatable {
    /// The SHA-256 of the session's cookie value, as 64 lower-case hex digits.
    package var key: String
    /// Which pages it belongs to (`console`, `me`): a session of one is nothing to the other.
    package var site: String
    /// Who signed in: a user, or an admin (realm "", id `admin#N`).
    package var subject: UserIdentity
    /// The SHA-256 (hex) of what the person signed in with, as it was then; the session ends
    /// when it changes.
    package var credentialStamp: String
    /// The synchronizer token of the session's forms.
    package var csrfToken: String
    /// Milliseconds since 1970: the sign-in, the end whatever happens, the last use.
    package var startedAt: Int64
    package var endsAt: Int64
    package var lastSeen: Int64
    /// It ends this long after its last use.
    package var idleMilliseconds: Int64
    /// A one-time message for the next page.
    package var notice: String?

    package init(
        key: String, site: String, subject: UserIdentity, credentialStamp: String, csrfToken: String,
        startedAt: Int64, endsAt: Int64, lastSeen: Int64, idleMilliseconds: Int64, notice: String? = nil
    ) {
        self.key = key
        self.site = site
        self.subject = subject
        self.credentialStamp = credentialStamp
        self.csrfToken = csrfToken
        self.startedAt = startedAt
        self.endsAt = endsAt
        self.lastSeen = lastSeen
        self.idleMilliseconds = idleMilliseconds
        self.notice = notice
    }

    /// Whether it is over at `now`: past its end, or unused for its idle time. A `now` before
    /// the last use (another instance's clock, a clock that went back) counts as no time passed.
    package func isOver(at now: Int64) -> Bool {
        now >= endsAt || (now > lastSeen && now - lastSeen >= idleMilliseconds)
    }
}

/// How many page sessions the store keeps, and per person.
package struct PageSessionBounds: Sendable, Equatable {
    /// The most sessions of one site; at it, a sign-in ends the least recently used one.
    package var capacity: Int
    /// The most sessions of one person on one site; signing in once more ends their least
    /// recently used one.
    package var perSubject: Int

    package init(capacity: Int, perSubject: Int) {
        self.capacity = capacity
        self.perSubject = perSubject
    }
}
