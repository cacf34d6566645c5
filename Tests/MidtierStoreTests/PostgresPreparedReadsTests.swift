import Logging
import MidtierCore
import MidtierTestSupport
import PostgresNIO
import Synchronization
import Testing

@testable import MidtierStore

/// The reads on the request path that PostgreSQL keeps prepared (docs/operations.md, "Prepared
/// statements"): their text is fixed whatever their values, they survive a later migration that
/// adds a column, a connection that lost one is read again unnamed, and
/// `prepared_statements=off` prepares nothing (for PgBouncer before 1.21 in transaction mode).
@Suite(.timeLimit(.minutes(5))) struct PostgresPreparedReadsTests {
    static let user = UserIdentity.local("prepared")
    static let block = UserBlock(user: user, kind: .all, reason: "test", since: 1_000, by: "test")

    /// A prepared statement has one text; values only bind. Ids with quotes, placeholders'
    /// look-alikes and nothing at all give the same text.
    @Test(arguments: ["", "r1", "x'; DROP TABLE midtier_registration; --", "$1", "\u{212A}im"])
    func aReadsTextDoesNotDependOnItsValues(_ value: String) {
        #expect(RegistrationAndBlockRead(id: value).query.rendered(.postgres).sql == RegistrationAndBlockRead.sql)
        #expect(RegistrationAndBlockRead(id: value).query.rendered(.postgres).values == [.text(value)])
        let session = BackendSessionRead(registration: value, destination: value, now: 7)
        #expect(session.query.rendered(.postgres).sql == BackendSessionRead.sql)
        #expect(session.query.rendered(.postgres).values == [.text(value), .text(value), .integer(7)])
    }

    /// The names of the statements prepared on `connection`.
    static func prepared(on connection: PostgresConnection, logger: Logger) async throws -> Set<String> {
        Set(try await connection.rows("SELECT name FROM pg_prepared_statements", logger: logger) { try $0.text("name") })
    }

    /// A store of its own on the test's database, with a registration of a blocked user.
    static func store(_ test: TestStore, prepared: Bool = true) async throws -> (PostgresStore, Registration) {
        _ = try await test.open(cached: false)
        var location = try #require(test.postgres)
        location.preparedStatements = prepared
        let store = try await PostgresStore(location, logger: TestStore.logger)
        let registration = Registration(id: "r-prepared", appId: "demo", user: user, deviceType: "iPad", createdAt: 1_000)
        #expect(try await store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
        try await store.setBlock(block, audit: AuditEntry(at: 1_000, actor: "admin#1", action: "block", target: "t"))
        return (store, registration)
    }

    /// The registration read prepared on `connection`.
    static func read(
        _ id: String, from store: PostgresStore, on connection: PostgresConnection, logger: Logger
    ) async throws
        -> RegistrationAndBlock?
    {
        try await store.rows(prepared: RegistrationAndBlockRead(id: id), on: connection, logger: logger) {
            try RegistrationRules.registrationAndBlock($0)
        }.first
    }

    /// Both reads through the store are prepared, under names that carry their text's hash.
    @Test func theReadsOnTheRequestPathArePrepared() async throws {
        try await withTestStore(.postgres) { test in
            let (store, registration) = try await Self.store(test)
            defer { store.close() }
            #expect(try await store.registrationAndBlock(id: registration.id)?.block?.kind == .all)
            #expect(try await store.backendSession(registration: registration.id, destination: "d", now: 1_000) == nil)
            let names = try await store.read { connection, logger in
                _ = try await Self.read(registration.id, from: store, on: connection, logger: logger)
                _ = try await store.rows(
                    prepared: BackendSessionRead(registration: registration.id, destination: "d", now: 1_000), on: connection, logger: logger
                ) { $0 }
                return try await Self.prepared(on: connection, logger: logger)
            }
            #expect(names == [RegistrationAndBlockRead.name, BackendSessionRead.name])
            #expect(RegistrationAndBlockRead.name.hasPrefix("midtier_registration_and_block_"))
        }
    }

    /// Read, then a newer Midtier's migration adds a column to the registrations (a rolling
    /// upgrade), then read again on the same connection: the statement names its columns, so
    /// PostgreSQL plans it again rather than failing with "cached plan must not change result
    /// type" (as `SELECT r.*` did). A column whose type changes does change the result: that
    /// read is answered unnamed, and its connection closed (a fresh one prepares afresh).
    @Test func aPreparedReadSurvivesALaterMigration() async throws {
        try await withTestStore(.postgres) { test in
            let (store, registration) = try await Self.store(test)
            defer { store.close() }
            try await store.read { connection, logger in
                #expect(try await Self.read(registration.id, from: store, on: connection, logger: logger)?.registration == registration)
                try await connection.run("ALTER TABLE midtier_registration ADD COLUMN added_later TEXT", logger: logger)
                try await connection.run("ALTER TABLE midtier_user_block ADD COLUMN state TEXT", logger: logger)
                let read = try await Self.read(registration.id, from: store, on: connection, logger: logger)
                #expect(read?.registration == registration)
                #expect(read?.block?.reason == "test")
                #expect(try await Self.read("r-unknown", from: store, on: connection, logger: logger) == nil)
                try await connection.run("ALTER TABLE midtier_registration ALTER COLUMN device_model TYPE VARCHAR(300)", logger: logger)
                #expect(try await Self.read(registration.id, from: store, on: connection, logger: logger)?.registration == registration)
                #expect(connection.isClosed)
            }
            #expect(try await store.registrationAndBlock(id: registration.id)?.registration == registration)
        }
    }

    /// A connection that lost a statement it had prepared (as behind PgBouncer in transaction
    /// mode, where the next transaction may get another server connection), or finds one of
    /// its name there already: the read is made again unnamed, and every later one is sent
    /// unnamed — a call never fails for it.
    @Test(arguments: ["DEALLOCATE ALL", "DEALLOCATE ALL; PREPARE \(RegistrationAndBlockRead.name) AS SELECT 1"])
    func aLostPreparedStatementIsReadAgainUnnamedFromThenOn(_ pooler: String) async throws {
        try await withTestStore(.postgres) { test in
            let (store, registration) = try await Self.store(test)
            defer { store.close() }
            try await store.read { connection, logger in
                if pooler.contains("PREPARE") {
                    // 42P05: prepared already, by another client of the same server connection.
                    for statement in pooler.split(separator: "; ") {
                        try await connection.run(StoreQuery(stringLiteral: String(statement)), logger: logger)
                    }
                } else {
                    // 26000: prepared, then gone.
                    #expect(try await Self.read(registration.id, from: store, on: connection, logger: logger)?.registration == registration)
                    try await connection.run(StoreQuery(stringLiteral: pooler), logger: logger)
                }
                #expect(try await Self.read(registration.id, from: store, on: connection, logger: logger)?.registration == registration)
                let preparing = store.preparing.load(ordering: .relaxed)
                #expect(!preparing, "unnamed from then on")
                #expect(try await Self.read(registration.id, from: store, on: connection, logger: logger)?.registration == registration)
                #expect(!connection.isClosed)
            }
            #expect(try await store.registrationAndBlock(id: registration.id)?.registration == registration)
        }
    }

    /// A preparation the server refused (here: the connection's search path hides the tables)
    /// closes the connection: postgres-nio keeps that error for the connection's life, so
    /// every later read on it would fail although the cause is gone (review of this change).
    @Test func aRefusedPreparationClosesItsConnection() async throws {
        try await withTestStore(.postgres) { test in
            let (store, registration) = try await Self.store(test)
            defer { store.close() }
            try await store.read { connection, logger in
                try await connection.run("SET search_path TO pg_catalog", logger: logger)
                await #expect(throws: PSQLError.self) { try await Self.read(registration.id, from: store, on: connection, logger: logger) }
                #expect(connection.isClosed)
            }
            #expect(try await store.registrationAndBlock(id: registration.id)?.registration == registration)
            let preparing = store.preparing.load(ordering: .relaxed)
            #expect(preparing, "not a pooler's doing: still prepared")
        }
    }

    /// `prepared_statements=off`: the same reads, sent unnamed, prepare nothing on the connection
    /// (a pooler in transaction mode would hand a named statement to a connection that never
    /// saw it).
    @Test func preparedStatementsOffPreparesNothing() async throws {
        try await withTestStore(.postgres) { test in
            let (store, registration) = try await Self.store(test, prepared: false)
            defer { store.close() }
            #expect(try await store.registrationAndBlock(id: registration.id)?.registration == registration)
            #expect(try await store.backendSession(registration: registration.id, destination: "d", now: 1_000) == nil)
            let names = try await store.read { connection, logger in
                #expect(try await Self.read(registration.id, from: store, on: connection, logger: logger)?.registration == registration)
                return try await Self.prepared(on: connection, logger: logger)
            }
            #expect(names.isEmpty)
        }
    }
}
