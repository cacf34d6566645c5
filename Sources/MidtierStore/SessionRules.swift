import MidtierCore

/// Back-end sessions, written once for both stores (``StoreQuery``): sealed by the caller, kept
/// per registration and destination, newest stamp wins (docs/operations.md).
enum BackendSessionRules {
    static func session(registration: String, destination: String, now: Int64) -> StoreQuery {
        "SELECT sealed, expires_at, stamp FROM \(table: "backend_session") WHERE registration_id = \(registration) "
            + "AND destination = \(destination) AND (expires_at IS NULL OR expires_at > \(now))"
    }

    static func session(_ row: some StoreRow, registration: String, destination: String) throws -> SealedBackendSession {
        SealedBackendSession(
            registration: registration, destination: destination, sealed: try row.bytes("sealed"),
            expiresAt: try row.optionalInteger("expires_at"), stamp: try row.integer("stamp"))
    }

    /// Drops every session that expired by `now` (any registration's).
    static func dropExpired(now: Int64) -> StoreQuery { "DELETE FROM \(table: "backend_session") WHERE expires_at <= \(now)" }

    /// Keeps `session` in place of one with an earlier stamp; returns a row when it did.
    static func save(_ session: SealedBackendSession) -> StoreQuery {
        "INSERT INTO \(table: "backend_session") (registration_id, destination, sealed, expires_at, stamp) "
            + "VALUES (\(session.registration), \(session.destination), \(bytes: session.sealed), \(session.expiresAt), \(session.stamp)) "
            + "ON CONFLICT (registration_id, destination) DO UPDATE SET sealed = excluded.sealed, "
            + "expires_at = excluded.expires_at, stamp = excluded.stamp "
            + "WHERE \(table: "backend_session").stamp < excluded.stamp RETURNING registration_id"
    }
}

/// The web console's and the self-service page's sessions, written once for both stores
/// (``StoreQuery``; docs/console.md, "Sessions").
enum PageSessionRules {
    static let columns: StaticString =
        "key, site, subject_realm, subject_id, credential_stamp, csrf_token, started_at, ends_at, last_seen, idle_ms, notice"

    static func session(_ row: some StoreRow) throws -> StoredPageSession {
        StoredPageSession(
            key: try row.text("key"), site: try row.text("site"),
            subject: UserIdentity(realm: try row.text("subject_realm"), id: try row.text("subject_id")),
            credentialStamp: try row.text("credential_stamp"), csrfToken: try row.text("csrf_token"),
            startedAt: try row.integer("started_at"), endsAt: try row.integer("ends_at"), lastSeen: try row.integer("last_seen"),
            idleMilliseconds: try row.integer("idle_ms"), notice: try row.optionalText("notice"))
    }

    /// The session of `site` keyed `key`, locked until the transaction ends.
    static func session(key: String, site: String) -> StoreQuery {
        "SELECT \(sql: columns) FROM \(table: "page_session") WHERE key = \(key) AND site = \(site)\(lock: .update)"
    }

    /// Drops every session over at `now`: past its end, or idle for its idle time.
    static func dropOver(now: Int64) -> StoreQuery {
        "DELETE FROM \(table: "page_session") WHERE ends_at <= \(now) OR (last_seen < \(now) AND \(now) - last_seen >= idle_ms)"
    }

    /// Drops the person's least recently used sessions of the site past the newest `keep`.
    static func trim(site: String, subject: UserIdentity, keeping keep: Int) -> StoreQuery {
        "DELETE FROM \(table: "page_session") WHERE key IN (SELECT key FROM \(table: "page_session") WHERE site = \(site) "
            + "AND subject_realm = \(subject.realm) AND subject_id = \(subject.id) ORDER BY last_seen DESC, key\(offset: max(0, keep)))"
    }

    /// Drops the site's least recently used sessions past the newest `keep`.
    static func trim(site: String, keeping keep: Int) -> StoreQuery {
        "DELETE FROM \(table: "page_session") WHERE key IN (SELECT key FROM \(table: "page_session") WHERE site = \(site) "
            + "ORDER BY last_seen DESC, key\(offset: max(0, keep)))"
    }

    /// Keeps `session` and returns its key, unless its key is in use (a key is the hash of a
    /// random cookie: never; a store refuses the sign-in then rather than hand out a cookie
    /// that names someone else's session).
    static func insert(_ session: StoredPageSession) -> StoreQuery {
        "INSERT INTO \(table: "page_session") (\(sql: columns)) VALUES (\(session.key), \(session.site), \(session.subject.realm), "
            + "\(session.subject.id), \(session.credentialStamp), \(session.csrfToken), \(session.startedAt), \(session.endsAt), "
            + "\(session.lastSeen), \(session.idleMilliseconds), \(session.notice)) ON CONFLICT (key) DO NOTHING RETURNING key"
    }

    /// Marks the session used at `lastSeen`, taking its notice away when `takingNotice`.
    static func touch(key: String, lastSeen: Int64, takingNotice: Bool) -> StoreQuery {
        takingNotice
            ? "UPDATE \(table: "page_session") SET last_seen = \(lastSeen), notice = NULL WHERE key = \(key)"
            : "UPDATE \(table: "page_session") SET last_seen = \(lastSeen) WHERE key = \(key)"
    }

    static func delete(key: String) -> StoreQuery { "DELETE FROM \(table: "page_session") WHERE key = \(key)" }

    static func end(key: String, site: String) -> StoreQuery {
        "DELETE FROM \(table: "page_session") WHERE key = \(key) AND site = \(site)"
    }

    static func leaveNotice(_ notice: String, key: String, site: String) -> StoreQuery {
        "UPDATE \(table: "page_session") SET notice = \(notice) WHERE key = \(key) AND site = \(site)"
    }
}

/// A new page session's key names one that exists already.
struct PageSessionKeyInUse: Error, CustomStringConvertible {
    var description: String { "a page session with the new session's key exists already; the sign-in is refused" }
}
