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
    }

    enum Part: Sendable, Equatable {
        case sql(String)
        case table(String)
        case value(Value)
        case bytewise
    }

    private(set) var parts: [Part]

    package init(stringLiteral value: String) { parts = [.sql(value)] }

    package init(stringInterpolation: StringInterpolation) { parts = stringInterpolation.parts }

    package struct StringInterpolation: StringInterpolationProtocol {
        var parts: [Part] = []
        package init(literalCapacity: Int, interpolationCount: Int) { parts.reserveCapacity(interpolationCount * 2 + 1) }
        package mutating func appendLiteral(_ literal: String) { if !literal.isEmpty { parts.append(.sql(literal)) } }
        /// A table, by its name without a store's prefix.
        package mutating func appendInterpolation(table: String) { parts.append(.table(table)) }
        /// After an `ORDER BY` column: order it by its bytes (SQLite's BINARY, PostgreSQL's
        /// `COLLATE "C"`), never by a locale: ids and names are compared by their bytes.
        package mutating func appendInterpolation(bytewise column: String) { parts += [.sql(column), .bytewise] }
        package mutating func appendInterpolation(_ value: Int64) { parts.append(.value(.integer(value))) }
        package mutating func appendInterpolation(_ value: Int) { parts.append(.value(.integer(Int64(value)))) }
        package mutating func appendInterpolation(_ value: String) { parts.append(.value(.text(value))) }
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

    package static let sqlite = StoreDialect(tablePrefix: "", placeholder: { _ in "?" }, bytewise: "")
    package static let postgres = StoreDialect(tablePrefix: "midtier_", placeholder: { "$\($0)" }, bytewise: #" COLLATE "C""#)
}

/// A row either store read, by column name: what a rule written once reads its results from.
package protocol StoreRow {
    func integer(_ column: String) throws -> Int64
    func text(_ column: String) throws -> String
}

/// A column a row does not have, or not of the type asked for.
struct MissingColumn: Error, CustomStringConvertible {
    let column: String
    var description: String { "the row has no value of the expected type in column \(column)" }
}
