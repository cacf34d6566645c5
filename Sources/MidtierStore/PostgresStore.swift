import Foundation
package import Logging
package import MidtierCore
import NIOSSL
import PostgresNIO
import Synchronization

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
/// Every operation has a deadline (`operationTimeout`): with the server gone, an operation fails
/// with `StoreError` (503 for the caller) within it instead of waiting for a connection. A write
/// that has its connection runs to its end, and what it answers is what the store did: the
/// server bounds each of its statements by the same deadline (`statement_timeout`, set in the
/// transaction, so PgBouncer in transaction mode passes it), and a statement past it rolls the
/// transaction back (docs/operations.md, "Store deadlines"; PostgresDeadline.swift).
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
    /// Whether the reads on the request path are sent prepared (PostgresPreparedReads.swift):
    /// as the URL says, until a connection loses a statement it prepared.
    let preparing: Atomic<Bool>
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
        self.preparing = Atomic(location.preparedStatements)
        let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
        self.client = client
        self.runner = Task { await client.run() }
        do {
            // Reaching the server is bounded tightly; a migration gets the time its work takes
            // (building an index over a million registrations, another instance migrating
            // first), bounded only against a hang (docs/operations.md, "Upgrades").
            try await withDeadline(.seconds(30)) { try await Self.probe(location, logger: logger) }
            try await withDeadline(Self.migrationDeadline) { try await PostgresSchema.migrate(client, logger: logger) }
        } catch {
            runner.cancel()
            throw StoreError("cannot open the PostgreSQL store at \(location.description): \(Self.describe(error))")
        }
    }

    /// The longest a start waits for the schema's migrations.
    static let migrationDeadline: Duration = .seconds(30 * 60)

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
        if let transaction = error as? PostgresTransactionError {
            if let commit = transaction.commitError {
                // The server refused the commit: nothing was written. Anything else (the
                // connection lost while it committed): nobody here knows.
                if let refused = commit as? PSQLError, refused.code == .server { return describe(refused) }
                return "the commit got no answer (\(describe(commit))); whether the write was made is not known"
            }
            if let cause = transaction.closureError ?? transaction.beginError { return describe(cause) }
        }
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
        if error is DeadlineExceeded { return "no connection within the deadline" }
        if let silent = error as? ServerSilent { return silent.description }
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
    /// sequences; nil: none). `limit` bounds the wait for a connection — past it the write fails
    /// and nothing was written — and each statement (the server's `statement_timeout`); once
    /// the transaction runs, its outcome is the answer. Before, a write past the deadline
    /// answered a failure and was committed all the same (outside attack F3). The transaction
    /// may stay idle no longer than `withConnection` waits for a silent server
    /// (`idle_in_transaction_session_timeout`): an instance that stops inside a write (frozen,
    /// cut off) holds the write lock, and every instance's writes with it, for that long only.
    func write<T: Sendable>(
        within limit: Duration? = nil, lock: Int64? = PostgresStore.writeLock,
        _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws(StoreError) -> T {
        let logger = self.logger
        let limit = limit ?? operationTimeout
        let statementLimit = String(Self.milliseconds(limit))
        let idleLimit = String(Self.milliseconds(limit + grace(limit)))
        do {
            return try await withConnection(within: limit) { connection in
                try await connection.withTransaction(logger: logger) { connection in
                    try await connection.query(
                        """
                        SELECT set_config('statement_timeout', \(statementLimit), true),
                            set_config('idle_in_transaction_session_timeout', \(idleLimit), true)
                        """, logger: logger)
                    if let lock { try await connection.query("SELECT pg_advisory_xact_lock(\(lock))", logger: logger) }
                    return try await body(connection, logger)
                }
            }
        } catch {
            throw StoreError("PostgreSQL write failed: \(Self.describe(error))")
        }
    }

    /// One read on a connection of its own, with the same deadline as a write (`withConnection`).
    func read<T: Sendable>(
        within limit: Duration? = nil, silentAfter: Duration? = nil,
        _ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T
    ) async throws(StoreError) -> T {
        let logger = self.logger
        do {
            return try await withConnection(within: limit ?? operationTimeout, silentAfter: silentAfter) { try await body($0, logger) }
        } catch {
            throw StoreError("PostgreSQL read failed: \(Self.describe(error))")
        }
    }

    // MARK: What only PostgreSQL does

    /// Records a change other instances must apply, and wakes them (delivered at commit).
    static func announce(_ change: StoreChange, at milliseconds: Int64, on connection: PostgresConnection, logger: Logger) async throws {
        let (kind, first, second) = change.columns
        try await connection.query(
            """
            INSERT INTO midtier_change (at, kind, key_a, key_b) VALUES (\(milliseconds), \(kind), \(first), \(second))
            """, logger: logger)
        try await connection.query("SELECT pg_notify(\(Self.changeChannel), '')", logger: logger)
    }

    /// Takes the transaction-scoped lock of class `lock` for `user`'s writes, so that a bound
    /// counted over the user's rows sees every write of the user before it (the realm's length
    /// keeps realm and id apart).
    static func lockWrites(of user: UserIdentity, class lock: Int32, on connection: PostgresConnection, logger: Logger) async throws {
        let key = "\(user.realm.utf8.count):\(user.realm)\(user.id)"
        try await connection.query("SELECT pg_advisory_xact_lock(\(lock), hashtext(\(key)))", logger: logger)
    }

    // MARK: Registrations (the statements: RegistrationRules)

    package func insert(_ r: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome {
        try await write { connection, logger in
            if try await connection.finds(RegistrationRules.retired(id: r.id), logger: logger) { return InsertOutcome.idTaken }
            if let maximumPerUser,
                try await connection.rows(RegistrationRules.count(of: r.user), logger: logger, { try $0.integer("count") }).first ?? 0
                    >= Int64(maximumPerUser)
            {
                return .limitReached(limit: maximumPerUser)
            }
            if !r.deviceId.isEmpty,
                let held = try await connection.rows(RegistrationRules.heldDevice(of: r), logger: logger, { try $0.text("id") }).first
            {
                return .deviceHeld(id: held)
            }
            // Under the write lock (like every announced write), so no other instance takes the
            // token between the look and the insert.
            if let held = RegistrationRules.tokenHeldByAnotherUser(r), try await connection.finds(held, logger: logger) {
                return .tokenHeldByAnotherUser
            }
            guard try await connection.finds(RegistrationRules.insert(r), logger: logger) else { return .idTaken }
            if let audit { try await connection.run(AuditRules.append(audit), logger: logger) }
            // Others may have remembered the id as unknown (a device that called before it
            // onboarded); they forget that (docs/identity.md, "Registration ids").
            try await Self.announce(.created(id: r.id), at: audit?.at ?? self.clock.now(), on: connection, logger: logger)
            return .inserted
        }
    }

    /// Writes `registrations` as they are, in one transaction, skipping ids in use: the bulk
    /// path that `midtier-bench make-store` fills a benchmark store with (docs/benchmarks.md).
    /// No audit, no per-user limit, no push-token check, and no change announced: for a store
    /// no instance serves yet. Returns how many were written.
    ///
    /// One statement for the whole batch (`unnest` of one array per column), as the contact
    /// writes do; before, one round trip per registration took 342–425 s for a million.
    package func importRegistrations(_ registrations: [Registration]) async throws(StoreError) -> Int {
        let r = registrations
        let ids = r.map(\.id), apps = r.map(\.appId), realms = r.map(\.user.realm), users = r.map(\.user.id)
        let types = r.map(\.deviceType), models = r.map(\.deviceModel), devices = r.map(\.deviceId), forms = r.map(\.formFactor)
        let apns = r.map(\.apnsDeviceToken), fcm = r.map(\.androidGcmRegistrationId)
        let created = r.map(\.createdAt), contacted = r.map(\.lastContactAt), states = r.map(\.state.rawValue)
        let details = r.map(\.detailsText)
        return try await write(within: .seconds(300)) { connection, logger in
            var written = 0
            let rows = try await connection.query(
                """
                INSERT INTO midtier_registration (\(unescaped: "\(RegistrationRules.columns)"))
                SELECT * FROM unnest(\(ids)::text[], \(apps)::text[], \(realms)::text[], \(users)::text[], \(types)::text[],
                    \(models)::text[], \(devices)::text[], \(forms)::text[], \(apns)::text[], \(fcm)::text[], \(created)::int8[],
                    \(contacted)::int8[], \(states)::text[], \(details)::text[])
                ON CONFLICT (id) DO NOTHING RETURNING id
                """, logger: logger)
            for try await _ in rows { written += 1 }
            return written
        }
    }

    package func registration(id: String) async throws(StoreError) -> Registration? {
        try await rows(RegistrationRules.registration(id: id)) { try RegistrationRules.registration($0) }.first
    }

    package func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock? {
        try await rows(prepared: RegistrationAndBlockRead(id: id)) { try RegistrationRules.registrationAndBlock($0) }.first
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
        try await write { connection, logger in
            // Under the write lock: no other instance takes the token between the look and the write.
            if let held = RegistrationRules.tokenHeldByAnotherUser(r), try await connection.finds(held, logger: logger) {
                return DeviceWrite.tokenHeldByAnotherUser
            }
            guard try await connection.finds(RegistrationRules.updateDevice(r), logger: logger) else { return .notFound }
            if let audit { try await connection.run(AuditRules.append(audit), logger: logger) }
            try await Self.announce(.device(id: r.id), at: audit?.at ?? self.clock.now(), on: connection, logger: logger)
            return .written
        }
    }

    package func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition {
        try await write { connection, logger in
            let found = try await connection.rows(RegistrationRules.registration(id: id, lock: .update), logger: logger) {
                try RegistrationRules.registration($0)
            }
            guard var registration = found.first else { return StateTransition.notFound }
            guard allowedFrom.contains(registration.state) else { return .refused(current: registration.state) }
            try await connection.run(RegistrationRules.setState(state, id: id), logger: logger)
            for rows in RegistrationRows.deleted(changingTo: state) { try await connection.run(rows.deletion(of: id), logger: logger) }
            try await connection.run(AuditRules.append(audit), logger: logger)
            try await Self.announce(.registration(id: id), at: audit.at, on: connection, logger: logger)
            registration.state = state
            return .changed(registration)
        }
    }

    package func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome {
        try await write { connection, logger in
            let found = try await connection.rows(RegistrationRules.registration(id: id, lock: .update), logger: logger) {
                try RegistrationRules.registration($0)
            }
            guard let registration = found.first else { return DeleteOutcome.notFound }
            guard allowedFrom.contains(registration.state) else { return .refused(current: registration.state) }
            let at = audit?.at ?? self.clock.now()
            try await connection.run(RegistrationRules.delete(id: id), logger: logger)
            for rows in RegistrationRows.deletedWithTheRegistration { try await connection.run(rows.deletion(of: id), logger: logger) }
            try await connection.run(RegistrationRules.retire(id: id, at: at), logger: logger)
            if let audit { try await connection.run(AuditRules.append(audit), logger: logger) }
            try await Self.announce(.registration(id: id), at: at, on: connection, logger: logger)
            return .deleted(registration)
        }
    }

    package func recordContacts(_ contacts: [Contact]) async throws(StoreError) {
        guard !contacts.isEmpty else { return }
        // Monotonic and unaudited: no write lock, no change to announce; one statement a batch
        // (the rule of each contact, RegistrationRules.contact, for many at once).
        let ids = contacts.map(\.id)
        let times = contacts.map(\.at)
        _ = try await read { connection, logger in
            try await connection.query(
                """
                UPDATE midtier_registration AS r SET last_contact_at = c.at
                FROM unnest(\(ids)::text[], \(times)::int8[]) AS c(id, at)
                WHERE r.id = c.id AND r.last_contact_at < c.at
                """, logger: logger)
        }
    }

    // MARK: Blocks

    package func block(of user: UserIdentity) async throws(StoreError) -> UserBlock? {
        try await rows(RegistrationRules.block(of: user)) { try RegistrationRules.block($0, of: user) }.first
    }

    package func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError) {
        try await write { connection, logger in
            try await connection.run(RegistrationRules.setBlock(block), logger: logger)
            try await connection.run(AuditRules.append(audit), logger: logger)
            try await Self.announce(.block(user: block.user), at: audit.at, on: connection, logger: logger)
        }
    }

    package func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await write { connection, logger in
            guard try await connection.finds(RegistrationRules.removeBlock(of: user), logger: logger) else { return false }
            try await connection.run(AuditRules.append(audit), logger: logger)
            try await Self.announce(.block(user: user), at: audit.at, on: connection, logger: logger)
            return true
        }
    }

    package func purgeTokens(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) {
        try await write { connection, logger in
            try await connection.run(AuditRules.append(audit), logger: logger)
            try await Self.announce(.tokens(user: user), at: audit.at, on: connection, logger: logger)
        }
    }

    // MARK: Back-end sessions (the statements: BackendSessionRules)

    package func backendSession(registration: String, destination: String, now: Int64) async throws(StoreError) -> SealedBackendSession? {
        // On the request path: a short deadline, so a store outage costs a request little.
        try await rows(within: sessionTimeout, prepared: BackendSessionRead(registration: registration, destination: destination, now: now)) {
            try BackendSessionRules.session($0, registration: registration, destination: destination)
        }.first
    }

    package func saveBackendSession(_ session: SealedBackendSession, now: Int64) async throws(StoreError) -> BackendSessionSave {
        // Under the write lock like every announced change (the change feed reads changes in
        // sequence order), with the request path's short deadline.
        try await write(within: sessionTimeout) { connection, logger in
            try await connection.run(BackendSessionRules.dropExpired(now: now), logger: logger)
            guard try await connection.finds(RegistrationRules.active(id: session.registration), logger: logger) else {
                return BackendSessionSave.inactive
            }
            guard try await connection.finds(BackendSessionRules.save(session), logger: logger) else { return .stale }
            try await Self.announce(
                .session(registration: session.registration, destination: session.destination),
                at: now, on: connection, logger: logger)
            return .saved
        }
    }

    // MARK: Page sessions (every instance reads them from here: nothing to announce; the statements: PageSessionRules)

    package func startPageSession(_ session: StoredPageSession, bounds: PageSessionBounds, now: Int64) async throws(StoreError) {
        try await write(lock: Self.pageSessionLock) { connection, logger in
            try await connection.run(PageSessionRules.dropOver(now: now), logger: logger)
            try await connection.run(
                PageSessionRules.trim(site: session.site, subject: session.subject, keeping: bounds.perSubject - 1), logger: logger)
            try await connection.run(PageSessionRules.trim(site: session.site, keeping: bounds.capacity - 1), logger: logger)
            guard try await connection.finds(PageSessionRules.insert(session), logger: logger) else { throw PageSessionKeyInUse() }
        }
    }

    package func usePageSession(key: String, site: String, now: Int64, takingNotice: Bool) async throws(StoreError) -> StoredPageSession? {
        try await write(lock: nil) { connection, logger in
            let found = try await connection.rows(PageSessionRules.session(key: key, site: site), logger: logger) {
                try PageSessionRules.session($0)
            }
            guard var session = found.first else { return nil }
            guard !session.isOver(at: now) else {
                try await connection.run(PageSessionRules.delete(key: key), logger: logger)
                return nil
            }
            session.lastSeen = max(session.lastSeen, now)
            try await connection.run(PageSessionRules.touch(key: key, lastSeen: session.lastSeen, takingNotice: takingNotice), logger: logger)
            if !takingNotice { session.notice = nil }
            return session
        }
    }

    package func endPageSession(key: String, site: String) async throws(StoreError) {
        try await write(lock: nil) { connection, logger in try await connection.run(PageSessionRules.end(key: key, site: site), logger: logger) }
    }

    package func leavePageNotice(_ notice: String, key: String, site: String) async throws(StoreError) {
        try await write(lock: nil) { connection, logger in
            try await connection.run(PageSessionRules.leaveNotice(notice, key: key, site: site), logger: logger)
        }
    }

    // MARK: User and device storage (every instance reads it from here: nothing to announce; the statements: StorageRules)

    /// The lock class of storage writes, taken per user (``lockWrites(of:class:on:logger:)``)
    /// so that the per-user size limit sees every write of the user before it.
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
        try await write(lock: nil) { connection, logger in
            try await Self.lockWrites(of: key.user, class: Self.storageLock, on: connection, logger: logger)
            // FOR SHARE: a wipe or delete of the registration (FOR UPDATE) waits for this
            // write, and deletes what it wrote; a write after it finds no active registration.
            if case .registration(let id) = key.level,
                try await !connection.finds(RegistrationRules.active(id: id, app: key.app, user: key.user, lock: .share), logger: logger)
            {
                return StorageWrite<Reason>.registrationInactive
            }
            let current = try await connection.rows(StorageRules.document(key, lock: .update), logger: logger) { try $0.text("document") }
            switch edit(current.first) {
            case .refuse(let reason):
                return .refused(reason)
            case .remove:
                try await connection.run(StorageRules.remove(key), logger: logger)
                return .removed
            case .set(let text):
                let others = try await connection.rows(StorageRules.sizeBeside(key), logger: logger) { try $0.integer("size") }.first ?? 0
                guard others + Int64(key.storedSize(of: text)) <= Int64(userLimit) else { return .overUserLimit(limit: userLimit) }
                try await connection.run(StorageRules.set(key, to: text, now: now), logger: logger)
                return .written
            }
        }
    }

    package func storageEntries(of user: UserIdentity) async throws(StoreError) -> [StorageEntry] {
        try await rows(StorageRules.entries(of: user)) { try StorageRules.entry($0, of: user) }
    }

    // MARK: Client logs and usage (every instance reads them from here: nothing to announce; the statements: ClientUploadRules)

    package func saveClientUpload(
        _ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
        now: Int64
    ) async throws(StoreError) -> ClientUploadSave {
        try await write(lock: nil) { connection, logger in
            // FOR UPDATE: the registration's uploads one after the other (the counts and sizes
            // below see every upload before), and a wipe or delete (FOR UPDATE too) waits for
            // this one and deletes it; an upload after it finds no active registration.
            guard
                try await connection.finds(
                    RegistrationRules.active(id: upload.registration, app: upload.app, user: upload.user, lock: .update), logger: logger)
            else { return ClientUploadSave.registrationInactive }
            // The user's uploads one after the other too, for the per-user bound.
            try await Self.lockWrites(of: upload.user, class: Self.uploadLock, on: connection, logger: logger)
            let recent =
                try await connection.rows(
                    ClientUploadRules.count(of: upload.kind, registration: upload.registration, since: now - bounds.window), logger: logger
                ) { try $0.integer("count") }.first ?? 0
            guard recent < Int64(bounds.uploadsPerWindow) else { return .tooMany }
            let kept = try await connection.rows(
                ClientUploadRules.kept(upload.kind, registration: upload.registration), logger: logger, ClientUploadRules.sized)
            try await connection.run(ClientUploadRules.insert(upload), logger: logger)
            for start in stride(from: 0, to: entries.count, by: ClientUploadRules.entriesPerInsert) {
                let chunk = entries[start..<min(start + ClientUploadRules.entriesPerInsert, entries.count)]
                try await connection.run(ClientUploadRules.insert(chunk, of: upload.id), logger: logger)
            }
            // The oldest go first until what is kept fits; never the upload just kept. Then the
            // user's, over all registrations, the same way.
            let dropped = ClientUploadRules.dropped(from: kept, adding: upload.size, limit: bounds.bytesPerRegistration)
            try await Self.delete(uploads: dropped, on: connection, logger: logger)
            let userKept = try await connection.rows(
                ClientUploadRules.kept(upload.kind, user: upload.user, besides: upload.id), logger: logger, ClientUploadRules.sized)
            let userDropped = ClientUploadRules.dropped(from: userKept, adding: upload.size, limit: bounds.bytesPerUser)
            try await Self.delete(uploads: userDropped, on: connection, logger: logger)
            return .saved(dropped: dropped.count + userDropped.count)
        }
    }

    private static func delete(uploads ids: [String], on connection: PostgresConnection, logger: Logger) async throws {
        for start in stride(from: 0, to: ids.count, by: ClientUploadRules.uploadsPerDelete) {
            let chunk = ids[start..<min(start + ClientUploadRules.uploadsPerDelete, ids.count)]
            for statement in ClientUploadRules.delete(uploads: chunk) { try await connection.run(statement, logger: logger) }
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
        try await write(lock: nil) { connection, logger in
            let (entries, uploads) = ClientUploadRules.purge(receivedBefore: cutoff)
            try await connection.run(entries, logger: logger)
            return try await connection.rows(uploads, logger: logger) { _ in () }.count
        }
    }

    // MARK: Changes made by any instance

    /// The newest change's sequence number (0 for none).
    package func newestChange() async throws(StoreError) -> Int64 {
        try await read { connection, logger in
            var newest: Int64 = 0
            for try await value in try await connection.query("SELECT COALESCE(MAX(sequence), 0) FROM midtier_change", logger: logger).decode(
                Int64.self)
            {
                newest = value
            }
            return newest
        }
    }

    /// Changes after sequence `after`, oldest first, at most `limit`; and whether some that
    /// followed `after` were pruned already (the caller then cannot catch up by number).
    package func changes(after: Int64, limit: Int = 10_000) async throws(StoreError) -> (changes: [(Int64, StoreChange)], gap: Bool) {
        try await read { connection, logger in
            var oldest: Int64 = 0
            for try await value in try await connection.query("SELECT COALESCE(MIN(sequence), 0) FROM midtier_change", logger: logger).decode(
                Int64.self)
            {
                oldest = value
            }
            var found: [(Int64, StoreChange)] = []
            let rows = try await connection.query(
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
        _ = try await read { connection, logger in
            try await connection.query("DELETE FROM midtier_change WHERE at < \(cutoff)", logger: logger)
        }
    }

    // MARK: Audit

    package func appendAudit(_ entry: AuditEntry) async throws(StoreError) {
        try await write { connection, logger in try await connection.run(AuditRules.append(entry), logger: logger) }
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
            // A load balancer's probe must get its answer within a couple of seconds: a
            // connection within two, and `SELECT 1` answered within one more (a server that
            // answers nothing has its connection closed then; before, it had five more).
            let one: Int32 = try await read(within: .seconds(2), silentAfter: .seconds(1)) { connection, logger in
                var one: Int32 = 0
                let rows = try await connection.query("SELECT 1::INT4", logger: logger)
                for try await value in rows.decode(Int32.self) { one = value }
                return one
            }
            return one == 1
        } catch {
            return false
        }
    }
}
