import GRDB
import MidtierCore

/// The SQLite side of the statements written once (``StoreQuery``).
extension SQLiteStore {
    /// The rows `query` reads, each made into a `T` by `make`.
    func rows<T: Sendable>(_ query: StoreQuery, _ make: @escaping @Sendable (SQLiteRow) throws -> T) async throws(StoreError) -> [T] {
        let (sql, values) = query.rendered(.sqlite)
        let arguments = StatementArguments(values.map(\.databaseValue))
        return try await read { db in try Row.fetchAll(db, sql: sql, arguments: arguments).map { try make(SQLiteRow(row: $0)) } }
    }
}

/// A row SQLite read.
struct SQLiteRow: StoreRow {
    let row: Row

    func integer(_ column: String) throws -> Int64 {
        guard let value: Int64 = row[column] else { throw MissingColumn(column: column) }
        return value
    }

    func text(_ column: String) throws -> String {
        guard let value: String = row[column] else { throw MissingColumn(column: column) }
        return value
    }
}

extension StoreQuery.Value {
    var databaseValue: DatabaseValue {
        switch self {
        case .integer(let value): value.databaseValue
        case .text(let value): value.databaseValue
        }
    }
}
