import ConfigurationFiles
import Foundation
import GRDB
package import Logging
package import MidtierCore
package import MidtierStore
import PostgresNIO
import Testing

/// The stores the behaviour tests run against: SQLite in a temporary folder, and PostgreSQL
/// in a database of its own on the throwaway server `make test` starts
/// (`Tests/e2e/postgres.py run -- swift test`, which sets `MIDTIER_TEST_POSTGRES`).
package enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    package var testDescription: String { rawValue }
}

/// A fresh store of one kind, and how to make more stores on the same data (other instances).
package final class TestStore: Sendable {
    package let kind: StoreKind
    private let sqlitePath: String?
    package let postgres: PostgresLocation?
    private let cleanup: @Sendable () async -> Void

    package static let logger = Logger(label: "test-store")

    private init(kind: StoreKind, sqlitePath: String?, postgres: PostgresLocation?, cleanup: @escaping @Sendable () async -> Void) {
        self.kind = kind
        self.sqlitePath = sqlitePath
        self.postgres = postgres
        self.cleanup = cleanup
    }

    /// The PostgreSQL server of the test run.
    package static func server() throws -> PostgresLocation {
        guard let url = ProcessInfo.processInfo.environment["MIDTIER_TEST_POSTGRES"] else {
            throw TestStoreError(
                "MIDTIER_TEST_POSTGRES is not set: run the tests with `make test`, or `python3 Tests/e2e/postgres.py run -- swift test`")
        }
        guard case .postgres(let location)? = StoreLocation(url) else {
            throw TestStoreError("MIDTIER_TEST_POSTGRES is not a postgres:// URL")
        }
        return location
    }

    package static func make(_ kind: StoreKind) async throws -> TestStore {
        switch kind {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("midtier-store-\(UUID().uuidString)").path
            return TestStore(kind: kind, sqlitePath: directory + "/state.sqlite", postgres: nil) {
                try? FileManager.default.removeItem(atPath: directory)
            }
        case .postgres:
            var location = try server()
            let name = "midtier_test_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
            try await administer(location) { connection in
                try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
            }
            let server = location
            location.database = name
            return TestStore(kind: kind, sqlitePath: nil, postgres: location) {
                try? await administer(server) { connection in
                    try await connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
                }
            }
        }
    }

    /// A store on this test's data, as one instance opens it (the memory cache included when
    /// `cached`).
    package func open(cached: Bool = true) async throws -> any StateStore {
        let base: any StateStore
        switch kind {
        case .sqlite: base = try SQLiteStore(path: sqlitePath!)
        // Tests assert behaviour, not timing: the deadlines here are far longer than in
        // production (5 s, and 1 s for back-end sessions on the request path). On a loaded
        // CI machine with fsync on, sixty writes at once queue behind the store's one write
        // lock for longer than 5 s (seen: "no answer within the deadline").
        case .postgres: base = try await PostgresStore(postgres!, operationTimeout: .seconds(60), sessionTimeout: .seconds(60), logger: Self.logger)
        }
        return cached ? CachedStateStore(base: base) : base
    }

    package func remove() async { await cleanup() }

    /// The name of the registrations table in this kind of store.
    package var registrationTable: String { kind == .sqlite ? "registration" : "midtier_registration" }

    /// Runs `sql` on this test's data directly, past Midtier (to break or mend the store).
    package func execute(_ sql: String) async throws {
        switch kind {
        case .sqlite:
            try await DatabaseQueue(path: sqlitePath!).write { try $0.execute(sql: sql) }
        case .postgres:
            try await Self.administer(postgres!) { connection in
                try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Self.logger)
            }
        }
    }

    private static func administer(_ location: PostgresLocation, _ body: (PostgresConnection) async throws -> Void) async throws {
        let configuration = PostgresConnection.Configuration(
            host: location.host, port: location.port, username: location.user,
            password: location.password, database: location.database, tls: .disable)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        do {
            try await body(connection)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }
}

/// Runs `body` with a fresh store of `kind`, removing its data afterwards.
package func withTestStore(_ kind: StoreKind, _ body: (TestStore) async throws -> Void) async throws {
    let store = try await TestStore.make(kind)
    do {
        try await body(store)
    } catch {
        await store.remove()
        throw error
    }
    await store.remove()
}

package struct TestStoreError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
