import MidtierCore
import MidtierJSON
import MidtierStore

// The client-upload shapes of the admin API (`docs/admin-api.yaml`): what devices uploaded
// through the client log and usage services. Device-supplied text is written as JSON strings,
// never interpreted; members in key order, as in AdminJSON.swift.

/// `Upload`: the upload an entry or report came in, and on whose behalf.
struct UploadJSON {
    var upload: ClientUpload

    init(_ upload: ClientUpload) { self.upload = upload }

    /// The members every upload has; a usage report adds its own to them.
    var members: [String: JSON] {
        let u = upload
        return [
            "app": .string(u.app),
            "deviceId": .string(u.deviceId),
            "id": .string(u.id),
            "realm": .string(u.user.realm),
            "receivedAt": AdminTime.json(u.receivedAt),
            "registration": .string(u.registration),
            "userId": .string(u.user.id),
        ]
    }

    var json: JSON { .sortedObject(members) }
}

/// `LogEntry`: one line of an uploaded client log, with the upload it came in.
struct LogEntryJSON {
    var record: ClientLogRecord

    init(_ record: ClientLogRecord) { self.record = record }

    var json: JSON {
        let e = record.entry
        return [
            "correlationId": .string(e.correlationId),
            "location": .string(e.location),
            "message": .string(e.message),
            "severity": .string(e.severity.rawValue),
            "source": .string(e.source),
            "time": AdminTime.json(e.time),
            "upload": UploadJSON(record.upload).json,
        ]
    }
}

/// `UsageReport`: a usage report with the upload it came in.
struct UsageReportJSON {
    var upload: ClientUpload

    init(_ upload: ClientUpload) { self.upload = upload }

    var json: JSON {
        var members = UploadJSON(upload).members
        members["size"] = .number(upload.size)
        members["report"] = Self.report(upload.report)
        return .sortedObject(members)
    }

    /// The report's JSON as a value, as the device sent it (its members in its order, its
    /// numbers as written), read by the core's strict parser. Text that is not strict JSON (the
    /// store keeps what was sent; the upload checked it, but older rows may differ) is a string.
    static func report(_ text: String) -> JSON {
        let parsed = JSONParser.parse(Array(text.utf8))
        guard let value = parsed.value, parsed.duplicateKeys.isEmpty else { return .string(text) }
        return value
    }
}

/// A page of a listing: its items under their name (`entries` or `reports`), and `next`, the
/// cursor of the next page (`null` on the last).
struct PageJSON {
    enum Items: String {
        case entries, reports
    }

    var items: Items
    var values: [JSON]
    var next: String?

    var json: JSON {
        .sortedObject([items.rawValue: .array(values), "next": .string(next)])
    }
}
