import Logging
import MidtierCore
import PostgresNIO
import Synchronization

/// A read on the request path that PostgreSQL keeps prepared on each connection: parsed once
/// per connection rather than at every call (docs/operations.md, "Prepared statements"). Its
/// text is its ``StoreQuery``'s, rendered once with placeholder values, so a statement is still
/// written once for both stores; a query whose text depends on its values (a list, say) cannot
/// be one. Its name carries a hash of its text, so that two versions of Midtier on one server
/// connection (behind a pooler) never run each other's statement under one name. With
/// `prepared_statements=off` in the store's URL — or once a connection has lost a statement it
/// prepared, as behind a pooler in transaction mode — the same query is sent unnamed, as every
/// other statement is.
protocol PreparedStoreRead: PostgresPreparedStatement where Row == PostgresStoreRow {
    /// The statement with this read's values.
    var query: StoreQuery { get }
}

extension PreparedStoreRead {
    func makeBindings() -> PostgresBindings { query.postgres.binds }

    func decodeRow(_ row: PostgresRow) -> PostgresStoreRow { PostgresStoreRow(row: row.makeRandomAccess()) }

    /// The text of `query` in PostgreSQL's dialect, for `sql`.
    static func text(of query: StoreQuery) -> String { query.rendered(.postgres).sql }

    /// `midtier_<what>_<hash of sql>` (FNV-1a, 64 bits): a changed statement is another one.
    static func preparedName(_ what: String, sql: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in sql.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "midtier_\(what)_\(String(hash, radix: 16))"
    }
}

/// A registration with its owner's block: the read of a registration not kept in memory.
struct RegistrationAndBlockRead: PreparedStoreRead {
    static let sql = text(of: RegistrationRules.registrationAndBlock(id: ""))
    static let name: String = preparedName("registration_and_block", sql: sql)
    /// Sent with the statement, as the unnamed statements' values are, rather than guessed by
    /// the server.
    static let bindingDataTypes: [PostgresDataType] = [.text]
    let id: String
    var query: StoreQuery { RegistrationRules.registrationAndBlock(id: id) }
}

/// A registration's back-end session with one destination: read when this instance holds none.
struct BackendSessionRead: PreparedStoreRead {
    static let sql = text(of: BackendSessionRules.session(registration: "", destination: "", now: 0))
    static let name: String = preparedName("backend_session", sql: sql)
    static let bindingDataTypes: [PostgresDataType] = [.text, .text, .int8]
    let registration: String
    let destination: String
    let now: Int64
    var query: StoreQuery { BackendSessionRules.session(registration: registration, destination: destination, now: now) }
}

extension PostgresStore {
    /// The rows `read` reads, each made into a `T` by `make`: prepared, unless the store's URL
    /// says `prepared_statements=off` or a connection lost a statement it had prepared.
    func rows<Read: PreparedStoreRead, T: Sendable>(
        within limit: Duration? = nil, prepared read: Read, _ make: @escaping @Sendable (PostgresStoreRow) throws -> T
    ) async throws(StoreError) -> [T] {
        guard preparing.load(ordering: .relaxed) else { return try await rows(within: limit, read.query, make) }
        return try await self.read(within: limit) { connection, logger in
            try await self.rows(prepared: read, on: connection, logger: logger, make)
        }
    }

    /// `read` on `connection`. A connection that lost the statement (a pooler in transaction
    /// mode that does not keep prepared statements: PgBouncer before 1.21, or later with
    /// `max_prepared_statements = 0`) gets the read again unnamed, and the store sends them
    /// unnamed from then on. A statement whose result changed under it (a migration changed a
    /// column's type: "cached plan must not change result type") gets the read unnamed too.
    /// Any other failure the server reports closes the connection: postgres-nio keeps a failed
    /// preparation's error for the connection's life, and the pool opens a fresh one.
    func rows<Read: PreparedStoreRead, T>(
        prepared read: Read, on connection: PostgresConnection, logger: Logger, _ make: (PostgresStoreRow) throws -> T
    ) async throws -> [T] {
        guard preparing.load(ordering: .relaxed) else {
            return try await Self.collect(connection.query(read.query.postgres, logger: logger), make)
        }
        do {
            var made: [T] = []
            for try await row in try await connection.execute(read, logger: logger) { made.append(try make(row)) }
            return made
        } catch let error as PSQLError where Self.lostPreparedStatement(error) {
            if preparing.exchange(false, ordering: .relaxed) {
                logger.warning(
                    "PostgreSQL lost a prepared statement (\(error.serverInfo?[.sqlState] ?? "")): a pooler in transaction mode between Midtier and PostgreSQL? Sending every statement unnamed from now on; set prepared_statements=off in the store's URL to say so (docs/operations.md, \"Prepared statements\")"
                )
            }
            return try await Self.collect(connection.query(read.query.postgres, logger: logger), make)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "0A000" {
            do {
                let made = try await Self.collect(connection.query(read.query.postgres, logger: logger), make)
                try? await connection.close()
                return made
            } catch {
                try? await connection.close()
                throw error
            }
        } catch let error as PSQLError where error.serverInfo != nil {
            try? await connection.close()
            throw error
        }
    }

    /// Whether `error` says a connection did not have a statement prepared as Midtier expected:
    /// not there (26000, invalid_sql_statement_name), or there already (42P05,
    /// duplicate_prepared_statement) — a server connection another client had prepared on.
    static func lostPreparedStatement(_ error: PSQLError) -> Bool {
        ["26000", "42P05"].contains(error.serverInfo?[.sqlState] ?? "")
    }
}
