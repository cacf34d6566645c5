import MidtierCore
import PostgresNIO

/// The PostgreSQL side of the statements written once (``StoreQuery``).
extension PostgresStore {
    /// The rows `query` reads, each made into a `T` by `make`.
    func rows<T: Sendable>(_ query: StoreQuery, _ make: @escaping @Sendable (PostgresStoreRow) throws -> T) async throws(StoreError) -> [T] {
        let (sql, values) = query.rendered(.postgres)
        var binds = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .integer(let integer): binds.append(integer)
            case .text(let text): binds.append(text)
            }
        }
        let statement = PostgresQuery(unsafeSQL: sql, binds: binds)
        return try await read { client, logger in
            var made: [T] = []
            for try await row in try await client.query(statement, logger: logger) {
                made.append(try make(PostgresStoreRow(row: row.makeRandomAccess())))
            }
            return made
        }
    }
}

/// A row PostgreSQL read.
struct PostgresStoreRow: StoreRow {
    let row: PostgresRandomAccessRow

    func integer(_ column: String) throws -> Int64 {
        guard row.contains(column) else { throw MissingColumn(column: column) }
        return try row[column].decode(Int64.self)
    }

    func text(_ column: String) throws -> String {
        guard row.contains(column) else { throw MissingColumn(column: column) }
        return try row[column].decode(String.self)
    }
}
