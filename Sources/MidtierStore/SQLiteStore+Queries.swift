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
    /// The most bound values a statement may have and still be kept prepared on its connection
    /// (``statement(_:cached:)``).
    static let mostValuesKept = 32

    /// `query` prepared: kept on the connection and used again the next time (parsing a
    /// statement cost a quarter of a push delivery's CPU, and most of a cache miss's), unless
    /// not `cached` or it has more than ``mostValuesKept`` values — a list of values changes the
    /// text with its length, and the connection keeps every text it is given for good, so a
    /// statement with a list is kept for its first few lengths only.
    func statement(_ query: StoreQuery, cached: Bool = true) throws -> (Statement, StatementArguments) {
        let (sql, values) = query.rendered(.sqlite)
        let arguments = StatementArguments(values.map(\.databaseValue))
        let kept = cached && values.count <= Self.mostValuesKept
        return (kept ? try cachedStatement(sql: sql) : try makeStatement(sql: sql), arguments)
    }

    /// The rows `query` reads (or returns, with `RETURNING`), each made into a `T` by `make`.
    func rows<T>(_ query: StoreQuery, _ make: (SQLiteRow) throws -> T) throws -> [T] {
        let (statement, arguments) = try statement(query)
        return try Row.fetchAll(statement, arguments: arguments).map { try make(SQLiteRow(row: $0)) }
    }

    /// Whether `query` reads (or returns) a row.
    func finds(_ query: StoreQuery) throws -> Bool {
        let (statement, arguments) = try statement(query)
        return try Row.fetchOne(statement, arguments: arguments) != nil
    }

    /// Runs `query`, a statement that returns nothing (``statement(_:cached:)``: pass `cached:
    /// false` for one whose text varies beyond its values).
    func run(_ query: StoreQuery, cached: Bool = true) throws {
        let (statement, arguments) = try statement(query, cached: cached)
        try statement.execute(arguments: arguments)
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
