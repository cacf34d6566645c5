import Logging
import PostgresNIO

/// The PostgreSQL schema and its versioned migrations. Each migration runs once, in a
/// transaction that holds an advisory lock, so instances starting at the same time apply them
/// one after the other; a version already applied is skipped. Text columns use the `C`
/// collation: identities compare and sort by their bytes (docs/identity.md).
enum PostgresSchema {
    static let migrations: [(version: Int32, description: String, sql: [String])] = [
        (
            1, "registrations, blocks, retired ids, audit, change log",
            [
                """
                CREATE TABLE midtier_registration (
                    id TEXT COLLATE "C" PRIMARY KEY,
                    app_id TEXT COLLATE "C" NOT NULL,
                    user_realm TEXT COLLATE "C" NOT NULL,
                    user_id TEXT COLLATE "C" NOT NULL,
                    device_type TEXT NOT NULL,
                    device_model TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    form_factor TEXT NOT NULL,
                    apns_device_token TEXT NOT NULL,
                    android_gcm_registration_id TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    last_contact_at BIGINT NOT NULL,
                    state TEXT NOT NULL
                )
                """,
                "CREATE INDEX midtier_registration_user ON midtier_registration (user_realm, user_id)",
                """
                CREATE TABLE midtier_user_block (
                    user_realm TEXT COLLATE "C" NOT NULL,
                    user_id TEXT COLLATE "C" NOT NULL,
                    kind TEXT NOT NULL,
                    reason TEXT NOT NULL,
                    since BIGINT NOT NULL,
                    blocked_by TEXT NOT NULL,
                    PRIMARY KEY (user_realm, user_id)
                )
                """,
                "CREATE TABLE midtier_retired_registration (id TEXT COLLATE \"C\" PRIMARY KEY, retired_at BIGINT NOT NULL)",
                """
                CREATE TABLE midtier_audit (
                    sequence BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    at BIGINT NOT NULL,
                    actor TEXT NOT NULL,
                    action TEXT NOT NULL,
                    target TEXT NOT NULL,
                    detail TEXT NOT NULL,
                    source TEXT NOT NULL
                )
                """,
                "CREATE INDEX midtier_audit_at ON midtier_audit (at)",
                """
                CREATE TABLE midtier_change (
                    sequence BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    at BIGINT NOT NULL,
                    kind TEXT NOT NULL,
                    key_a TEXT COLLATE "C" NOT NULL,
                    key_b TEXT COLLATE "C" NOT NULL
                )
                """,
            ]
        ),
        (
            2, "sealed back-end sessions",
            [
                """
                CREATE TABLE midtier_backend_session (
                    registration_id TEXT COLLATE "C" NOT NULL,
                    destination TEXT COLLATE "C" NOT NULL,
                    sealed BYTEA NOT NULL,
                    expires_at BIGINT,
                    stamp BIGINT NOT NULL,
                    PRIMARY KEY (registration_id, destination)
                )
                """,
                "CREATE INDEX midtier_backend_session_expiry ON midtier_backend_session (expires_at) WHERE expires_at IS NOT NULL",
            ]
        ),
        (
            3, "connection details",
            [
                "ALTER TABLE midtier_registration ADD COLUMN details TEXT NOT NULL DEFAULT '{}'"
            ]
        ),
        (
            4, "audit by target and actor",
            [
                "CREATE INDEX midtier_audit_target ON midtier_audit (target, sequence)",
                "CREATE INDEX midtier_audit_actor ON midtier_audit (actor, sequence)",
            ]
        ),
        (
            5, "page sessions",
            [
                // The console's and the self-service page's sessions, by the SHA-256 of their
                // cookie (docs/console.md, "Sessions").
                """
                CREATE TABLE midtier_page_session (
                    key TEXT COLLATE "C" PRIMARY KEY,
                    site TEXT COLLATE "C" NOT NULL,
                    subject_realm TEXT COLLATE "C" NOT NULL,
                    subject_id TEXT COLLATE "C" NOT NULL,
                    credential_stamp TEXT COLLATE "C" NOT NULL,
                    csrf_token TEXT COLLATE "C" NOT NULL,
                    started_at BIGINT NOT NULL,
                    ends_at BIGINT NOT NULL,
                    last_seen BIGINT NOT NULL,
                    idle_ms BIGINT NOT NULL,
                    notice TEXT
                )
                """,
                "CREATE INDEX midtier_page_session_subject ON midtier_page_session (site, subject_realm, subject_id, last_seen)",
                "CREATE INDEX midtier_page_session_last_seen ON midtier_page_session (site, last_seen)",
            ]
        ),
        (
            6, "user and device storage",
            [
                // The Storage service's currentuser and device levels (docs/device-api.md, "User
                // and device storage"): registration_id '' is the user level.
                """
                CREATE TABLE midtier_user_storage (
                    app_id TEXT COLLATE "C" NOT NULL,
                    user_realm TEXT COLLATE "C" NOT NULL,
                    user_id TEXT COLLATE "C" NOT NULL,
                    registration_id TEXT COLLATE "C" NOT NULL,
                    name TEXT COLLATE "C" NOT NULL,
                    document TEXT NOT NULL,
                    size BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (user_realm, user_id, app_id, registration_id, name)
                )
                """,
                "CREATE INDEX midtier_user_storage_registration ON midtier_user_storage (registration_id) WHERE registration_id <> ''",
            ]
        ),
        (
            7, "client uploads",
            [
                // Client logs and usage reports (docs/device-api.md, "Client logs and usage"), each
                // upload on behalf of one registration; a log's entries one by one.
                """
                CREATE TABLE midtier_client_uploads (
                    id TEXT COLLATE "C" PRIMARY KEY,
                    kind TEXT COLLATE "C" NOT NULL,
                    app_id TEXT COLLATE "C" NOT NULL,
                    user_realm TEXT COLLATE "C" NOT NULL,
                    user_id TEXT COLLATE "C" NOT NULL,
                    registration_id TEXT COLLATE "C" NOT NULL,
                    device_id TEXT COLLATE "C" NOT NULL,
                    received_at BIGINT NOT NULL,
                    size BIGINT NOT NULL,
                    report TEXT NOT NULL
                )
                """,
                "CREATE INDEX midtier_client_uploads_registration ON midtier_client_uploads (registration_id, kind, received_at)",
                "CREATE INDEX midtier_client_uploads_user ON midtier_client_uploads (user_realm, user_id, kind, received_at)",
                "CREATE INDEX midtier_client_uploads_received ON midtier_client_uploads (received_at)",
                """
                CREATE TABLE midtier_client_log_entries (
                    upload_id TEXT COLLATE "C" NOT NULL,
                    sequence BIGINT NOT NULL,
                    time BIGINT NOT NULL,
                    severity TEXT NOT NULL,
                    severity_rank INT4 NOT NULL,
                    correlation_id TEXT COLLATE "C" NOT NULL,
                    source TEXT COLLATE "C" NOT NULL,
                    location TEXT COLLATE "C" NOT NULL,
                    message TEXT COLLATE "C" NOT NULL,
                    PRIMARY KEY (upload_id, sequence)
                )
                """,
                "CREATE INDEX midtier_client_log_entries_time ON midtier_client_log_entries (time, upload_id, sequence)",
            ]
        ),
        (
            8, "push notifications",
            [
                // Notifications as their senders gave them, and one delivery per registration, each
                // leased to one worker at a time (docs/push.md, "Delivery").
                """
                CREATE TABLE midtier_push_notifications (
                    id TEXT COLLATE "C" PRIMARY KEY,
                    app_id TEXT COLLATE "C" NOT NULL,
                    sender TEXT COLLATE "C" NOT NULL,
                    payload TEXT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX midtier_push_notifications_created ON midtier_push_notifications (created_at, id)",
                "CREATE INDEX midtier_push_notifications_app ON midtier_push_notifications (app_id, created_at, id)",
                """
                CREATE TABLE midtier_push_deliveries (
                    notification_id TEXT COLLATE "C" NOT NULL,
                    registration_id TEXT COLLATE "C" NOT NULL,
                    state TEXT COLLATE "C" NOT NULL,
                    attempts BIGINT NOT NULL,
                    next_attempt_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    provider TEXT COLLATE "C",
                    reason TEXT NOT NULL,
                    lease_owner TEXT COLLATE "C",
                    lease_until BIGINT,
                    PRIMARY KEY (notification_id, registration_id)
                )
                """,
                "CREATE INDEX midtier_push_deliveries_due ON midtier_push_deliveries (state, next_attempt_at)",
            ]
        ),
        (
            9, "storage sizes count document names",
            [
                // A document's size is its name and its text (StorageKey.storedSize), as the quota counts it.
                "UPDATE midtier_user_storage SET size = size + octet_length(name)"
            ]
        ),
        (
            10, "registrations paged by id",
            [
                // The admin listings read a page at a time in the order of the ids' bytes
                // (RegistrationRules.registrations(matching:after:limit:)): each filter an index
                // range ending in the id (COLLATE "C", the column's). The user's index replaces
                // midtier_registration_user (user_realm, user_id), which it serves too.
                "CREATE INDEX midtier_registration_by_user ON midtier_registration (user_realm, user_id, id)",
                "DROP INDEX midtier_registration_user",
                "CREATE INDEX midtier_registration_by_app ON midtier_registration (app_id, id)",
                "CREATE INDEX midtier_registration_by_app_state ON midtier_registration (app_id, state, id)",
                "CREATE INDEX midtier_registration_by_state ON midtier_registration (state, id)",
            ]
        ),
        (
            11, "push deliveries counted by state",
            [
                // How many of a notification's deliveries are in each state, from this index
                // (an index-only scan once the rows are visible to all; PushRules.deliveryStates(of:)).
                "CREATE INDEX midtier_push_deliveries_states ON midtier_push_deliveries (notification_id, state)"
            ]
        ),
        (
            12, "push deliveries claimed in due order",
            [
                // A claim (PushRules.claim) reads the due deliveries in this index's order and
                // stops at its limit, instead of sorting every delivery due at the same time
                // (all of a push to a whole app) at every claim.
                "DROP INDEX midtier_push_deliveries_due",
                "CREATE INDEX midtier_push_deliveries_due ON midtier_push_deliveries (state, next_attempt_at, notification_id, registration_id)",
            ]
        ),
    ]

    static func migrate(_ client: PostgresClient, logger: Logger) async throws {
        try await client.withTransaction(logger: logger) { connection in
            // A migration takes what its work takes (bounded by `migrationDeadline`), not the
            // store's deadline for one statement.
            try await connection.query("SET LOCAL statement_timeout = 0", logger: logger)
            try await connection.query("SELECT pg_advisory_xact_lock(\(PostgresStore.schemaLock))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS midtier_schema (
                    version INT4 PRIMARY KEY, description TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """, logger: logger)
            var applied: Set<Int32> = []
            for try await (version) in try await connection.query("SELECT version FROM midtier_schema", logger: logger).decode(Int32.self) {
                applied.insert(version)
            }
            if let newest = applied.max(), newest > migrations.last!.version {
                throw PostgresSchemaError(
                    message: "the database has schema version \(newest), newer than this Midtier knows (\(migrations.last!.version)); upgrade Midtier"
                )
            }
            for migration in migrations where !applied.contains(migration.version) {
                for statement in migration.sql {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    """
                    INSERT INTO midtier_schema (version, description) VALUES (\(migration.version), \(migration.description))
                    """, logger: logger)
                logger.notice("store schema migrated", metadata: ["version": "\(migration.version)", "migration": "\(migration.description)"])
            }
        }
    }
}

struct PostgresSchemaError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
