import MidtierStore
import MidtierTestSupport
import Testing

/// Upgrades (docs/operations.md, "Upgrades"): a store keeps the migrations applied to it, and an
/// instance refuses, naming why, a store that a newer Midtier migrated — an older binary would
/// otherwise write rows the newer schema does not expect. On SQLite GRDB went on with the
/// migrations it knew until this check; PostgreSQL refused already.
@Suite struct SchemaVersionTests {
    @Test(arguments: StoreKind.allCases) func aStoreANewerMidtierMigratedIsRefused(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { store in
            let first = try await store.open(cached: false)
            (first as? PostgresStore)?.close()
            // The same store opens again: a restart of the same version.
            let again = try await store.open(cached: false)
            (again as? PostgresStore)?.close()
            switch kind {
            case .sqlite: try await store.execute("INSERT INTO grdb_migrations (identifier) VALUES ('v99: from a newer Midtier')")
            case .postgres: try await store.execute("INSERT INTO midtier_schema (version, description) VALUES (99, 'from a newer Midtier')")
            }
            do {
                let opened = try await store.open(cached: false)
                (opened as? PostgresStore)?.close()
                Issue.record("a store with a newer migration was opened")
            } catch {
                #expect("\(error)".contains("newer than this Midtier knows"), "\(error)")
                #expect("\(error)".contains("upgrade Midtier"), "\(error)")
            }
        }
    }
}
