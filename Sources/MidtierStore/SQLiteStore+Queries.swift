import Foundation
import GRDB
import MidtierCore

/// The SQLite side of the statements written once (``StoreQuery``).
extension SQLiteStore {
    /// The rows `query` reads, each made into a `T` by `make`.
    func rows<T: Sendable>(_ query: StoreQuery, _ make: @escaping @Sendable (SQLiteRow) throws -> T) async throws(StoreError) -> [T] {
        try await read { db in try db.rows(query, make) }
    }
}

extension Database {
    /// The rows `query` reads (or returns, with `RETURNING`), each made into a `T` by `make`.
    func rows<T>(_ query: StoreQuery, _ make: (SQLiteRow) throws -> T) throws -> [T] {
        let (sql, values) = query.rendered(.sqlite)
        return try Row.fetchAll(self, sql: sql, arguments: StatementArguments(values.map(\.databaseValue))).map { try make(SQLiteRow(row: $0)) }
    }

    /// Whether `query` reads (or returns) a row.
    func finds(_ query: StoreQuery) throws -> Bool {
        let (sql, values) = query.rendered(.sqlite)
        return try Row.fetchOne(self, sql: sql, arguments: StatementArguments(values.map(\.databaseValue))) != nil
    }

    /// Runs `query`, a statement that returns nothing; prepared once and kept for the next time
    /// unless not `cached` (a statement whose text varies, such as a list of values, would fill
    /// the cache of the connection for good).
    func run(_ query: StoreQuery, cached: Bool = true) throws {
        let (sql, values) = query.rendered(.sqlite)
        let arguments = StatementArguments(values.map(\.databaseValue))
        if cached { try cachedStatement(sql: sql).execute(arguments: arguments) } else { try execute(sql: sql, arguments: arguments) }
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

    func optionalInteger(_ column: String) throws -> Int64? {
        guard row.hasColumn(column) else { throw MissingColumn(column: column) }
        return row[column]
    }

    func optionalText(_ column: String) throws -> String? {
        guard row.hasColumn(column) else { throw MissingColumn(column: column) }
        return row[column]
    }

    func bytes(_ column: String) throws -> [UInt8] {
        guard let value: Data = row[column] else { throw MissingColumn(column: column) }
        return Array(value)
    }
}

extension StoreQuery.Value {
    var databaseValue: DatabaseValue {
        switch self {
        case .integer(let value): value.databaseValue
        case .text(let value): value.databaseValue
        case .bytes(let value): Data(value).databaseValue
        case .null: .null
        }
    }
}
