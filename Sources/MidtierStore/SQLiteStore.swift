import Foundation
import GRDB
package import MidtierCore

/// The embedded store: one SQLite file in WAL mode through GRDB. Each change is one
/// transaction with its audit entry, committed with `synchronous=FULL` before it returns, so
/// an acknowledged change survives a crash and a power loss.
package final class SQLiteStore: StateStore {
    private let database: DatabasePool
    /// The server's clock: when an id was retired without an audit entry to say.
    private let clock: WallClock

    /// Opens (creating if needed) the database at `path`, and its directory.
    package init(path: String, clock: WallClock = .system) throws(StoreError) {
        self.clock = clock
        do {
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            configuration.busyMode = .timeout(5)
            database = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(database)
        } catch {
            throw StoreError("cannot open the SQLite store at \(path): \(error)")
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: registrations") { db in
            try db.execute(
                sql: """
                    CREATE TABLE registration (
                        id TEXT PRIMARY KEY NOT NULL,
                        app_id TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        device_type TEXT NOT NULL,
                        device_model TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        form_factor TEXT NOT NULL,
                        apns_device_token TEXT NOT NULL,
                        android_gcm_registration_id TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        last_contact_at INTEGER NOT NULL,
                        state TEXT NOT NULL
                    );
                    CREATE INDEX registration_user ON registration(user_id);
                    """)
        }
        migrator.registerMigration("v2: blocks and audit") { db in
            try db.execute(
                sql: """
                    CREATE TABLE user_block (
                        user_id TEXT PRIMARY KEY NOT NULL,
                        kind TEXT NOT NULL,
                        reason TEXT NOT NULL,
                        since INTEGER NOT NULL,
                        blocked_by TEXT NOT NULL
                    );
                    CREATE TABLE audit (
                        sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                        at INTEGER NOT NULL,
                        actor TEXT NOT NULL,
                        action TEXT NOT NULL,
                        target TEXT NOT NULL,
                        detail TEXT NOT NULL,
                        source TEXT NOT NULL
                    );
                    CREATE INDEX audit_at ON audit(at);
                    """)
        }
        migrator.registerMigration("v3: realm-qualified users, retired registration ids") { db in
            // A user is a realm plus an id (docs/identity.md); rows from before are users.json
            // users, the realm ''. Text compares by bytes (BINARY), as identities must.
            try db.execute(
                sql: """
                    ALTER TABLE registration ADD COLUMN user_realm TEXT NOT NULL DEFAULT '';
                    DROP INDEX registration_user;
                    CREATE INDEX registration_user ON registration(user_realm, user_id);
                    CREATE TABLE user_block_v3 (
                        user_realm TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        reason TEXT NOT NULL,
                        since INTEGER NOT NULL,
                        blocked_by TEXT NOT NULL,
                        PRIMARY KEY (user_realm, user_id)
                    );
                    INSERT INTO user_block_v3 SELECT '', user_id, kind, reason, since, blocked_by FROM user_block;
                    DROP TABLE user_block;
                    ALTER TABLE user_block_v3 RENAME TO user_block;
                    CREATE TABLE retired_registration (
                        id TEXT PRIMARY KEY NOT NULL,
                        retired_at INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v4: sealed back-end sessions") { db in
            try db.execute(
                sql: """
                    CREATE TABLE backend_session (
                        registration_id TEXT NOT NULL,
                        destination TEXT NOT NULL,
                        sealed BLOB NOT NULL,
                        expires_at INTEGER,
                        stamp INTEGER NOT NULL,
                        PRIMARY KEY (registration_id, destination)
                    );
                    CREATE INDEX backend_session_expiry ON backend_session(expires_at) WHERE expires_at IS NOT NULL;
                    """)
        }
        migrator.registerMigration("v5: connection details") { db in
            try db.execute(sql: "ALTER TABLE registration ADD COLUMN details TEXT NOT NULL DEFAULT '{}'")
        }
        migrator.registerMigration("v6: audit by target and actor") { db in
            // The console's audit pages, filtered by a user or a registration, newest first.
            try db.execute(
                sql: """
                    CREATE INDEX audit_target ON audit(target, sequence);
                    CREATE INDEX audit_actor ON audit(actor, sequence);
                    """)
        }
        migrator.registerMigration("v7: page sessions") { db in
            // The console's and the self-service page's sessions, by the SHA-256 of their cookie
            // (docs/console.md, "Sessions").
            try db.execute(
                sql: """
                    CREATE TABLE page_session (
                        key TEXT PRIMARY KEY NOT NULL,
                        site TEXT NOT NULL,
                        subject_realm TEXT NOT NULL,
                        subject_id TEXT NOT NULL,
                        credential_stamp TEXT NOT NULL,
                        csrf_token TEXT NOT NULL,
                        started_at INTEGER NOT NULL,
                        ends_at INTEGER NOT NULL,
                        last_seen INTEGER NOT NULL,
                        idle_ms INTEGER NOT NULL,
                        notice TEXT
                    );
                    CREATE INDEX page_session_subject ON page_session(site, subject_realm, subject_id, last_seen);
                    CREATE INDEX page_session_last_seen ON page_session(site, last_seen);
                    """)
        }
        migrator.registerMigration("v8: user and device storage") { db in
            // The Storage service's currentuser and device levels (docs/device-api.md, "User and
            // device storage"): registration_id '' is the user level.
            try db.execute(
                sql: """
                    CREATE TABLE user_storage (
                        app_id TEXT NOT NULL,
                        user_realm TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        registration_id TEXT NOT NULL,
                        name TEXT NOT NULL,
                        document TEXT NOT NULL,
                        size INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL,
                        PRIMARY KEY (user_realm, user_id, app_id, registration_id, name)
                    );
                    CREATE INDEX user_storage_registration ON user_storage(registration_id) WHERE registration_id <> '';
                    """)
        }
        migrator.registerMigration("v9: client uploads") { db in
            // Client logs and usage reports (docs/device-api.md, "Client logs and usage"), each
            // upload on behalf of one registration; a log's entries one by one.
            try db.execute(
                sql: """
                    CREATE TABLE client_uploads (
                        id TEXT PRIMARY KEY NOT NULL,
                        kind TEXT NOT NULL,
                        app_id TEXT NOT NULL,
                        user_realm TEXT NOT NULL,
                        user_id TEXT NOT NULL,
                        registration_id TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        received_at INTEGER NOT NULL,
                        size INTEGER NOT NULL,
                        report TEXT NOT NULL
                    );
                    CREATE INDEX client_uploads_registration ON client_uploads(registration_id, kind, received_at);
                    CREATE INDEX client_uploads_user ON client_uploads(user_realm, user_id, kind, received_at);
                    CREATE INDEX client_uploads_received ON client_uploads(received_at);
                    CREATE TABLE client_log_entries (
                        upload_id TEXT NOT NULL,
                        sequence INTEGER NOT NULL,
                        time INTEGER NOT NULL,
                        severity TEXT NOT NULL,
                        severity_rank INTEGER NOT NULL,
                        correlation_id TEXT NOT NULL,
                        source TEXT NOT NULL,
                        location TEXT NOT NULL,
                        message TEXT NOT NULL,
                        PRIMARY KEY (upload_id, sequence)
                    );
                    CREATE INDEX client_log_entries_time ON client_log_entries(time, upload_id, sequence);
                    """)
        }
        migrator.registerMigration("v10: push notifications") { db in
            // Notifications as their senders gave them, and one delivery per registration, each
            // leased to one worker at a time (docs/push.md, "Delivery").
            try db.execute(
                sql: """
                    CREATE TABLE push_notifications (
                        id TEXT PRIMARY KEY NOT NULL,
                        app_id TEXT NOT NULL,
                        sender TEXT NOT NULL,
                        payload TEXT NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    CREATE INDEX push_notifications_created ON push_notifications(created_at, id);
                    CREATE INDEX push_notifications_app ON push_notifications(app_id, created_at, id);
                    CREATE TABLE push_deliveries (
                        notification_id TEXT NOT NULL,
                        registration_id TEXT NOT NULL,
                        state TEXT NOT NULL,
                        attempts INTEGER NOT NULL,
                        next_attempt_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL,
                        provider TEXT,
                        reason TEXT NOT NULL,
                        lease_owner TEXT,
                        lease_until INTEGER,
                        PRIMARY KEY (notification_id, registration_id)
                    );
                    CREATE INDEX push_deliveries_due ON push_deliveries(state, next_attempt_at);
                    """)
        }
        migrator.registerMigration("v11: storage sizes count document names") { db in
            // A document's size is its name and its text (StorageKey.storedSize), as the quota counts it.
            try db.execute(sql: "UPDATE user_storage SET size = size + length(CAST(name AS BLOB))")
        }
        return migrator
    }

    // MARK: Rows

    private static let columns =
        "id, app_id, user_realm, user_id, device_type, device_model, device_id, form_factor, apns_device_token, android_gcm_registration_id, created_at, last_contact_at, state, details"

    private static func registration(_ row: Row) -> Registration {
        Registration(
            id: row["id"], appId: row["app_id"], user: UserIdentity(realm: row["user_realm"], id: row["user_id"]),
            deviceType: row["device_type"], deviceModel: row["device_model"], deviceId: row["device_id"],
            formFactor: row["form_factor"], apnsDeviceToken: row["apns_device_token"],
            androidGcmRegistrationId: row["android_gcm_registration_id"],
            createdAt: row["created_at"], lastContactAt: row["last_contact_at"],
            // An unreadable state is treated as the safest one.
            state: Registration.State(rawValue: row["state"]) ?? .wiped,
            details: Registration.details(from: row["details"])
        )
    }

    private static func block(_ row: Row) -> UserBlock? {
        guard let user: String = row["b_user_id"], let realm: String = row["b_user_realm"] else { return nil }
        return UserBlock(
            user: UserIdentity(realm: realm, id: user), kind: UserBlock.Kind(rawValue: row["b_kind"]) ?? .all, reason: row["b_reason"],
            since: row["b_since"], by: row["b_blocked_by"])
    }

    private static let blockColumns =
        "b.user_realm AS b_user_realm, b.user_id AS b_user_id, b.kind AS b_kind, b.reason AS b_reason, b.since AS b_since, b.blocked_by AS b_blocked_by"

    private static func append(_ entry: AuditEntry, in db: Database) throws {
        try db.execute(
            sql: "INSERT INTO audit (at, actor, action, target, detail, source) VALUES (?,?,?,?,?,?)",
            arguments: [entry.at, entry.actor, entry.action, entry.target, entry.detail, entry.source])
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do {
            return try await database.write(body)
        } catch {
            throw StoreError("SQLite write failed: \(error)")
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do {
            return try await database.read(body)
        } catch {
            throw StoreError("SQLite read failed: \(error)")
        }
    }

    // MARK: Registrations

    package func insert(_ r: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome {
        try await write { db in
            if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM retired_registration WHERE id = ?)", arguments: [r.id]) == true {
                return .idTaken
            }
            if let maximumPerUser {
                let count =
                    try Int.fetchOne(
                        db, sql: "SELECT COUNT(*) FROM registration WHERE user_realm = ? AND user_id = ?",
                        arguments: [r.user.realm, r.user.id]) ?? 0
                if count >= maximumPerUser { return .limitReached(limit: maximumPerUser) }
            }
            if !r.deviceId.isEmpty,
                let held = try String.fetchOne(
                    db,
                    sql: """
                        SELECT id FROM registration WHERE app_id = ? AND user_realm = ? AND user_id = ? AND device_id = ? AND state <> 'active'
                        ORDER BY state = 'wiped' DESC, created_at LIMIT 1
                        """, arguments: [r.appId, r.user.realm, r.user.id, r.deviceId])
            {
                return .deviceHeld(id: held)
            }
            try db.execute(
                sql: "INSERT OR IGNORE INTO registration (\(Self.columns)) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                arguments: [
                    r.id, r.appId, r.user.realm, r.user.id, r.deviceType, r.deviceModel, r.deviceId, r.formFactor,
                    r.apnsDeviceToken, r.androidGcmRegistrationId, r.createdAt, r.lastContactAt, r.state.rawValue,
                    r.detailsText,
                ])
            guard db.changesCount == 1 else { return .idTaken }
            if let audit { try Self.append(audit, in: db) }
            return .inserted
        }
    }

    package func registration(id: String) async throws(StoreError) -> Registration? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.columns) FROM registration WHERE id = ?", arguments: [id]).map(Self.registration)
        }
    }

    package func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock? {
        try await read { db in
            let sql = """
                SELECT r.*, \(Self.blockColumns) FROM registration r
                LEFT JOIN user_block b ON b.user_realm = r.user_realm AND b.user_id = r.user_id WHERE r.id = ?
                """
            return try Row.fetchOne(db, sql: sql, arguments: [id]).map {
                RegistrationAndBlock(registration: Self.registration($0), block: Self.block($0))
            }
        }
    }

    package func registrations(matching filter: RegistrationFilter) async throws(StoreError) -> [Registration] {
        try await read { db in
            var conditions: [String] = []
            var arguments: StatementArguments = []
            if let user = filter.user { conditions.append("user_realm = ? AND user_id = ?"); arguments += [user.realm, user.id] }
            if let app = filter.app { conditions.append("app_id = ?"); arguments += [app] }
            if let state = filter.state { conditions.append("state = ?"); arguments += [state.rawValue] }
            let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            return try Row.fetchAll(
                db, sql: "SELECT \(Self.columns) FROM registration \(whereClause) ORDER BY created_at, id",
                arguments: arguments
            ).map(Self.registration)
        }
    }

    package func updateDevice(_ r: Registration, audit: AuditEntry?) async throws(StoreError) -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE registration SET device_type = ?, device_model = ?, device_id = ?, form_factor = ?,
                        apns_device_token = ?, android_gcm_registration_id = ?, details = ? WHERE id = ?
                    """,
                arguments: [
                    r.deviceType, r.deviceModel, r.deviceId, r.formFactor, r.apnsDeviceToken, r.androidGcmRegistrationId,
                    r.detailsText, r.id,
                ])
            guard db.changesCount == 1 else { return false }
            if let audit { try Self.append(audit, in: db) }
            return true
        }
    }

    package func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition {
        try await write { db in
            guard
                var registration = try Row.fetchOne(db, sql: "SELECT \(Self.columns) FROM registration WHERE id = ?", arguments: [id])
                    .map(Self.registration)
            else { return .notFound }
            guard allowedFrom.contains(registration.state) else { return .refused(current: registration.state) }
            try db.execute(sql: "UPDATE registration SET state = ? WHERE id = ?", arguments: [state.rawValue, id])
            try Self.delete(RegistrationRows.deleted(changingTo: state), of: id, in: db)
            try Self.append(audit, in: db)
            registration.state = state
            return .changed(registration)
        }
    }

    package func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome {
        try await write { db in
            guard
                let registration = try Row.fetchOne(db, sql: "SELECT \(Self.columns) FROM registration WHERE id = ?", arguments: [id])
                    .map(Self.registration)
            else { return .notFound }
            guard allowedFrom.contains(registration.state) else { return .refused(current: registration.state) }
            try db.execute(sql: "DELETE FROM registration WHERE id = ?", arguments: [id])
            try Self.delete(RegistrationRows.deletedWithTheRegistration, of: id, in: db)
            try db.execute(
                sql: "INSERT OR IGNORE INTO retired_registration (id, retired_at) VALUES (?, ?)",
                arguments: [id, audit?.at ?? self.clock.now()])
            if let audit { try Self.append(audit, in: db) }
            return .deleted(registration)
        }
    }

    package func recordContacts(_ contacts: [Contact]) async throws(StoreError) {
        guard !contacts.isEmpty else { return }
        try await write { db in
            let update = try db.cachedStatement(sql: "UPDATE registration SET last_contact_at = ? WHERE id = ? AND last_contact_at < ?")
            for contact in contacts { try update.execute(arguments: [contact.at, contact.id, contact.at]) }
        }
    }

    // MARK: Blocks

    package func block(of user: UserIdentity) async throws(StoreError) -> UserBlock? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT \(Self.blockColumns) FROM user_block b WHERE b.user_realm = ? AND b.user_id = ?",
                arguments: [user.realm, user.id]
            ).flatMap(Self.block)
        }
    }

    package func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError) {
        try await write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO user_block (user_realm, user_id, kind, reason, since, blocked_by) VALUES (?,?,?,?,?,?)",
                arguments: [block.user.realm, block.user.id, block.kind.rawValue, block.reason, block.since, block.by])
            try Self.append(audit, in: db)
        }
    }

    package func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM user_block WHERE user_realm = ? AND user_id = ?", arguments: [user.realm, user.id])
            guard db.changesCount == 1 else { return false }
            try Self.append(audit, in: db)
            return true
        }
    }

    package func purgeTokens(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) {
        // Tokens live in this instance's memory only; nothing else shares an SQLite store.
        try await appendAudit(audit)
    }

    // MARK: Back-end sessions

    package func backendSession(registration: String, destination: String, now: Int64) async throws(StoreError) -> SealedBackendSession? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT sealed, expires_at, stamp FROM backend_session
                    WHERE registration_id = ? AND destination = ? AND (expires_at IS NULL OR expires_at > ?)
                    """, arguments: [registration, destination, now]
            ).map { row in
                SealedBackendSession(
                    registration: registration, destination: destination,
                    sealed: Array((row["sealed"] as Data?) ?? Data()), expiresAt: row["expires_at"], stamp: row["stamp"])
            }
        }
    }

    package func saveBackendSession(_ session: SealedBackendSession, now: Int64) async throws(StoreError) -> BackendSessionSave {
        try await write { db in
            try db.execute(sql: "DELETE FROM backend_session WHERE expires_at <= ?", arguments: [now])
            guard
                try Bool.fetchOne(
                    db, sql: "SELECT 1 FROM registration WHERE id = ? AND state = 'active'",
                    arguments: [session.registration]) != nil
            else { return .inactive }
            try db.execute(
                sql: """
                    INSERT INTO backend_session (registration_id, destination, sealed, expires_at, stamp) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (registration_id, destination) DO UPDATE SET sealed = excluded.sealed, expires_at = excluded.expires_at,
                        stamp = excluded.stamp WHERE backend_session.stamp < excluded.stamp
                    """, arguments: [session.registration, session.destination, Data(session.sealed), session.expiresAt, session.stamp])
            return db.changesCount == 1 ? .saved : .stale
        }
    }

    // MARK: Page sessions

    private static func pageSession(_ row: Row) -> StoredPageSession {
        StoredPageSession(
            key: row["key"], site: row["site"], subject: UserIdentity(realm: row["subject_realm"], id: row["subject_id"]),
            credentialStamp: row["credential_stamp"], csrfToken: row["csrf_token"], startedAt: row["started_at"],
            endsAt: row["ends_at"], lastSeen: row["last_seen"], idleMilliseconds: row["idle_ms"], notice: row["notice"])
    }

    package func startPageSession(_ session: StoredPageSession, bounds: PageSessionBounds, now: Int64) async throws(StoreError) {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM page_session WHERE ends_at <= ? OR (last_seen < ? AND ? - last_seen >= idle_ms)",
                arguments: [now, now, now])
            try db.execute(
                sql: """
                    DELETE FROM page_session WHERE key IN (SELECT key FROM page_session WHERE site = ? AND subject_realm = ? AND subject_id = ?
                        ORDER BY last_seen DESC, key LIMIT -1 OFFSET ?)
                    """, arguments: [session.site, session.subject.realm, session.subject.id, max(0, bounds.perSubject - 1)])
            try db.execute(
                sql: """
                    DELETE FROM page_session WHERE key IN (SELECT key FROM page_session WHERE site = ? ORDER BY last_seen DESC, key LIMIT -1 OFFSET ?)
                    """, arguments: [session.site, max(0, bounds.capacity - 1)])
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO page_session (key, site, subject_realm, subject_id, credential_stamp, csrf_token, started_at, ends_at,
                        last_seen, idle_ms, notice) VALUES (?,?,?,?,?,?,?,?,?,?,?)
                    """,
                arguments: [
                    session.key, session.site, session.subject.realm, session.subject.id, session.credentialStamp,
                    session.csrfToken, session.startedAt, session.endsAt, session.lastSeen, session.idleMilliseconds, session.notice,
                ])
        }
    }

    package func usePageSession(key: String, site: String, now: Int64, takingNotice: Bool) async throws(StoreError) -> StoredPageSession? {
        try await write { db in
            guard
                var session = try Row.fetchOne(db, sql: "SELECT * FROM page_session WHERE key = ? AND site = ?", arguments: [key, site])
                    .map(Self.pageSession)
            else { return nil }
            guard !session.isOver(at: now) else {
                try db.execute(sql: "DELETE FROM page_session WHERE key = ?", arguments: [key])
                return nil
            }
            session.lastSeen = max(session.lastSeen, now)
            try db.execute(
                sql: "UPDATE page_session SET last_seen = ?, notice = CASE WHEN ? THEN NULL ELSE notice END WHERE key = ?",
                arguments: [session.lastSeen, takingNotice, key])
            if !takingNotice { session.notice = nil }
            return session
        }
    }

    package func endPageSession(key: String, site: String) async throws(StoreError) {
        try await write { db in try db.execute(sql: "DELETE FROM page_session WHERE key = ? AND site = ?", arguments: [key, site]) }
    }

    package func leavePageNotice(_ notice: String, key: String, site: String) async throws(StoreError) {
        try await write { db in
            try db.execute(sql: "UPDATE page_session SET notice = ? WHERE key = ? AND site = ?", arguments: [notice, key, site])
        }
    }

    // MARK: User and device storage

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
        try await write { db in
            if case .registration(let id) = key.level {
                guard
                    try Bool.fetchOne(
                        db,
                        sql: """
                            SELECT 1 FROM registration WHERE id = ? AND app_id = ? AND user_realm = ? AND user_id = ? AND state = 'active'
                            """, arguments: [id, key.app, key.user.realm, key.user.id]) != nil
                else { return .registrationInactive }
            }
            let place: StatementArguments = [key.user.realm, key.user.id, key.app, key.level.storedRegistration, key.name]
            let current = try String.fetchOne(
                db,
                sql: """
                    SELECT document FROM user_storage WHERE user_realm = ? AND user_id = ? AND app_id = ? AND registration_id = ? AND name = ?
                    """, arguments: place)
            switch edit(current) {
            case .refuse(let reason):
                return .refused(reason)
            case .remove:
                try db.execute(
                    sql: """
                        DELETE FROM user_storage WHERE user_realm = ? AND user_id = ? AND app_id = ? AND registration_id = ? AND name = ?
                        """, arguments: place)
                return .removed
            case .set(let text):
                let others =
                    try Int.fetchOne(
                        db,
                        sql: """
                            SELECT COALESCE(SUM(size), 0) FROM user_storage WHERE user_realm = ? AND user_id = ?
                                AND NOT (app_id = ? AND registration_id = ? AND name = ?)
                            """, arguments: place) ?? 0
                guard others + key.storedSize(of: text) <= userLimit else { return .overUserLimit(limit: userLimit) }
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO user_storage (user_realm, user_id, app_id, registration_id, name, document, size, updated_at)
                        VALUES (?,?,?,?,?,?,?,?)
                        """, arguments: place + [text, key.storedSize(of: text), now])
                return .written
            }
        }
    }

    package func storageEntries(of user: UserIdentity) async throws(StoreError) -> [StorageEntry] {
        try await rows(StorageRules.entries(of: user)) { try StorageRules.entry($0, of: user) }
    }

    // MARK: Client logs and usage

    private static let uploadColumns =
        "u.id, u.kind, u.app_id, u.user_realm, u.user_id, u.registration_id, u.device_id, u.received_at, u.size, u.report"

    private static func clientUpload(_ row: Row) -> ClientUpload {
        ClientUpload(
            id: row["id"], kind: ClientUploadKind(rawValue: row["kind"]) ?? .log, app: row["app_id"],
            user: UserIdentity(realm: row["user_realm"], id: row["user_id"]), registration: row["registration_id"],
            deviceId: row["device_id"], receivedAt: row["received_at"], size: row["size"], report: row["report"])
    }

    /// Deletes the rows of registration `id` that `rows` name (``RegistrationRows``).
    private static func delete(_ rows: [RegistrationRows], of id: String, in db: Database) throws {
        for rows in rows { try db.execute(sql: rows.deleteStatement(prefix: "", placeholder: "?"), arguments: [id]) }
    }

    /// The conditions `filter` sets on uploads (`u`), with `time` the column its from/until bound.
    private static func conditions(_ filter: ClientUploadFilter, time: String) -> (sql: [String], arguments: StatementArguments) {
        var sql: [String] = []
        var arguments: StatementArguments = []
        if let registration = filter.registration { sql.append("u.registration_id = ?"); arguments += [registration] }
        if let user = filter.user { sql.append("u.user_realm = ? AND u.user_id = ?"); arguments += [user.realm, user.id] }
        if let app = filter.app { sql.append("u.app_id = ?"); arguments += [app] }
        if let from = filter.from { sql.append("\(time) >= ?"); arguments += [from] }
        if let until = filter.until { sql.append("\(time) < ?"); arguments += [until] }
        return (sql, arguments)
    }

    package func saveClientUpload(
        _ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
        now: Int64
    ) async throws(StoreError) -> ClientUploadSave {
        try await write { db in
            guard
                try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT 1 FROM registration WHERE id = ? AND app_id = ? AND user_realm = ? AND user_id = ? AND state = 'active'
                        """, arguments: [upload.registration, upload.app, upload.user.realm, upload.user.id]) != nil
            else { return .registrationInactive }
            let recent =
                try Int.fetchOne(
                    db,
                    sql: """
                        SELECT COUNT(*) FROM client_uploads WHERE registration_id = ? AND kind = ? AND received_at >= ?
                        """, arguments: [upload.registration, upload.kind.rawValue, now - bounds.window]) ?? 0
            guard recent < bounds.uploadsPerWindow else { return .tooMany }
            let kept = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, size FROM client_uploads WHERE registration_id = ? AND kind = ? ORDER BY received_at, id
                    """, arguments: [upload.registration, upload.kind.rawValue]
            ).map { (id: $0["id"] as String, size: $0["size"] as Int) }
            try db.execute(
                sql: """
                    INSERT INTO client_uploads (id, kind, app_id, user_realm, user_id, registration_id, device_id, received_at, size, report)
                    VALUES (?,?,?,?,?,?,?,?,?,?)
                    """,
                arguments: [
                    upload.id, upload.kind.rawValue, upload.app, upload.user.realm, upload.user.id, upload.registration,
                    upload.deviceId, upload.receivedAt, upload.size, upload.report,
                ])
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO client_log_entries (upload_id, sequence, time, severity, severity_rank, correlation_id, source, location, message)
                    VALUES (?,?,?,?,?,?,?,?,?)
                    """)
            for entry in entries {
                try insert.execute(arguments: [
                    upload.id, entry.sequence, entry.time, entry.severity.rawValue, entry.severity.rank,
                    entry.correlationId, entry.source, entry.location, entry.message,
                ])
            }
            // The oldest go first until what is kept fits; never the upload just kept.
            var total = kept.reduce(upload.size) { $0 + $1.size }
            var dropped = 0
            let deleteEntries = try db.cachedStatement(sql: "DELETE FROM client_log_entries WHERE upload_id = ?")
            let deleteUpload = try db.cachedStatement(sql: "DELETE FROM client_uploads WHERE id = ?")
            for old in kept where total > bounds.bytesPerRegistration {
                try deleteEntries.execute(arguments: [old.id])
                try deleteUpload.execute(arguments: [old.id])
                total -= old.size
                dropped += 1
            }
            // Then the user's, over all registrations, the same way.
            let userKept = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, size FROM client_uploads WHERE user_realm = ? AND user_id = ? AND kind = ? AND id <> ? ORDER BY received_at, id
                    """, arguments: [upload.user.realm, upload.user.id, upload.kind.rawValue, upload.id]
            ).map { (id: $0["id"] as String, size: $0["size"] as Int) }
            var userTotal = userKept.reduce(upload.size) { $0 + $1.size }
            for old in userKept where userTotal > bounds.bytesPerUser {
                try deleteEntries.execute(arguments: [old.id])
                try deleteUpload.execute(arguments: [old.id])
                userTotal -= old.size
                dropped += 1
            }
            return .saved(dropped: dropped)
        }
    }

    package func clientLogs(
        matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientLogRecord] {
        try await read { db in
            var (conditions, arguments) = Self.conditions(filter, time: "e.time")
            if let minimum = filter.minimumSeverity { conditions.append("e.severity_rank >= ?"); arguments += [minimum.rank] }
            // instr, not LIKE: % and _ are text like any other.
            if let text = filter.text { conditions.append("instr(e.message, ?) > 0"); arguments += [text] }
            if let cursor {
                conditions.append("(e.time, e.upload_id, e.sequence) < (?, ?, ?)")
                arguments += [cursor.time, cursor.upload, cursor.sequence]
            }
            let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            arguments += [max(0, limit)]
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.uploadColumns), e.sequence, e.time, e.severity, e.correlation_id, e.source, e.location, e.message
                    FROM client_log_entries e JOIN client_uploads u ON u.id = e.upload_id \(whereClause)
                    ORDER BY e.time DESC, e.upload_id DESC, e.sequence DESC LIMIT ?
                    """, arguments: arguments
            ).map { row in
                let upload = Self.clientUpload(row)
                return ClientLogRecord(
                    entry: ClientLogEntry(
                        upload: upload.id, sequence: row["sequence"], time: row["time"],
                        severity: ClientLogSeverity(rawValue: row["severity"]) ?? .fatal,
                        correlationId: row["correlation_id"], source: row["source"], location: row["location"],
                        message: row["message"]),
                    upload: upload)
            }
        }
    }

    package func clientUploads(
        _ kind: ClientUploadKind, matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientUpload] {
        try await read { db in
            var (conditions, arguments) = Self.conditions(filter, time: "u.received_at")
            conditions.append("u.kind = ?")
            arguments += [kind.rawValue]
            if let cursor {
                conditions.append("(u.received_at, u.id) < (?, ?)")
                arguments += [cursor.time, cursor.upload]
            }
            arguments += [max(0, limit)]
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.uploadColumns) FROM client_uploads u WHERE \(conditions.joined(separator: " AND "))
                    ORDER BY u.received_at DESC, u.id DESC LIMIT ?
                    """, arguments: arguments
            ).map(Self.clientUpload)
        }
    }

    package func purgeClientUploads(receivedBefore cutoff: Int64) async throws(StoreError) -> Int {
        try await write { db in
            try db.execute(
                sql: """
                    DELETE FROM client_log_entries WHERE upload_id IN (SELECT id FROM client_uploads WHERE received_at < ?)
                    """, arguments: [cutoff])
            try db.execute(sql: "DELETE FROM client_uploads WHERE received_at < ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    // MARK: Audit

    package func appendAudit(_ entry: AuditEntry) async throws(StoreError) {
        try await write { db in try Self.append(entry, in: db) }
    }

    package func audit(since: Int64, after: Int64, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await rows(AuditRules.entries(since: since, after: after, limit: limit)) { try AuditRules.entry($0) }
    }

    package func recentAudit(before: Int64?, about subject: AuditSubject?, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await rows(AuditRules.recent(before: before, about: subject, limit: limit)) { try AuditRules.entry($0) }
    }

    package func ping() async -> Bool {
        (try? await read { db in try Int.fetchOne(db, sql: "SELECT 1") }) == 1
    }

    // MARK: What else it offers

    /// Push notifications: SQLiteStore+Push.swift.
    package var pushStore: (any PushStore)? { self }
    /// None: one instance owns an SQLite store, and its own writes keep memory exact.
    package func changeFeed() -> PostgresChangeFeed? { nil }
}
