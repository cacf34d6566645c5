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
            // A store a newer Midtier migrated is refused, as on PostgreSQL (docs/operations.md,
            // "Upgrades"): GRDB would go on with the migrations it knows.
            let migrator = Self.migrator
            let unknown = try database.read { db in try migrator.appliedIdentifiers(db).subtracting(migrator.migrations) }
            guard unknown.isEmpty else {
                throw StoreError(
                    "the SQLite store at \(path) has migration(s) \(unknown.sorted().joined(separator: ", ")), newer than this Midtier knows "
                        + "(up to \(migrator.migrations.last ?? "none")); upgrade Midtier")
            }
            try migrator.migrate(database)
        } catch let error as StoreError {
            throw error
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
        migrator.registerMigration("v12: registrations paged by id") { db in
            // The admin listings read a page at a time in the order of the ids' bytes
            // (RegistrationRules.registrations(matching:after:limit:)): each filter an index
            // range ending in the id. The user's index replaces registration_user (user_realm,
            // user_id), which it serves too.
            try db.execute(
                sql: """
                    CREATE INDEX registration_by_user ON registration(user_realm, user_id, id);
                    DROP INDEX registration_user;
                    CREATE INDEX registration_by_app ON registration(app_id, id);
                    CREATE INDEX registration_by_app_state ON registration(app_id, state, id);
                    CREATE INDEX registration_by_state ON registration(state, id);
                    """)
        }
        migrator.registerMigration("v13: push deliveries counted by state") { db in
            // How many of a notification's deliveries are in each state, from this index alone
            // (PushRules.deliveryStates(of:)): without it, counting a notification's million
            // deliveries read each of their rows (docs/admin.md, "Push notifications").
            try db.execute(sql: "CREATE INDEX push_deliveries_states ON push_deliveries(notification_id, state)")
        }
        migrator.registerMigration("v14: push deliveries claimed in due order") { db in
            // A claim (PushRules.claim) reads the due deliveries in this index's order and stops
            // at its limit; with only (state, next_attempt_at), the deliveries due at the same
            // time — all of a push to a whole app — were sorted again at every claim
            // (docs/benchmarks.md, "At enterprise size").
            try db.execute(
                sql: """
                    DROP INDEX push_deliveries_due;
                    CREATE INDEX push_deliveries_due ON push_deliveries(state, next_attempt_at, notification_id, registration_id);
                    """)
        }
        return migrator
    }

    // MARK: Running statements

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

    // MARK: Registrations (the statements: RegistrationRules)

    package func insert(_ r: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome {
        try await write { db in
            if try db.finds(RegistrationRules.retired(id: r.id)) { return .idTaken }
            if let maximumPerUser, try db.rows(RegistrationRules.count(of: r.user), { try $0.integer("count") }).first ?? 0 >= maximumPerUser {
                return .limitReached(limit: maximumPerUser)
            }
            if !r.deviceId.isEmpty, let held = try db.rows(RegistrationRules.heldDevice(of: r), { try $0.text("id") }).first {
                return .deviceHeld(id: held)
            }
            if let held = RegistrationRules.tokenHeldByAnotherUser(r), try db.finds(held) { return .tokenHeldByAnotherUser }
            guard try db.finds(RegistrationRules.insert(r)) else { return .idTaken }
            if let audit { try db.run(AuditRules.append(audit)) }
            return .inserted
        }
    }

    /// Writes `registrations` as they are, in one transaction, skipping ids in use: the bulk
    /// path that `midtier-bench make-store` fills a benchmark store with (docs/benchmarks.md).
    /// No audit, no per-user limit, no push-token check. Returns how many were written.
    package func importRegistrations(_ registrations: [Registration]) async throws(StoreError) -> Int {
        try await write { db in
            var written = 0
            for registration in registrations where try db.finds(RegistrationRules.insert(registration)) { written += 1 }
            return written
        }
    }

    package func registration(id: String) async throws(StoreError) -> Registration? {
        try await rows(RegistrationRules.registration(id: id)) { try RegistrationRules.registration($0) }.first
    }

    package func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock? {
        try await rows(RegistrationRules.registrationAndBlock(id: id)) { try RegistrationRules.registrationAndBlock($0) }.first
    }

    package func registrations(matching filter: RegistrationFilter) async throws(StoreError) -> [Registration] {
        try await rows(RegistrationRules.registrations(matching: filter)) { try RegistrationRules.registration($0) }
    }

    package func registrations(matching filter: RegistrationFilter, after: String?, limit: Int) async throws(StoreError) -> [Registration] {
        try await rows(RegistrationRules.registrations(matching: filter, after: after, limit: limit)) { try RegistrationRules.registration($0) }
    }

    package func pushTargets(app: String, providers: [PushProvider], after: String?, limit: Int) async throws(StoreError) -> [String] {
        guard !providers.isEmpty else { return [] }
        return try await rows(RegistrationRules.pushTargets(app: app, providers: providers, after: after, limit: limit)) { try $0.text("id") }
    }

    package func updateDevice(_ r: Registration, audit: AuditEntry?) async throws(StoreError) -> DeviceWrite {
        try await write { db in
            // One writer at a time: no other write can take the token between the look and the write.
            if let held = RegistrationRules.tokenHeldByAnotherUser(r), try db.finds(held) { return .tokenHeldByAnotherUser }
            guard try db.finds(RegistrationRules.updateDevice(r)) else { return .notFound }
            if let audit { try db.run(AuditRules.append(audit)) }
            return .written
        }
    }

    package func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition {
        try await write { db in
            guard var registration = try db.rows(RegistrationRules.registration(id: id), RegistrationRules.registration).first else {
                return .notFound
            }
            guard allowedFrom.contains(registration.state) else { return .refused(current: registration.state) }
            try db.run(RegistrationRules.setState(state, id: id))
            for rows in RegistrationRows.deleted(changingTo: state) { try db.run(rows.deletion(of: id)) }
            try db.run(AuditRules.append(audit))
            registration.state = state
            return .changed(registration)
        }
    }

    package func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome {
        try await write { db in
            guard let registration = try db.rows(RegistrationRules.registration(id: id), RegistrationRules.registration).first else {
                return .notFound
            }
            guard allowedFrom.contains(registration.state) else { return .refused(current: registration.state) }
            try db.run(RegistrationRules.delete(id: id))
            for rows in RegistrationRows.deletedWithTheRegistration { try db.run(rows.deletion(of: id)) }
            try db.run(RegistrationRules.retire(id: id, at: audit?.at ?? self.clock.now()))
            if let audit { try db.run(AuditRules.append(audit)) }
            return .deleted(registration)
        }
    }

    package func recordContacts(_ contacts: [Contact]) async throws(StoreError) {
        guard !contacts.isEmpty else { return }
        try await write { db in
            for contact in contacts { try db.run(RegistrationRules.contact(contact)) }
        }
    }

    // MARK: Blocks

    package func block(of user: UserIdentity) async throws(StoreError) -> UserBlock? {
        try await rows(RegistrationRules.block(of: user)) { try RegistrationRules.block($0, of: user) }.first
    }

    package func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError) {
        try await write { db in
            try db.run(RegistrationRules.setBlock(block))
            try db.run(AuditRules.append(audit))
        }
    }

    package func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await write { db in
            guard try db.finds(RegistrationRules.removeBlock(of: user)) else { return false }
            try db.run(AuditRules.append(audit))
            return true
        }
    }

    package func purgeTokens(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) {
        // Tokens live in this instance's memory only; nothing else shares an SQLite store.
        try await appendAudit(audit)
    }

    // MARK: Back-end sessions (the statements: BackendSessionRules)

    package func backendSession(registration: String, destination: String, now: Int64) async throws(StoreError) -> SealedBackendSession? {
        try await rows(BackendSessionRules.session(registration: registration, destination: destination, now: now)) {
            try BackendSessionRules.session($0, registration: registration, destination: destination)
        }.first
    }

    package func saveBackendSession(_ session: SealedBackendSession, now: Int64) async throws(StoreError) -> BackendSessionSave {
        try await write { db in
            try db.run(BackendSessionRules.dropExpired(now: now))
            guard try db.finds(RegistrationRules.active(id: session.registration)) else { return .inactive }
            return try db.finds(BackendSessionRules.save(session)) ? .saved : .stale
        }
    }

    // MARK: Page sessions (the statements: PageSessionRules)

    package func startPageSession(_ session: StoredPageSession, bounds: PageSessionBounds, now: Int64) async throws(StoreError) {
        try await write { db in
            try db.run(PageSessionRules.dropOver(now: now))
            try db.run(PageSessionRules.trim(site: session.site, subject: session.subject, keeping: bounds.perSubject - 1))
            try db.run(PageSessionRules.trim(site: session.site, keeping: bounds.capacity - 1))
            guard try db.finds(PageSessionRules.insert(session)) else { throw PageSessionKeyInUse() }
        }
    }

    package func usePageSession(key: String, site: String, now: Int64, takingNotice: Bool) async throws(StoreError) -> StoredPageSession? {
        try await write { db in
            guard var session = try db.rows(PageSessionRules.session(key: key, site: site), PageSessionRules.session).first else { return nil }
            guard !session.isOver(at: now) else {
                try db.run(PageSessionRules.delete(key: key))
                return nil
            }
            session.lastSeen = max(session.lastSeen, now)
            try db.run(PageSessionRules.touch(key: key, lastSeen: session.lastSeen, takingNotice: takingNotice))
            if !takingNotice { session.notice = nil }
            return session
        }
    }

    package func endPageSession(key: String, site: String) async throws(StoreError) {
        try await write { db in try db.run(PageSessionRules.end(key: key, site: site)) }
    }

    package func leavePageNotice(_ notice: String, key: String, site: String) async throws(StoreError) {
        try await write { db in try db.run(PageSessionRules.leaveNotice(notice, key: key, site: site)) }
    }

    // MARK: User and device storage (the statements: StorageRules)

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
            if case .registration(let id) = key.level, try !db.finds(RegistrationRules.active(id: id, app: key.app, user: key.user)) {
                return .registrationInactive
            }
            switch edit(try db.rows(StorageRules.document(key)) { try $0.text("document") }.first) {
            case .refuse(let reason):
                return .refused(reason)
            case .remove:
                try db.run(StorageRules.remove(key))
                return .removed
            case .set(let text):
                let others = try db.rows(StorageRules.sizeBeside(key)) { try $0.integer("size") }.first ?? 0
                guard others + Int64(key.storedSize(of: text)) <= Int64(userLimit) else { return .overUserLimit(limit: userLimit) }
                try db.run(StorageRules.set(key, to: text, now: now))
                return .written
            }
        }
    }

    package func storageEntries(of user: UserIdentity) async throws(StoreError) -> [StorageEntry] {
        try await rows(StorageRules.entries(of: user)) { try StorageRules.entry($0, of: user) }
    }

    // MARK: Client logs and usage (the statements: ClientUploadRules)

    package func saveClientUpload(
        _ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
        now: Int64
    ) async throws(StoreError) -> ClientUploadSave {
        try await write { db in
            guard try db.finds(RegistrationRules.active(id: upload.registration, app: upload.app, user: upload.user)) else {
                return .registrationInactive
            }
            let recent =
                try db.rows(
                    ClientUploadRules.count(of: upload.kind, registration: upload.registration, since: now - bounds.window)
                ) { try $0.integer("count") }.first ?? 0
            guard recent < bounds.uploadsPerWindow else { return .tooMany }
            let kept = try db.rows(ClientUploadRules.kept(upload.kind, registration: upload.registration), ClientUploadRules.sized)
            try db.run(ClientUploadRules.insert(upload))
            for start in stride(from: 0, to: entries.count, by: ClientUploadRules.entriesPerInsert) {
                try db.run(
                    ClientUploadRules.insert(entries[start..<min(start + ClientUploadRules.entriesPerInsert, entries.count)], of: upload.id),
                    cached: false)
            }
            // The oldest go first until what is kept fits; never the upload just kept. Then the
            // user's, over all registrations, the same way.
            let dropped = ClientUploadRules.dropped(from: kept, adding: upload.size, limit: bounds.bytesPerRegistration)
            try Self.delete(uploads: dropped, in: db)
            let userKept = try db.rows(ClientUploadRules.kept(upload.kind, user: upload.user, besides: upload.id), ClientUploadRules.sized)
            let userDropped = ClientUploadRules.dropped(from: userKept, adding: upload.size, limit: bounds.bytesPerUser)
            try Self.delete(uploads: userDropped, in: db)
            return .saved(dropped: dropped.count + userDropped.count)
        }
    }

    private static func delete(uploads ids: [String], in db: Database) throws {
        for start in stride(from: 0, to: ids.count, by: ClientUploadRules.uploadsPerDelete) {
            let chunk = ids[start..<min(start + ClientUploadRules.uploadsPerDelete, ids.count)]
            for statement in ClientUploadRules.delete(uploads: chunk) { try db.run(statement, cached: false) }
        }
    }

    package func clientLogs(
        matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientLogRecord] {
        try await rows(ClientUploadRules.logs(matching: filter, after: cursor, limit: limit)) { try ClientUploadRules.log($0) }
    }

    package func clientUploads(
        _ kind: ClientUploadKind, matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientUpload] {
        try await rows(ClientUploadRules.uploads(kind, matching: filter, after: cursor, limit: limit)) { try ClientUploadRules.upload($0) }
    }

    package func purgeClientUploads(receivedBefore cutoff: Int64) async throws(StoreError) -> Int {
        try await write { db in
            let (entries, uploads) = ClientUploadRules.purge(receivedBefore: cutoff)
            try db.run(entries)
            return try db.rows(uploads) { _ in () }.count
        }
    }

    // MARK: Audit

    package func appendAudit(_ entry: AuditEntry) async throws(StoreError) {
        try await write { db in try db.run(AuditRules.append(entry)) }
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
