/// A statement written once for both stores (docs/architecture.md, "Each store rule once"): its
/// SQL, the tables it names and the values it takes, rendered by each store's ``StoreDialect``
/// (PostgreSQL's tables carry the `midtier_` prefix; SQLite binds `?`, PostgreSQL `$1`, `$2`, …).
/// Values are always bound, never written into the text.
///
///     let query: StoreQuery = "SELECT at FROM \(table: "audit") WHERE sequence > \(after)"
package struct StoreQuery: Sendable, Equatable, ExpressibleByStringInterpolation {
    /// A value a statement binds.
    package enum Value: Sendable, Equatable {
        case integer(Int64)
        case text(String)
        case bytes([UInt8])
        case null
    }

    enum Part: Sendable, Equatable {
        case sql(String)
        case table(String)
        case value(Value)
        case bytewise
        case lock(RowLock)
        case offset(Value)
        case position(column: String, of: Value)
    }

    /// Rows a transaction locks as it reads them (PostgreSQL's `FOR UPDATE` and `FOR SHARE`);
    /// SQLite's one writer at a time holds them all already.
    package enum RowLock: Sendable, Equatable {
        case update
        case share
        /// Locks for update the rows no other transaction holds, and passes over the others.
        case updateSkippingLocked
    }

    private(set) var parts: [Part]

    package init(stringLiteral value: String) { parts = [.sql(value)] }

    package init(stringInterpolation: StringInterpolation) { parts = stringInterpolation.parts }

    package struct StringInterpolation: StringInterpolationProtocol {
        var parts: [Part] = []
        package init(literalCapacity: Int, interpolationCount: Int) { parts.reserveCapacity(interpolationCount * 2 + 1) }
        package mutating func appendLiteral(_ literal: String) { if !literal.isEmpty { parts.append(.sql(literal)) } }
        /// SQL text Midtier itself wrote (a list of columns, say), never a value.
        package mutating func appendInterpolation(sql: StaticString) { parts.append(.sql("\(sql)")) }
        /// A column, by its name as Midtier wrote it (never a value).
        package mutating func appendInterpolation(column: String) { parts.append(.sql(column)) }
        /// A table, by its name without a store's prefix.
        package mutating func appendInterpolation(table: String) { parts.append(.table(table)) }
        /// After an `ORDER BY` column: order it by its bytes (SQLite's BINARY, PostgreSQL's
        /// `COLLATE "C"`), never by a locale: ids and names are compared by their bytes.
        package mutating func appendInterpolation(bytewise column: String) { parts += [.sql(column), .bytewise] }
        package mutating func appendInterpolation(_ value: Int64) { parts.append(.value(.integer(value))) }
        package mutating func appendInterpolation(_ value: Int) { parts.append(.value(.integer(Int64(value)))) }
        package mutating func appendInterpolation(_ value: String) { parts.append(.value(.text(value))) }
        package mutating func appendInterpolation(_ value: Int64?) { parts.append(.value(value.map { .integer($0) } ?? .null)) }
        package mutating func appendInterpolation(_ value: String?) { parts.append(.value(value.map { .text($0) } ?? .null)) }
        package mutating func appendInterpolation(bytes: [UInt8]) { parts.append(.value(.bytes(bytes))) }
        /// A list of values, as in `IN (…)`: one placeholder each (at least one value).
        package mutating func appendInterpolation(list values: some Collection<String>) {
            for (index, value) in values.enumerated() {
                if index > 0 { parts.append(.sql(", ")) }
                parts.append(.value(.text(value)))
            }
        }
        /// At the end of a `SELECT`: lock the rows read until the transaction ends.
        package mutating func appendInterpolation(lock: RowLock) { parts.append(.lock(lock)) }
        /// After an `ORDER BY`: skip the first `count` rows (and keep all the others).
        package mutating func appendInterpolation(offset count: Int) { parts.append(.offset(.integer(Int64(count)))) }
        /// Where `text` first occurs in `column` (from 1; 0 when nowhere): a search in which `%`
        /// and `_` are text like any other, unlike `LIKE`.
        package mutating func appendInterpolation(positionOf text: String, in column: String) {
            parts.append(.position(column: column, of: .text(text)))
        }
    }

    /// `lhs` followed by `rhs` (a condition added to a query, say).
    package static func + (lhs: StoreQuery, rhs: StoreQuery) -> StoreQuery {
        var joined = lhs
        joined.parts += rhs.parts
        return joined
    }

    /// The statement's text in `dialect`, and its values in the order they are bound.
    package func rendered(_ dialect: StoreDialect) -> (sql: String, values: [Value]) {
        var sql = ""
        var values: [Value] = []
        for part in parts {
            switch part {
            case .sql(let text): sql += text
            case .table(let name): sql += dialect.tablePrefix + name
            case .bytewise: sql += dialect.bytewise
            case .value(let value):
                values.append(value)
                sql += dialect.placeholder(values.count)
            case .lock(let lock): sql += dialect.lock(lock)
            case .offset(let count):
                values.append(count)
                sql += dialect.offset + dialect.placeholder(values.count)
            case .position(let column, let text):
                values.append(text)
                sql += "\(dialect.position)(\(column), \(dialect.placeholder(values.count)))"
            }
        }
        return (sql, values)
    }
}

/// What differs in the SQL of the two stores' statements.
package struct StoreDialect: Sendable {
    /// Before every table's name.
    let tablePrefix: String
    /// The placeholder of the n-th value (from 1).
    let placeholder: @Sendable (Int) -> String
    /// After a column to order by its bytes.
    let bytewise: String
    /// After a `SELECT` that locks the rows it reads.
    let lock: @Sendable (StoreQuery.RowLock) -> String
    /// Before the number of rows to skip.
    let offset: String
    /// The function that finds text in text.
    let position: String

    package static let sqlite = StoreDialect(
        tablePrefix: "", placeholder: { _ in "?" }, bytewise: "", lock: { _ in "" }, offset: " LIMIT -1 OFFSET ", position: "instr")
    package static let postgres = StoreDialect(
        tablePrefix: "midtier_", placeholder: { "$\($0)" }, bytewise: #" COLLATE "C""#,
        lock: {
            switch $0 {
            case .update: " FOR UPDATE"
            case .share: " FOR SHARE"
            case .updateSkippingLocked: " FOR UPDATE SKIP LOCKED"
            }
        }, offset: " OFFSET ", position: "strpos")
}

/// A row either store read, by column name: what a rule written once reads its results from.
package protocol StoreRow {
    func integer(_ column: String) throws -> Int64
    func text(_ column: String) throws -> String
    func optionalInteger(_ column: String) throws -> Int64?
    func optionalText(_ column: String) throws -> String?
    func bytes(_ column: String) throws -> [UInt8]
}

/// A column a row does not have, or not of the type asked for.
struct MissingColumn: Error, CustomStringConvertible {
    let column: String
    var description: String { "the row has no value of the expected type in column \(column)" }
}
