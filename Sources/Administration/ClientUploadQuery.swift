import Foundation
import MidtierCore
package import MidtierHTTP
package import MidtierStore
import Registrations

/// What an admin asks of the client logs or usage reports devices uploaded (docs/admin.md,
/// "Client logs and usage reports"), read from a query: the admin API's and the console's
/// filter form use the same names, so a refusal names the same field on both.
package struct ClientUploadQuery: Sendable, Equatable {
    package var filter = ClientUploadFilter()
    package var cursor: ClientUploadCursor?
    package var limit: Int

    package init(filter: ClientUploadFilter = ClientUploadFilter(), cursor: ClientUploadCursor? = nil, limit: Int) {
        self.filter = filter
        self.cursor = cursor
        self.limit = limit
    }

    package static let maximumLimit = 500
    /// The longest text an admin may filter by (any one parameter), in code points.
    package static let maximumTextLength = 1000

    /// The query's parameters, each read by `value` (nil for one not given; `value` refuses
    /// one given twice). An empty filter is no filter; a realm without `userId` is ignored (as
    /// on `/admin/v1/registrations`). `lenientTimes` takes a time without seconds or offset (an
    /// HTML `datetime-local` field) as UTC.
    package static func read(
        _ kind: ClientUploadKind, defaultLimit: Int, lenientTimes: Bool = false,
        _ value: (String) throws(Refusal) -> String?
    ) throws(Refusal) -> ClientUploadQuery {
        func text(_ name: String) throws(Refusal) -> String? {
            guard let text = try value(name), !text.isEmpty else { return nil }
            try Administration.checkText(text, named: name)
            // Code points, as the document's maxLength counts them.
            guard text.unicodeScalars.count <= maximumTextLength else {
                throw .badRequest("\(name) is longer than \(maximumTextLength) characters")
            }
            return text
        }
        func time(_ name: String) throws(Refusal) -> Int64? {
            guard let given = try text(name) else { return nil }
            if let milliseconds = RFC3339Time.milliseconds(given) { return milliseconds }
            if lenientTimes, let milliseconds = RFC3339Time.milliseconds(given + (given.utf8.count == 16 ? ":00Z" : "Z")) {
                return milliseconds
            }
            throw .badRequest("\(name) must be an RFC 3339 date-time (2025-03-01T08:15:00Z)")
        }
        var query = ClientUploadQuery(limit: defaultLimit)
        query.filter.registration = try text("registration")
        let realm = try text("realm")
        if let userId = try text("userId") {
            query.filter.user = UserIdentity(realm: realm ?? UserIdentity.localRealm, id: userId)
        }
        query.filter.app = try text("app")
        query.filter.from = try time("from")
        query.filter.until = try time("until")
        let level = try text("level"), contains = try text("text")
        switch kind {
        case .log:
            if let level {
                guard let severity = ClientLogSeverity(rawValue: level) else {
                    throw .badRequest("level must be one of \(ClientLogSeverity.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                query.filter.minimumSeverity = severity
            }
            query.filter.text = contains
        case .usage:
            if level != nil { throw .badRequest("level filters client logs only, not usage reports") }
            if contains != nil { throw .badRequest("text filters client logs only, not usage reports") }
        }
        // Given empty is a mistake here, not "no limit".
        if let limit = try value("limit") {
            query.limit = try Administration.pageLimit(limit, default: maximumLimit, maximum: maximumLimit)
        }
        if let cursor = try value("cursor"), !cursor.isEmpty {
            guard let parsed = ClientUploadCursorText.decode(cursor, kind) else {
                throw .badRequest("cursor is malformed: pass the previous page's next value unchanged")
            }
            query.cursor = parsed
        }
        return query
    }
}

/// A page's `next`: `<time>.<sequence>.<upload id>` for log entries, `<time>.<upload id>` for
/// usage reports (docs/admin-api.yaml). Clients treat it as opaque; it names a position in the
/// newest-first order, so any well-formed one is a valid place to read on from.
package enum ClientUploadCursorText {
    /// The longest upload id a cursor carries; ids are printable ASCII (random tokens).
    static let longestUpload = 128

    package static func encode(_ cursor: ClientUploadCursor, _ kind: ClientUploadKind) -> String {
        switch kind {
        case .log: "\(cursor.time).\(cursor.sequence).\(cursor.upload)"
        case .usage: "\(cursor.time).\(cursor.upload)"
        }
    }

    /// The cursor `text` spells for a listing of `kind`, or nil for anything else.
    package static func decode(_ text: String, _ kind: ClientUploadKind) -> ClientUploadCursor? {
        let parts = text.split(separator: ".", maxSplits: kind == .log ? 2 : 1, omittingEmptySubsequences: false)
        guard parts.count == (kind == .log ? 3 : 2), let time = number(parts[0], digits: 18, signed: true),
            let upload = parts.last, (1...longestUpload).contains(upload.utf8.count),
            upload.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else { return nil }
        var sequence: Int64 = 0
        if kind == .log {
            guard let parsed = number(parts[1], digits: 9, signed: false) else { return nil }
            sequence = parsed
        }
        return ClientUploadCursor(time: time, upload: String(upload), sequence: Int(sequence))
    }

    /// Decimal digits only (1 to `digits`, after a minus when `signed`): no plus, no spaces.
    private static func number(_ text: Substring, digits: Int, signed: Bool) -> Int64? {
        let body = signed && text.utf8.first == UInt8(ascii: "-") ? text.dropFirst() : text
        guard (1...digits).contains(body.utf8.count), body.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        return Int64(text)
    }

    static func cursor(after record: ClientLogRecord) -> ClientUploadCursor {
        ClientUploadCursor(time: record.entry.time, upload: record.upload.id, sequence: record.entry.sequence)
    }

    static func cursor(after upload: ClientUpload) -> ClientUploadCursor {
        ClientUploadCursor(time: upload.receivedAt, upload: upload.id, sequence: 0)
    }
}

extension Administration {
    /// The most bytes of device text (messages, reports) one page carries: a page stops early
    /// (with a `next`) rather than hold hundreds of large reports in memory at once. A page
    /// always holds at least one item.
    package static let clientUploadPageBytes = 8 << 20
    /// How many items are read from the store at a time while a page is filled.
    static let clientUploadBatch = 50

    /// A page of log entries newest first, and the cursor of the next page (nil on the last).
    package func clientLogs(_ query: ClientUploadQuery) async throws(Refusal) -> (records: [ClientLogRecord], next: String?) {
        let store = registrations.store
        let page = try await clientUploadPage(
            query, size: { $0.entry.message.utf8.count + $0.entry.location.utf8.count + $0.entry.source.utf8.count },
            cursor: ClientUploadCursorText.cursor(after:)
        ) { after, limit throws(Refusal) in
            try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await store.clientLogs(matching: query.filter, after: after, limit: limit)
            }
        }
        return (page.items, page.next.map { ClientUploadCursorText.encode($0, .log) })
    }

    /// A page of usage reports newest first, and the cursor of the next page (nil on the last).
    package func clientUsage(_ query: ClientUploadQuery) async throws(Refusal) -> (uploads: [ClientUpload], next: String?) {
        let store = registrations.store
        let page = try await clientUploadPage(query, size: { $0.report.utf8.count }, cursor: ClientUploadCursorText.cursor(after:)) {
            after, limit throws(Refusal) in
            try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await store.clientUploads(.usage, matching: query.filter, after: after, limit: limit)
            }
        }
        return (page.items, page.next.map { ClientUploadCursorText.encode($0, .usage) })
    }

    /// Up to `query.limit` items and `clientUploadPageBytes` bytes, read in batches; `next` is
    /// the cursor after the last item when at least one more is there.
    private func clientUploadPage<Item>(
        _ query: ClientUploadQuery, size: (Item) -> Int, cursor: (Item) -> ClientUploadCursor,
        fetch: (ClientUploadCursor?, Int) async throws(Refusal) -> [Item]
    )
        async throws(Refusal) -> (items: [Item], next: ClientUploadCursor?)
    {
        var items: [Item] = []
        var bytes = 0
        var after = query.cursor
        while true {
            let asked = min(query.limit - items.count + 1, Self.clientUploadBatch)
            let batch = try await fetch(after, asked)
            for item in batch {
                let itemBytes = size(item)
                if items.count == query.limit || (!items.isEmpty && bytes + itemBytes > Self.clientUploadPageBytes) {
                    return (items, items.last.map(cursor))
                }
                items.append(item)
                bytes += itemBytes
            }
            guard batch.count == asked, let last = batch.last else { return (items, nil) }
            after = cursor(last)
        }
    }
}
