package import MidtierCore

/// The audit trail's reads, written once for both stores (``StoreQuery``): the entries an
/// export pages through, and the newest ones an admin looks at (docs/admin.md, "Audit").
enum AuditRules {
    /// Entries at or after `since` (milliseconds) with a sequence above `after`, oldest first.
    static func entries(since: Int64, after: Int64, limit: Int) -> StoreQuery {
        "SELECT sequence, at, actor, action, target, detail, source FROM \(table: "audit") "
            + "WHERE at >= \(since) AND sequence > \(after) ORDER BY sequence LIMIT \(limit)"
    }

    /// The newest entries below sequence `before` (all when nil), about `subject` when given:
    /// its target, or also its actor (an admin's own actions).
    static func recent(before: Int64?, about subject: AuditSubject?, limit: Int) -> StoreQuery {
        var query: StoreQuery =
            "SELECT sequence, at, actor, action, target, detail, source FROM \(table: "audit") WHERE sequence < \(before ?? Int64.max)"
        switch subject?.selection {
        case nil: break
        case (let target, nil)?: query = query + " AND target = \(target)"
        case (let target, let actor?)?: query = query + " AND (target = \(target) OR actor = \(actor))"
        }
        return query + " ORDER BY sequence DESC LIMIT \(limit)"
    }

    /// An entry from a row of either query.
    static func entry(_ row: some StoreRow) throws -> AuditEntry {
        AuditEntry(
            sequence: try row.integer("sequence"), at: try row.integer("at"), actor: try row.text("actor"),
            action: try row.text("action"), target: try row.text("target"), detail: try row.text("detail"),
            source: try row.text("source"))
    }
}

extension AuditRules {
    /// Appends `entry` (its sequence number is the store's to give).
    static func append(_ entry: AuditEntry) -> StoreQuery {
        "INSERT INTO \(table: "audit") (at, actor, action, target, detail, source) "
            + "VALUES (\(entry.at), \(entry.actor), \(entry.action), \(entry.target), \(entry.detail), \(entry.source))"
    }
}
