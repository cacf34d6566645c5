import Foundation
package import Logging
package import MidtierCore
import NIOSSL
import PostgresNIO

/// The shared store for several instances: one PostgreSQL database through postgres-nio
/// (docs/operations.md).
///
/// Every write is one transaction with its audit entry and, for a change other instances must
/// enforce, a row in `midtier_change` and a `NOTIFY midtier_changes` (see `ChangeFeed`).
/// Writes that append to the audit or the change log take one transaction-scoped advisory lock
/// first, so their sequence numbers are handed out in commit order: a reader that has seen
/// sequence n has seen everything before it, which makes `after=` paging exact and lets an
/// instance catch up on changes by number. Admin and onboarding writes are rare enough for
/// that to cost nothing that matters; the request path reads memory, but for back-end session
/// changes (docs/operations.md).
///
/// Every operation has a deadline (`operationTimeout`): with the server gone, a write fails
/// with `StoreError` (503 for the caller) within it instead of waiting for a connection.
package final class PostgresStore: StateStore {
    /// Text compared by bytes, as identities must be (docs/identity.md).
    static let schemaLock: Int64 = 0x4D69_6474_6965_7201  // "Midtier\x01"
    static let writeLock: Int64 = 0x4D69_6474_6965_7202
    /// Page-session sign-ins (their bounds count rows): they announce nothing, so they need
    /// not wait for other writes. Using and ending a session locks its row only.
    static let pageSessionLock: Int64 = 0x4D69_6474_6965_7203
    /// The channel other instances listen on.
    package static let changeChannel = "midtier_changes"

    let client: PostgresClient
    let location: PostgresLocation
    let logger: Logger
    let operationTimeout: Duration
    /// The deadline of session reads and saves, which run on the request path.
    let sessionTimeout: Duration
    /// The server's clock: when a change was announced, which changes are old.
    let clock: WallClock
    private let runner: Task<Void, Never>

    /// Connects (the pool connects lazily) and creates or migrates the schema; several
    /// instances starting at once migrate one after the other.
    package init(
        _ location: PostgresLocation, operationTimeout: Duration = .seconds(5), sessionTimeout: Duration = .seconds(1),
        logger: Logger, clock: WallClock = .system
    ) async throws(StoreError) {
        self.location = location
        self.clock = clock
        self.logger = logger
        self.operationTimeout = operationTimeout
        self.sessionTimeout = sessionTimeout
        let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
        self.client = client
        self.runner = Task { await client.run() }
        do {
            try await withDeadline(.seconds(30)) {
                try await Self.probe(location, logger: logger)
                try await PostgresSchema.migrate(client, logger: logger)
            }
        } catch {
            runner.cancel()
            throw StoreError("cannot open the PostgreSQL store at \(location.description): \(Self.describe(error))")
        }
    }

    deinit { runner.cancel() }

    /// Whether a failed connection attempt will fail the same way again: what the server
    /// refused (but not while it starts up, shuts down or has no connection free), what TLS
    /// refused, and authentication the server asks for that Midtier cannot give.
    static func refusesForGood(_ error: PSQLError) -> Bool {
        if error.code == .server {
            let transient: Set<String> = ["57P03", "57P01", "57P02", "53300", "08006", "08001"]
            return !transient.contains(error.serverInfo?[.sqlState] ?? "")
        }
        if error.code == .sslUnsupported || error.code == .unsupportedAuthMechanism || error.code == .authMechanismRequiresPassword
            || error.code == .saslError
        {
            return true
        }
        return error.underlying is NIOSSLError || error.underlying is NIOSSLExtraError
    }

    /// Connects once, directly, so that what the server or TLS refuses (a password, a role, a
    /// database, a certificate) is said at once rather than after the pool's retries run out;
    /// a server that does not answer yet is tried again every second (the caller's deadline).
    static func probe(_ location: PostgresLocation, logger: Logger) async throws {
        var quiet = logger
        quiet.logLevel = .critical
        while true {
            do {
                let connection = try await PostgresConnection.connect(configuration: location.connectionConfiguration, id: 0, logger: quiet)
                try await connection.close()
                return
            } catch let error as PSQLError where refusesForGood(error) {
                throw error
            } catch {
                logger.notice("PostgreSQL does not answer yet; trying again", metadata: ["store": "\(location)", "error": "\(describe(error))"])
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Closes the connections.
    package func close() { runner.cancel() }

    /// A PostgreSQL error in words, with the server's message when there is one (never a
    /// password: postgres-nio does not put it in its errors).
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if let tls = error.underlying, tls is NIOSSLError || tls is NIOSSLExtraError {
                return "the TLS handshake failed (\(tls)); with sslmode=verify-ca or verify-full, sslrootcert must name the CA "
                    + "that signed the server's certificate, and verify-full also needs the host as the certificate names it"
            }
            if error.code == .sslUnsupported { return "the server does not offer TLS, which sslmode asks for" }
            if error.code == .authMechanismRequiresPassword { return "the server asks for a password, and the store gives none" }
            return "\(error.code)" + (error.underlying.map { ": \($0)" } ?? "")
        }
        if error is DeadlineExceeded { return "no answer within the deadline" }
        return "\(error)"
    }

    // MARK: Running operations

    private func withDeadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                throw DeadlineExceeded()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// One write transaction, holding `lock` (by default the write lock: commit-ordered
    /// sequences; nil: none).
    func write<T: Sendable>(
        within limit: Duration? = nil, lock: Int64? = PostgresStore.writeLock,
        _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws(StoreError) -> T {
        let logger = self.logger
        let client = self.client
        do {
            return try await withDeadline(limit ?? operationTimeout) {
                try await client.withTransaction(logger: logger) { connection in
                    if let lock { try await connection.query("SELECT pg_advisory_xact_lock(\(lock))", logger: logger) }
                    return try await body(connection, logger)
                }
            }
        } catch {
            throw StoreError("PostgreSQL write failed: \(Self.describe(error))")
        }
    }

    func read<T: Sendable>(
        within limit: Duration? = nil,
        _ body: @escaping @Sendable (PostgresClient, Logger) async throws -> T
    ) async throws(StoreError) -> T {
        let logger = self.logger
        let client = self.client
        do {
            return try await withDeadline(limit ?? operationTimeout) { try await body(client, logger) }
        } catch {
            throw StoreError("PostgreSQL read failed: \(Self.describe(error))")
        }
    }

    // MARK: Rows

    static let columns =
        "id, app_id, user_realm, user_id, device_type, device_model, device_id, form_factor, apns_device_token, android_gcm_registration_id, created_at, last_contact_at, state, details"

    typealias RegistrationRow = (String, String, String, String, String, String, String, String, String, String, Int64, Int64, String, String)

    static func registration(_ row: RegistrationRow) -> Registration {
        Registration(
            id: row.0, appId: row.1, user: UserIdentity(realm: row.2, id: row.3), deviceType: row.4, deviceModel: row.5,
            deviceId: row.6, formFactor: row.7, apnsDeviceToken: row.8, androidGcmRegistrationId: row.9,
            createdAt: row.10, lastContactAt: row.11,
            // An unreadable state is treated as the safest one.
            state: Registration.State(rawValue: row.12) ?? .wiped, details: Registration.details(from: row.13))
    }

    static func registrations(_ rows: PostgresRowSequence) async throws -> [Registration] {
        var found: [Registration] = []
        for try await row in rows.decode(RegistrationRow.self) { found.append(registration(row)) }
        return found
    }

    static func append(_ entry: AuditEntry, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO midtier_audit (at, actor, action, target, detail, source)
            VALUES (\(entry.at), \(entry.actor), \(entry.action), \(entry.target), \(entry.detail), \(entry.source))
            """, logger: logger)
    }

    /// Records a change other instances must apply, and wakes them (delivered at commit).
    static func announce(_ change: StoreChange, at milliseconds: Int64, on connection: PostgresConnection, logger: Logger) async throws {
        let (kind, first, second) = change.columns
        try await connection.query(
            """
            INSERT INTO midtier_change (at, kind, key_a, key_b) VALUES (\(milliseconds), \(kind), \(first), \(second))
            """, logger: logger)
        try await connection.query("SELECT pg_notify(\(Self.changeChannel), '')", logger: logger)
    }

    // MARK: Registrations

    package func insert(_ r: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome {
        try await write { connection, logger in
            let retired = try await connection.query("SELECT 1 FROM midtier_retired_registration WHERE id = \(r.id)", logger: logger)
            for try await _ in retired { return InsertOutcome.idTaken }
            if let maximumPerUser {
                let rows = try await connection.query(
                    """
                    SELECT COUNT(*) FROM midtier_registration WHERE user_realm = \(r.user.realm) AND user_id = \(r.user.id)
                    """, logger: logger)
                var count: Int64 = 0
                for try await (value) in rows.decode(Int64.self) { count = value }
                if count >= Int64(maximumPerUser) { return .limitReached(limit: maximumPerUser) }
            }
            if !r.deviceId.isEmpty {
                // Byte equality: the database's default collation is deterministic.
                let held = try await connection.query(
                    """
                    SELECT id FROM midtier_registration
                    WHERE app_id = \(r.appId) AND user_realm = \(r.user.realm) AND user_id = \(r.user.id) AND device_id = \(r.deviceId)
                      AND state <> 'active'
                    ORDER BY state = 'wiped' DESC, created_at LIMIT 1
                    """, logger: logger)
                for try await (id) in held.decode(String.self) { return InsertOutcome.deviceHeld(id: id) }
            }
            let inserted = try await connection.query(
                """
                INSERT INTO midtier_registration (\(unescaped: Self.columns))
                VALUES (\(r.id), \(r.appId), \(r.user.realm), \(r.user.id), \(r.deviceType), \(r.deviceModel), \(r.deviceId), \(r.formFactor),
                        \(r.apnsDeviceToken), \(r.androidGcmRegistrationId), \(r.createdAt), \(r.lastContactAt), \(r.state.rawValue),
                        \(r.detailsText))
                ON CONFLICT (id) DO NOTHING RETURNING id
                """, logger: logger)
            var added = false
            for try await _ in inserted { added = true }
            guard added else { return .idTaken }
            if let audit { try await Self.append(audit, on: connection, logger: logger) }
            // Others may have remembered the id as unknown (a device that called before it
            // onboarded); they forget that (docs/identity.md, "Registration ids").
            try await Self.announce(.created(id: r.id), at: audit?.at ?? self.clock.now(), on: connection, logger: logger)
            return .inserted
        }
    }

    package func registration(id: String) async throws(StoreError) -> Registration? {
        try await read { client, logger in
            try await Self.registrations(client.query("SELECT \(unescaped: Self.columns) FROM midtier_registration WHERE id = \(id)", logger: logger))
                .first
        }
    }

    package func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock? {
        guard let registration = try await registration(id: id) else { return nil }
        return RegistrationAndBlock(registration: registration, block: try await block(of: registration.user))
    }

    package func registrations(matching filter: RegistrationFilter) async throws(StoreError) -> [Registration] {
        try await read { client, logger in
            var query: PostgresQuery = "SELECT \(unescaped: Self.columns) FROM midtier_registration WHERE TRUE"
            if let user = filter.user {
                query.sql += " AND user_realm = $\(query.binds.count + 1) AND user_id = $\(query.binds.count + 2)"
                query.binds.append(user.realm)
                query.binds.append(user.id)
            }
            if let app = filter.app {
                query.sql += " AND app_id = $\(query.binds.count + 1)"
                query.binds.append(app)
            }
            if let state = filter.state {
                query.sql += " AND state = $\(query.binds.count + 1)"
                query.binds.append(state.rawValue)
            }
            query.sql += " ORDER BY created_at, id"
            return try await Self.registrations(client.query(query, logger: logger))
        }
    }

    package func updateDevice(_ r: Registration, audit: AuditEntry?) async throws(StoreError) -> Bool {
        try await write { connection, logger in
            let updated = try await connection.query(
                """
                UPDATE midtier_registration SET device_type = \(r.deviceType), device_model = \(r.deviceModel), device_id = \(r.deviceId),
                    form_factor = \(r.formFactor), apns_device_token = \(r.apnsDeviceToken),
                    android_gcm_registration_id = \(r.androidGcmRegistrationId), details = \(r.detailsText) WHERE id = \(r.id) RETURNING id
                """, logger: logger)
            var changed = false
            for try await _ in updated { changed = true }
            guard changed else { return false }
            if let audit { try await Self.append(audit, on: connection, logger: logger) }
            try await Self.announce(.device(id: r.id), at: audit?.at ?? self.clock.now(), on: connection, logger: logger)
            return true
        }
    }

    package func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition {
        try await write { connection, logger in
            let found = try await Self.registrations(
                connection.query(
                    "SELECT \(unescaped: Self.columns) FROM midtier_registration WHERE id = \(id) FOR UPDATE", logger: logger))
            guard var registration = found.first else { return StateTransition.notFound }
            guard allowedFrom.contains(registration.state) else { return .refused(current: registration.state) }
            try await connection.query("UPDATE midtier_registration SET state = \(state.rawValue) WHERE id = \(id)", logger: logger)
            try await Self.delete(RegistrationRows.deleted(changingTo: state), of: id, on: connection, logger: logger)
            try await Self.append(audit, on: connection, logger: logger)
            try await Self.announce(.registration(id: id), at: audit.at, on: connection, logger: logger)
            registration.state = state
            return .changed(registration)
        }
    }

    package func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome {
        try await write { connection, logger in
            let found = try await Self.registrations(
                connection.query(
                    "SELECT \(unescaped: Self.columns) FROM midtier_registration WHERE id = \(id) FOR UPDATE", logger: logger))
            guard let registration = found.first else { return DeleteOutcome.notFound }
            guard allowedFrom.contains(registration.state) else { return .refused(current: registration.state) }
            let at = audit?.at ?? self.clock.now()
            try await connection.query("DELETE FROM midtier_registration WHERE id = \(id)", logger: logger)
            try await Self.delete(RegistrationRows.deletedWithTheRegistration, of: id, on: connection, logger: logger)
            try await connection.query(
                """
                INSERT INTO midtier_retired_registration (id, retired_at) VALUES (\(id), \(at)) ON CONFLICT (id) DO NOTHING
                """, logger: logger)
            if let audit { try await Self.append(audit, on: connection, logger: logger) }
            try await Self.announce(.registration(id: id), at: at, on: connection, logger: logger)
            return .deleted(registration)
        }
    }

    package func recordContacts(_ contacts: [Contact]) async throws(StoreError) {
        guard !contacts.isEmpty else { return }
        // Monotonic and unaudited: no write lock, no change to announce; one statement a batch.
        let ids = contacts.map(\.id)
        let times = contacts.map(\.at)
        try await read { client, logger in
            try await client.query(
                """
                UPDATE midtier_registration AS r SET last_contact_at = c.at
                FROM unnest(\(ids)::text[], \(times)::int8[]) AS c(id, at)
                WHERE r.id = c.id AND r.last_contact_at < c.at
                """, logger: logger)
        }
    }

    // MARK: Blocks

    package func block(of user: UserIdentity) async throws(StoreError) -> UserBlock? {
        try await read { client, logger in
            let rows = try await client.query(
                """
                SELECT kind, reason, since, blocked_by FROM midtier_user_block WHERE user_realm = \(user.realm) AND user_id = \(user.id)
                """, logger: logger)
            for try await (kind, reason, since, by) in rows.decode((String, String, Int64, String).self) {
                return UserBlock(user: user, kind: UserBlock.Kind(rawValue: kind) ?? .all, reason: reason, since: since, by: by)
            }
            return nil
        }
    }

    package func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError) {
        try await write { connection, logger in
            try await connection.query(
                """
                INSERT INTO midtier_user_block (user_realm, user_id, kind, reason, since, blocked_by)
                VALUES (\(block.user.realm), \(block.user.id), \(block.kind.rawValue), \(block.reason), \(block.since), \(block.by))
                ON CONFLICT (user_realm, user_id) DO UPDATE SET kind = EXCLUDED.kind, reason = EXCLUDED.reason,
                    since = EXCLUDED.since, blocked_by = EXCLUDED.blocked_by
                """, logger: logger)
            try await Self.append(audit, on: connection, logger: logger)
            try await Self.announce(.block(user: block.user), at: audit.at, on: connection, logger: logger)
        }
    }

    package func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await write { connection, logger in
            let removed = try await connection.query(
                """
                DELETE FROM midtier_user_block WHERE user_realm = \(user.realm) AND user_id = \(user.id) RETURNING user_id
                """, logger: logger)
            var found = false
            for try await _ in removed { found = true }
            guard found else { return false }
            try await Self.append(audit, on: connection, logger: logger)
            try await Self.announce(.block(user: user), at: audit.at, on: connection, logger: logger)
            return true
        }
    }

    package func purgeTokens(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) {
        try await write { connection, logger in
            try await Self.append(audit, on: connection, logger: logger)
            try await Self.announce(.tokens(user: user), at: audit.at, on: connection, logger: logger)
        }
    }

    // MARK: Back-end sessions

    package func backendSession(registration: String, destination: String, now: Int64) async throws(StoreError) -> SealedBackendSession? {
        // On the request path: a short deadline, so a store outage costs a request little.
        try await read(within: sessionTimeout) { client, logger in
            let rows = try await client.query(
                """
                SELECT sealed, expires_at, stamp FROM midtier_backend_session
                WHERE registration_id = \(registration) AND destination = \(destination) AND (expires_at IS NULL OR expires_at > \(now))
                """, logger: logger)
            for try await (sealed, expiresAt, stamp) in rows.decode((ByteBuffer, Int64?, Int64).self) {
                return SealedBackendSession(
                    registration: registration, destination: destination,
                    sealed: Array(buffer: sealed), expiresAt: expiresAt, stamp: stamp)
            }
            return nil
        }
    }

    package func saveBackendSession(_ session: SealedBackendSession, now: Int64) async throws(StoreError) -> BackendSessionSave {
        // Under the write lock like every announced change (the change feed reads changes in
        // sequence order), with the request path's short deadline.
        try await write(within: sessionTimeout) { connection, logger in
            try await connection.query("DELETE FROM midtier_backend_session WHERE expires_at <= \(now)", logger: logger)
            var active = false
            for try await _ in try await connection.query(
                """
                SELECT 1 FROM midtier_registration WHERE id = \(session.registration) AND state = 'active'
                """, logger: logger)
            { active = true }
            guard active else { return .inactive }
            let saved = try await connection.query(
                """
                INSERT INTO midtier_backend_session (registration_id, destination, sealed, expires_at, stamp)
                VALUES (\(session.registration), \(session.destination), \(ByteBuffer(bytes: session.sealed)), \(session.expiresAt), \(session.stamp))
                ON CONFLICT (registration_id, destination) DO UPDATE
                SET sealed = EXCLUDED.sealed, expires_at = EXCLUDED.expires_at, stamp = EXCLUDED.stamp
                WHERE midtier_backend_session.stamp < EXCLUDED.stamp
                RETURNING registration_id
                """, logger: logger)
            var kept = false
            for try await _ in saved { kept = true }
            guard kept else { return .stale }
            try await Self.announce(
                .session(registration: session.registration, destination: session.destination),
                at: now, on: connection, logger: logger)
            return .saved
        }
    }

    // MARK: Page sessions (every instance reads them from here: nothing to announce)

    typealias PageSessionRow = (String, String, String, String, String, String, Int64, Int64, Int64, Int64, String?)
    static let pageSessionColumns =
        "key, site, subject_realm, subject_id, credential_stamp, csrf_token, started_at, ends_at, last_seen, idle_ms, notice"

    package func startPageSession(_ session: StoredPageSession, bounds: PageSessionBounds, now: Int64) async throws(StoreError) {
        try await write(lock: Self.pageSessionLock) { connection, logger in
            try await connection.query(
                """
                DELETE FROM midtier_page_session WHERE ends_at <= \(now) OR (last_seen < \(now) AND \(now) - last_seen >= idle_ms)
                """, logger: logger)
            try await connection.query(
                """
                DELETE FROM midtier_page_session WHERE key IN (SELECT key FROM midtier_page_session WHERE site = \(session.site)
                    AND subject_realm = \(session.subject.realm) AND subject_id = \(session.subject.id)
                    ORDER BY last_seen DESC, key OFFSET \(Int64(max(0, bounds.perSubject - 1))))
                """, logger: logger)
            try await connection.query(
                """
                DELETE FROM midtier_page_session WHERE key IN (SELECT key FROM midtier_page_session WHERE site = \(session.site)
                    ORDER BY last_seen DESC, key OFFSET \(Int64(max(0, bounds.capacity - 1))))
                """, logger: logger)
            try await connection.query(
                """
                INSERT INTO midtier_page_session (\(unescaped: Self.pageSessionColumns))
                VALUES (\(session.key), \(session.site), \(session.subject.realm), \(session.subject.id), \(session.credentialStamp),
                        \(session.csrfToken), \(session.startedAt), \(session.endsAt), \(session.lastSeen), \(session.idleMilliseconds),
                        \(session.notice))
                ON CONFLICT (key) DO NOTHING
                """, logger: logger)
        }
    }

    package func usePageSession(key: String, site: String, now: Int64, takingNotice: Bool) async throws(StoreError) -> StoredPageSession? {
        try await write(lock: nil) { connection, logger in
            let rows = try await connection.query(
                """
                SELECT \(unescaped: Self.pageSessionColumns) FROM midtier_page_session WHERE key = \(key) AND site = \(site) FOR UPDATE
                """, logger: logger)
            var found: StoredPageSession?
            for try await row in rows.decode(PageSessionRow.self) {
                found = StoredPageSession(
                    key: row.0, site: row.1, subject: UserIdentity(realm: row.2, id: row.3), credentialStamp: row.4,
                    csrfToken: row.5, startedAt: row.6, endsAt: row.7, lastSeen: row.8, idleMilliseconds: row.9,
                    notice: row.10)
            }
            guard var session = found else { return nil }
            guard !session.isOver(at: now) else {
                try await connection.query("DELETE FROM midtier_page_session WHERE key = \(key)", logger: logger)
                return nil
            }
            session.lastSeen = max(session.lastSeen, now)
            if takingNotice {
                try await connection.query(
                    """
                    UPDATE midtier_page_session SET last_seen = \(session.lastSeen), notice = NULL WHERE key = \(key)
                    """, logger: logger)
            } else {
                try await connection.query("UPDATE midtier_page_session SET last_seen = \(session.lastSeen) WHERE key = \(key)", logger: logger)
                session.notice = nil
            }
            return session
        }
    }

    package func endPageSession(key: String, site: String) async throws(StoreError) {
        try await write(lock: nil) { connection, logger in
            try await connection.query("DELETE FROM midtier_page_session WHERE key = \(key) AND site = \(site)", logger: logger)
        }
    }

    package func leavePageNotice(_ notice: String, key: String, site: String) async throws(StoreError) {
        try await write(lock: nil) { connection, logger in
            try await connection.query(
                """
                UPDATE midtier_page_session SET notice = \(notice) WHERE key = \(key) AND site = \(site)
                """, logger: logger)
        }
    }

    // MARK: User and device storage (every instance reads it from here: nothing to announce)

    /// The lock class of storage writes, taken per user (with a hash of the user) so that the
    /// per-user size limit sees every write of the user before it.
    static let storageLock: Int32 = 0x4D74_5304
    static let uploadLock: Int32 = 0x4D74_5505

    package func storageDocument(_ key: StorageKey) async throws(StoreError) -> String? {
        try await rows(StorageRules.document(key)) { try $0.text("document") }.first
    }

    package func storageDocuments(app: String, user: UserIdentity, level: StorageLevel) async throws(StoreError) -> [StoredDocument] {
        try await rows(StorageRules.documents(app: app, user: user, level: level)) { try StorageRules.storedDocument($0) }
    }

    package func writeStorage<Reason: Sendable>(
        _ key: StorageKey, userLimit: Int, now: Int64,
        _ edit: @escaping @Sendable (String?) -> StorageEdit<Reason>
    ) async throws(StoreError) -> StorageWrite<Reason> {
        let registration = key.level.storedRegistration
        return try await write(lock: nil) { connection, logger in
            // The user's writes one after the other; the realm's length keeps realm and id apart.
            let user = "\(key.user.realm.utf8.count):\(key.user.realm)\(key.user.id)"
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.storageLock), hashtext(\(user)))", logger: logger)
            if case .registration(let id) = key.level {
                // FOR SHARE: a wipe or delete of the registration (FOR UPDATE) waits for this
                // write, and deletes what it wrote; a write after it finds no active registration.
                let rows = try await connection.query(
                    """
                    SELECT 1 FROM midtier_registration WHERE id = \(id) AND app_id = \(key.app)
                        AND user_realm = \(key.user.realm) AND user_id = \(key.user.id) AND state = 'active' FOR SHARE
                    """, logger: logger)
                var active = false
                for try await _ in rows { active = true }
                guard active else { return StorageWrite<Reason>.registrationInactive }
            }
            let found = try await connection.query(
                """
                SELECT document FROM midtier_user_storage WHERE user_realm = \(key.user.realm) AND user_id = \(key.user.id)
                    AND app_id = \(key.app) AND registration_id = \(registration) AND name = \(key.name) FOR UPDATE
                """, logger: logger)
            var current: String?
            for try await (document) in found.decode(String.self) { current = document }
            switch edit(current) {
            case .refuse(let reason):
                return .refused(reason)
            case .remove:
                try await connection.query(
                    """
                    DELETE FROM midtier_user_storage WHERE user_realm = \(key.user.realm) AND user_id = \(key.user.id)
                        AND app_id = \(key.app) AND registration_id = \(registration) AND name = \(key.name)
                    """, logger: logger)
                return .removed
            case .set(let text):
                let sums = try await connection.query(
                    """
                    SELECT COALESCE(SUM(size), 0)::int8 FROM midtier_user_storage WHERE user_realm = \(key.user.realm) AND user_id = \(key.user.id)
                        AND NOT (app_id = \(key.app) AND registration_id = \(registration) AND name = \(key.name))
                    """, logger: logger)
                var others: Int64 = 0
                for try await (sum) in sums.decode(Int64.self) { others = sum }
                let size = Int64(key.storedSize(of: text))
                guard others + size <= Int64(userLimit) else { return .overUserLimit(limit: userLimit) }
                try await connection.query(
                    """
                    INSERT INTO midtier_user_storage (user_realm, user_id, app_id, registration_id, name, document, size, updated_at)
                    VALUES (\(key.user.realm), \(key.user.id), \(key.app), \(registration), \(key.name), \(text), \(size), \(now))
                    ON CONFLICT (user_realm, user_id, app_id, registration_id, name)
                    DO UPDATE SET document = excluded.document, size = excluded.size, updated_at = excluded.updated_at
                    """, logger: logger)
                return .written
            }
        }
    }

    package func storageEntries(of user: UserIdentity) async throws(StoreError) -> [StorageEntry] {
        try await rows(StorageRules.entries(of: user)) { try StorageRules.entry($0, of: user) }
    }

    // MARK: Client logs and usage (every instance reads them from here: nothing to announce)

    static let uploadColumns = "u.id, u.kind, u.app_id, u.user_realm, u.user_id, u.registration_id, u.device_id, u.received_at, u.size, u.report"

    static func clientUpload(
        _ id: String, _ kind: String, _ app: String, _ realm: String, _ user: String, _ registration: String,
        _ device: String, _ receivedAt: Int64, _ size: Int64, _ report: String
    ) -> ClientUpload {
        ClientUpload(
            id: id, kind: ClientUploadKind(rawValue: kind) ?? .log, app: app, user: UserIdentity(realm: realm, id: user),
            registration: registration, deviceId: device, receivedAt: receivedAt, size: Int(size), report: report)
    }

    /// Deletes the rows of registration `id` that `rows` name (``RegistrationRows``).
    static func delete(_ rows: [RegistrationRows], of id: String, on connection: PostgresConnection, logger: Logger) async throws {
        for rows in rows {
            var binds = PostgresBindings()
            binds.append(id)
            try await connection.query(
                PostgresQuery(unsafeSQL: rows.deleteStatement(prefix: "midtier_", placeholder: "$1"), binds: binds), logger: logger)
        }
    }

    /// Appends the conditions `filter` sets on uploads (`u`), with `time` the column its
    /// from/until bound.
    static func append(_ filter: ClientUploadFilter, time: String, to query: inout PostgresQuery) {
        func bind(_ value: some PostgresDynamicTypeEncodable) -> String {
            query.binds.append(value)
            return "$\(query.binds.count)"
        }
        if let registration = filter.registration { query.sql += " AND u.registration_id = \(bind(registration))" }
        if let user = filter.user { query.sql += " AND u.user_realm = \(bind(user.realm)) AND u.user_id = \(bind(user.id))" }
        if let app = filter.app { query.sql += " AND u.app_id = \(bind(app))" }
        if let from = filter.from { query.sql += " AND \(time) >= \(bind(from))" }
        if let until = filter.until { query.sql += " AND \(time) < \(bind(until))" }
    }

    package func saveClientUpload(
        _ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
        now: Int64
    ) async throws(StoreError) -> ClientUploadSave {
        try await write(lock: nil) { connection, logger in
            // FOR UPDATE: the registration's uploads one after the other (the counts and sizes
            // below see every upload before), and a wipe or delete (FOR UPDATE too) waits for
            // this one and deletes it; an upload after it finds no active registration.
            let rows = try await connection.query(
                """
                SELECT 1 FROM midtier_registration WHERE id = \(upload.registration) AND app_id = \(upload.app)
                    AND user_realm = \(upload.user.realm) AND user_id = \(upload.user.id) AND state = 'active' FOR UPDATE
                """, logger: logger)
            var active = false
            for try await _ in rows { active = true }
            guard active else { return ClientUploadSave.registrationInactive }
            // The user's uploads one after the other too, for the per-user bound; the realm's
            // length keeps realm and id apart.
            let user = "\(upload.user.realm.utf8.count):\(upload.user.realm)\(upload.user.id)"
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.uploadLock), hashtext(\(user)))", logger: logger)
            let counted = try await connection.query(
                """
                SELECT COUNT(*) FROM midtier_client_uploads WHERE registration_id = \(upload.registration) AND kind = \(upload.kind.rawValue)
                    AND received_at >= \(now - bounds.window)
                """, logger: logger)
            var recent: Int64 = 0
            for try await (count) in counted.decode(Int64.self) { recent = count }
            guard recent < Int64(bounds.uploadsPerWindow) else { return .tooMany }
            var kept: [(id: String, size: Int64)] = []
            for try await (id, size) in try await connection.query(
                """
                SELECT id, size FROM midtier_client_uploads WHERE registration_id = \(upload.registration) AND kind = \(upload.kind.rawValue)
                ORDER BY received_at, id
                """, logger: logger
            ).decode((String, Int64).self) { kept.append((id, size)) }
            try await connection.query(
                """
                INSERT INTO midtier_client_uploads (id, kind, app_id, user_realm, user_id, registration_id, device_id, received_at, size, report)
                VALUES (\(upload.id), \(upload.kind.rawValue), \(upload.app), \(upload.user.realm), \(upload.user.id), \(upload.registration),
                        \(upload.deviceId), \(upload.receivedAt), \(Int64(upload.size)), \(upload.report))
                """, logger: logger)
            if !entries.isEmpty {
                // One statement for all entries.
                try await connection.query(
                    """
                    INSERT INTO midtier_client_log_entries
                        (upload_id, sequence, time, severity, severity_rank, correlation_id, source, location, message)
                    SELECT \(upload.id), e.* FROM unnest(\(entries.map { Int64($0.sequence) })::int8[], \(entries.map(\.time))::int8[],
                        \(entries.map(\.severity.rawValue))::text[], \(entries.map { Int32($0.severity.rank) })::int4[],
                        \(entries.map(\.correlationId))::text[], \(entries.map(\.source))::text[], \(entries.map(\.location))::text[],
                        \(entries.map(\.message))::text[]) AS e
                    """, logger: logger)
            }
            // The oldest go first until what is kept fits; never the upload just kept.
            var total = kept.reduce(Int64(upload.size)) { $0 + $1.size }
            var dropped: [String] = []
            for old in kept where total > Int64(bounds.bytesPerRegistration) {
                dropped.append(old.id)
                total -= old.size
            }
            // Then the user's, over all registrations, the same way.
            var userKept: [(id: String, size: Int64)] = []
            for try await (id, size) in try await connection.query(
                """
                SELECT id, size FROM midtier_client_uploads WHERE user_realm = \(upload.user.realm) AND user_id = \(upload.user.id)
                    AND kind = \(upload.kind.rawValue) AND id <> \(upload.id) ORDER BY received_at, id
                """, logger: logger
            ).decode((String, Int64).self) where !dropped.contains(id) { userKept.append((id, size)) }
            var userTotal = userKept.reduce(Int64(upload.size)) { $0 + $1.size }
            for old in userKept where userTotal > Int64(bounds.bytesPerUser) {
                dropped.append(old.id)
                userTotal -= old.size
            }
            if !dropped.isEmpty {
                try await connection.query("DELETE FROM midtier_client_log_entries WHERE upload_id = ANY(\(dropped)::text[])", logger: logger)
                try await connection.query("DELETE FROM midtier_client_uploads WHERE id = ANY(\(dropped)::text[])", logger: logger)
            }
            return .saved(dropped: dropped.count)
        }
    }

    package func clientLogs(
        matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientLogRecord] {
        try await read { client, logger in
            var query = PostgresQuery(
                unsafeSQL: """
                    SELECT \(Self.uploadColumns), e.sequence, e.time, e.severity, e.correlation_id, e.source, e.location, e.message
                    FROM midtier_client_log_entries e JOIN midtier_client_uploads u ON u.id = e.upload_id WHERE TRUE
                    """)
            Self.append(filter, time: "e.time", to: &query)
            if let minimum = filter.minimumSeverity {
                query.binds.append(Int32(minimum.rank))
                query.sql += " AND e.severity_rank >= $\(query.binds.count)"
            }
            if let text = filter.text {
                // strpos, not LIKE: % and _ are text like any other.
                query.binds.append(text)
                query.sql += " AND strpos(e.message, $\(query.binds.count)) > 0"
            }
            if let cursor {
                query.binds.append(cursor.time)
                query.binds.append(cursor.upload)
                query.binds.append(Int64(cursor.sequence))
                let n = query.binds.count
                query.sql += " AND (e.time, e.upload_id, e.sequence) < ($\(n - 2), $\(n - 1), $\(n))"
            }
            query.binds.append(Int64(max(0, limit)))
            query.sql += " ORDER BY e.time DESC, e.upload_id DESC, e.sequence DESC LIMIT $\(query.binds.count)"
            var records: [ClientLogRecord] = []
            let rows = try await client.query(query, logger: logger).decode(
                (
                    String, String, String, String, String, String, String, Int64, Int64, String,
                    Int64, Int64, String, String, String, String, String
                ).self)
            for try await row in rows {
                let upload = Self.clientUpload(row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9)
                records.append(
                    ClientLogRecord(
                        entry: ClientLogEntry(
                            upload: upload.id, sequence: Int(row.10), time: row.11,
                            severity: ClientLogSeverity(rawValue: row.12) ?? .fatal,
                            correlationId: row.13, source: row.14, location: row.15, message: row.16),
                        upload: upload))
            }
            return records
        }
    }

    package func clientUploads(
        _ kind: ClientUploadKind, matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientUpload] {
        try await read { client, logger in
            var query: PostgresQuery = "SELECT \(unescaped: Self.uploadColumns) FROM midtier_client_uploads u WHERE u.kind = \(kind.rawValue)"
            Self.append(filter, time: "u.received_at", to: &query)
            if let cursor {
                query.binds.append(cursor.time)
                query.binds.append(cursor.upload)
                query.sql += " AND (u.received_at, u.id) < ($\(query.binds.count - 1), $\(query.binds.count))"
            }
            query.binds.append(Int64(max(0, limit)))
            query.sql += " ORDER BY u.received_at DESC, u.id DESC LIMIT $\(query.binds.count)"
            var uploads: [ClientUpload] = []
            let rows = try await client.query(query, logger: logger)
                .decode((String, String, String, String, String, String, String, Int64, Int64, String).self)
            for try await row in rows {
                uploads.append(Self.clientUpload(row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9))
            }
            return uploads
        }
    }

    package func purgeClientUploads(receivedBefore cutoff: Int64) async throws(StoreError) -> Int {
        try await write(lock: nil) { connection, logger in
            try await connection.query(
                """
                DELETE FROM midtier_client_log_entries WHERE upload_id IN (SELECT id FROM midtier_client_uploads WHERE received_at < \(cutoff))
                """, logger: logger)
            var purged = 0
            for try await _ in try await connection.query(
                """
                DELETE FROM midtier_client_uploads WHERE received_at < \(cutoff) RETURNING 1
                """, logger: logger)
            { purged += 1 }
            return purged
        }
    }

    // MARK: Changes made by any instance

    /// The newest change's sequence number (0 for none).
    package func newestChange() async throws(StoreError) -> Int64 {
        try await read { client, logger in
            var newest: Int64 = 0
            for try await value in try await client.query("SELECT COALESCE(MAX(sequence), 0) FROM midtier_change", logger: logger).decode(Int64.self)
            {
                newest = value
            }
            return newest
        }
    }

    /// Changes after sequence `after`, oldest first, at most `limit`; and whether some that
    /// followed `after` were pruned already (the caller then cannot catch up by number).
    package func changes(after: Int64, limit: Int = 10_000) async throws(StoreError) -> (changes: [(Int64, StoreChange)], gap: Bool) {
        try await read { client, logger in
            var oldest: Int64 = 0
            for try await value in try await client.query("SELECT COALESCE(MIN(sequence), 0) FROM midtier_change", logger: logger).decode(Int64.self)
            {
                oldest = value
            }
            var found: [(Int64, StoreChange)] = []
            let rows = try await client.query(
                """
                SELECT sequence, kind, key_a, key_b FROM midtier_change WHERE sequence > \(after) ORDER BY sequence LIMIT \(Int64(limit))
                """, logger: logger)
            for try await (sequence, kind, first, second) in rows.decode((Int64, String, String, String).self) {
                if let change = StoreChange(kind: kind, first: first, second: second) { found.append((sequence, change)) }
            }
            return (found, oldest > after + 1 && oldest != 0)
        }
    }

    /// Forgets changes older than `milliseconds` ago (every instance has long applied them).
    package func pruneChanges(olderThan milliseconds: Int64) async throws(StoreError) {
        let cutoff = self.clock.now() - milliseconds
        try await read { client, logger in
            try await client.query("DELETE FROM midtier_change WHERE at < \(cutoff)", logger: logger)
        }
    }

    // MARK: Audit

    package func appendAudit(_ entry: AuditEntry) async throws(StoreError) {
        try await write { connection, logger in try await Self.append(entry, on: connection, logger: logger) }
    }

    package func audit(since: Int64, after: Int64, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await rows(AuditRules.entries(since: since, after: after, limit: limit)) { try AuditRules.entry($0) }
    }

    package func recentAudit(before: Int64?, about subject: AuditSubject?, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await rows(AuditRules.recent(before: before, about: subject, limit: limit)) { try AuditRules.entry($0) }
    }

    // MARK: What else it offers

    /// Push notifications: PostgresStore+Push.swift.
    package var pushStore: (any PushStore)? { self }
    /// Several instances share a PostgreSQL store: each follows the others' changes.
    package func changeFeed() -> PostgresChangeFeed? { PostgresChangeFeed(store: self, logger: logger) }

    package func ping() async -> Bool {
        do {
            // A load balancer's probe must get its answer within a couple of seconds.
            let one: Int32 = try await read(within: .seconds(2)) { client, logger in
                var one: Int32 = 0
                let rows = try await client.query("SELECT 1::INT4", logger: logger)
                for try await value in rows.decode(Int32.self) { one = value }
                return one
            }
            return one == 1
        } catch {
            return false
        }
    }
}

/// An operation ran past its deadline.
struct DeadlineExceeded: Error {}
