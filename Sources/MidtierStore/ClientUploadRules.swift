import MidtierCore

/// Client logs and usage reports, written once for both stores (``StoreQuery``; docs/device-api.md,
/// "Client logs and usage"): each upload on behalf of one registration, a log's entries one by one.
enum ClientUploadRules {
    static let uploadColumns: StaticString =
        "u.id, u.kind, u.app_id, u.user_realm, u.user_id, u.registration_id, u.device_id, u.received_at, u.size, u.report"

    static func upload(_ row: some StoreRow) throws -> ClientUpload {
        ClientUpload(
            id: try row.text("id"), kind: ClientUploadKind(rawValue: try row.text("kind")) ?? .log, app: try row.text("app_id"),
            user: UserIdentity(realm: try row.text("user_realm"), id: try row.text("user_id")),
            registration: try row.text("registration_id"), deviceId: try row.text("device_id"),
            receivedAt: try row.integer("received_at"), size: Int(try row.integer("size")), report: try row.text("report"))
    }

    /// How many uploads of `kind` the registration sent at or after `since` (column `count`).
    static func count(of kind: ClientUploadKind, registration: String, since: Int64) -> StoreQuery {
        "SELECT COUNT(*) AS count FROM \(table: "client_uploads") WHERE registration_id = \(registration) "
            + "AND kind = \(kind.rawValue) AND received_at >= \(since)"
    }

    /// The registration's uploads of `kind`, oldest first (`id`, `size`): the first to go.
    static func kept(_ kind: ClientUploadKind, registration: String) -> StoreQuery {
        "SELECT id, size FROM \(table: "client_uploads") WHERE registration_id = \(registration) AND kind = \(kind.rawValue) "
            + "ORDER BY received_at, id"
    }

    /// The user's uploads of `kind` but `upload`, oldest first (`id`, `size`).
    static func kept(_ kind: ClientUploadKind, user: UserIdentity, besides upload: String) -> StoreQuery {
        "SELECT id, size FROM \(table: "client_uploads") WHERE user_realm = \(user.realm) AND user_id = \(user.id) "
            + "AND kind = \(kind.rawValue) AND id <> \(upload) ORDER BY received_at, id"
    }

    static func sized(_ row: some StoreRow) throws -> (id: String, size: Int) {
        (try row.text("id"), Int(try row.integer("size")))
    }

    static func insert(_ upload: ClientUpload) -> StoreQuery {
        "INSERT INTO \(table: "client_uploads") (id, kind, app_id, user_realm, user_id, registration_id, device_id, received_at, size, report) "
            + "VALUES (\(upload.id), \(upload.kind.rawValue), \(upload.app), \(upload.user.realm), \(upload.user.id), "
            + "\(upload.registration), \(upload.deviceId), \(upload.receivedAt), \(upload.size), \(upload.report))"
    }

    /// How many entries one statement inserts at most (nine values each, well under either
    /// store's limit on bound values).
    static let entriesPerInsert = 500

    /// Inserts `entries` (at most ``entriesPerInsert``) of upload `upload`.
    static func insert(_ entries: ArraySlice<ClientLogEntry>, of upload: String) -> StoreQuery {
        var query: StoreQuery =
            "INSERT INTO \(table: "client_log_entries") "
            + "(upload_id, sequence, time, severity, severity_rank, correlation_id, source, location, message) VALUES "
        for (index, entry) in entries.enumerated() {
            query = query + (index == 0 ? "" : ", ")
            query =
                query + "(\(upload), \(entry.sequence), \(entry.time), \(entry.severity.rawValue), \(entry.severity.rank), "
                + "\(entry.correlationId), \(entry.source), \(entry.location), \(entry.message))"
        }
        return query
    }

    /// How many uploads one statement deletes at most.
    static let uploadsPerDelete = 500

    /// Deletes the uploads `ids` (at most ``uploadsPerDelete``, at least one) with their entries, in this order.
    static func delete(uploads ids: ArraySlice<String>) -> [StoreQuery] {
        [
            "DELETE FROM \(table: "client_log_entries") WHERE upload_id IN (\(list: ids))",
            "DELETE FROM \(table: "client_uploads") WHERE id IN (\(list: ids))",
        ]
    }

    /// The oldest of `kept` to drop until what is kept, with `adding` bytes more, fits in `limit`.
    static func dropped(from kept: [(id: String, size: Int)], adding: Int, limit: Int) -> [String] {
        var total = kept.reduce(adding) { $0 + $1.size }
        var dropped: [String] = []
        for old in kept where total > limit {
            dropped.append(old.id)
            total -= old.size
        }
        return dropped
    }

    /// Deletes every upload received before `cutoff` with its entries, in this order; `uploads`
    /// returns a row per upload.
    static func purge(receivedBefore cutoff: Int64) -> (entries: StoreQuery, uploads: StoreQuery) {
        (
            "DELETE FROM \(table: "client_log_entries") WHERE upload_id IN "
                + "(SELECT id FROM \(table: "client_uploads") WHERE received_at < \(cutoff))",
            "DELETE FROM \(table: "client_uploads") WHERE received_at < \(cutoff) RETURNING id"
        )
    }

    /// The conditions `filter` sets on uploads (`u`), with `time` the column its from/until bound.
    static func conditions(_ filter: ClientUploadFilter, time: String) -> StoreQuery {
        var query: StoreQuery = ""
        if let registration = filter.registration { query = query + " AND u.registration_id = \(registration)" }
        if let user = filter.user { query = query + " AND u.user_realm = \(user.realm) AND u.user_id = \(user.id)" }
        if let app = filter.app { query = query + " AND u.app_id = \(app)" }
        if let from = filter.from { query = query + " AND \(column: time) >= \(from)" }
        if let until = filter.until { query = query + " AND \(column: time) < \(until)" }
        return query
    }

    /// Log entries `filter` selects, newest first, after `cursor`, at most `limit`.
    static func logs(matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?, limit: Int) -> StoreQuery {
        var query: StoreQuery =
            "SELECT \(sql: uploadColumns), e.sequence, e.time, e.severity, e.correlation_id, e.source, e.location, e.message "
            + "FROM \(table: "client_log_entries") e JOIN \(table: "client_uploads") u ON u.id = e.upload_id WHERE TRUE"
            + conditions(filter, time: "e.time")
        if let minimum = filter.minimumSeverity { query = query + " AND e.severity_rank >= \(minimum.rank)" }
        if let text = filter.text { query = query + " AND \(positionOf: text, in: "e.message") > 0" }
        if let cursor { query = query + " AND (e.time, e.upload_id, e.sequence) < (\(cursor.time), \(cursor.upload), \(cursor.sequence))" }
        return query + " ORDER BY e.time DESC, e.upload_id DESC, e.sequence DESC LIMIT \(max(0, limit))"
    }

    static func log(_ row: some StoreRow) throws -> ClientLogRecord {
        let upload = try upload(row)
        return ClientLogRecord(
            entry: ClientLogEntry(
                upload: upload.id, sequence: Int(try row.integer("sequence")), time: try row.integer("time"),
                severity: ClientLogSeverity(rawValue: try row.text("severity")) ?? .fatal,
                correlationId: try row.text("correlation_id"), source: try row.text("source"), location: try row.text("location"),
                message: try row.text("message")),
            upload: upload)
    }

    /// Uploads of `kind` `filter` selects, newest first, after `cursor`, at most `limit`.
    static func uploads(
        _ kind: ClientUploadKind, matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?, limit: Int
    )
        -> StoreQuery
    {
        var query: StoreQuery =
            "SELECT \(sql: uploadColumns) FROM \(table: "client_uploads") u WHERE u.kind = \(kind.rawValue)"
            + conditions(filter, time: "u.received_at")
        if let cursor { query = query + " AND (u.received_at, u.id) < (\(cursor.time), \(cursor.upload))" }
        return query + " ORDER BY u.received_at DESC, u.id DESC LIMIT \(max(0, limit))"
    }
}
