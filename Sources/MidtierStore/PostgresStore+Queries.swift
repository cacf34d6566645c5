import Logging
import MidtierCore
import PostgresNIO

/// The PostgreSQL side of the statements written once (``StoreQuery``).
extension PostgresStore {
    /// The rows `query` reads, each made into a `T` by `make`.
    func rows<T: Sendable>(
        within limit: Duration? = nil, _ query: StoreQuery, _ make: @escaping @Sendable (PostgresStoreRow) throws -> T
    ) async throws(StoreError) -> [T] {
        try await read(within: limit) { connection, logger in try await Self.collect(connection.query(query.postgres, logger: logger), make) }
    }

    static func collect<T>(_ rows: PostgresRowSequence, _ make: (PostgresStoreRow) throws -> T) async throws -> [T] {
        var made: [T] = []
        for try await row in rows { made.append(try make(PostgresStoreRow(row: row.makeRandomAccess()))) }
        return made
    }
}

extension PostgresConnection {
    /// The rows `query` reads (or returns, with `RETURNING`), each made into a `T` by `make`.
    func rows<T>(_ query: StoreQuery, logger: Logger, _ make: (PostgresStoreRow) throws -> T) async throws -> [T] {
        try await PostgresStore.collect(self.query(query.postgres, logger: logger), make)
    }

    /// Whether `query` reads (or returns) a row.
    func finds(_ query: StoreQuery, logger: Logger) async throws -> Bool {
        var found = false
        for try await _ in try await self.query(query.postgres, logger: logger) { found = true }
        return found
    }

    /// Runs `query`, a statement that returns nothing.
    func run(_ query: StoreQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query.postgres, logger: logger) {}
    }
}

extension StoreQuery {
    /// The statement in PostgreSQL's dialect, its values bound.
    var postgres: PostgresQuery {
        let (sql, values) = rendered(.postgres)
        var binds = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .integer(let integer): binds.append(integer)
            case .text(let text): binds.append(text)
            case .bytes(let bytes): binds.append(ByteBuffer(bytes: bytes))
            case .null: binds.appendNull()
            }
        }
        return PostgresQuery(unsafeSQL: sql, binds: binds)
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

    func optionalInteger(_ column: String) throws -> Int64? {
        guard row.contains(column) else { throw MissingColumn(column: column) }
        return try row[column].decode(Int64?.self)
    }

    func optionalText(_ column: String) throws -> String? {
        guard row.contains(column) else { throw MissingColumn(column: column) }
        return try row[column].decode(String?.self)
    }

    func bytes(_ column: String) throws -> [UInt8] {
        guard row.contains(column) else { throw MissingColumn(column: column) }
        return Array(buffer: try row[column].decode(ByteBuffer.self))
    }
}
