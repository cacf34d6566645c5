package import MidtierCore

/// What a device uploads through SAP's client log and client usage services
/// (docs/device-api.md, "Client logs and usage"): always on behalf of one registration, kept
/// until the retention ends or the registration is wiped or deleted.
package enum ClientUploadKind: String, Sendable, Equatable, CaseIterable {
    /// A client log file: its entries are kept one by one (``ClientLogEntry``).
    case log
    /// A client usage report: its JSON text is kept whole.
    case usage
}

/// One upload as stored: who sent it and when, and how large it was.
package struct ClientUpload: Sendable, Equatable {
    /// Random, never reused.
    package var id: String
    package var kind: ClientUploadKind
    package var app: String
    package var user: UserIdentity
    package var registration: String
    /// The `DeviceId` the upload named (query or path), or the registration's; "" if neither.
    package var deviceId: String
    /// Milliseconds since 1970.
    package var receivedAt: Int64
    /// What the upload takes in the store, in bytes (``ClientLogEntry/storedSize`` of its
    /// entries, or a usage report's text): what the quotas count, not the body as sent.
    package var size: Int
    /// For `usage`: the report's JSON text as sent. For `log`: "".
    package var report: String

    package init(
        id: String, kind: ClientUploadKind, app: String, user: UserIdentity, registration: String,
        deviceId: String, receivedAt: Int64, size: Int, report: String
    ) {
        self.id = id
        self.kind = kind
        self.app = app
        self.user = user
        self.registration = registration
        self.deviceId = deviceId
        self.receivedAt = receivedAt
        self.size = size
        self.report = report
    }
}

/// SAP's client log severities, in rising order.
package enum ClientLogSeverity: String, Sendable, Equatable, CaseIterable, Comparable {
    case debug = "DEBUG"
    case info = "INFO"
    case warn = "WARN"
    case error = "ERROR"
    case fatal = "FATAL"

    /// The severity's place in the order, from 0 (stored beside it, for "this one or higher").
    var rank: Int { Self.allCases.firstIndex(of: self) ?? 0 }
    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// One line of an uploaded client log (`#Date time#Severity#CorrelationId#Source#Location#Message#`).
package struct ClientLogEntry: Sendable, Equatable {
    /// The upload the entry came in.
    package var upload: String
    /// The entry's place in its upload, from 0.
    package var sequence: Int
    /// The entry's own time as milliseconds since 1970 (from its `Date time`).
    package var time: Int64
    package var severity: ClientLogSeverity
    package var correlationId: String
    package var source: String
    package var location: String
    package var message: String

    package init(
        upload: String, sequence: Int, time: Int64, severity: ClientLogSeverity, correlationId: String,
        source: String, location: String, message: String
    ) {
        self.upload = upload
        self.sequence = sequence
        self.time = time
        self.severity = severity
        self.correlationId = correlationId
        self.source = source
        self.location = location
        self.message = message
    }
}

extension ClientLogEntry {
    /// What the entry takes in the store: its texts' bytes and 64 for the rest of its row
    /// (upload id, sequence, time, severity), so that a hundred thousand empty entries weigh
    /// what they cost (docs/device-api.md, "Client logs and usage").
    package var storedSize: Int { 64 + correlationId.utf8.count + source.utf8.count + location.utf8.count + message.utf8.count }
}

/// An entry with the upload it came in, as admins list them.
package struct ClientLogRecord: Sendable, Equatable {
    package var entry: ClientLogEntry
    package var upload: ClientUpload

    package init(entry: ClientLogEntry, upload: ClientUpload) {
        self.entry = entry
        self.upload = upload
    }
}

/// Which uploads or log entries an admin asks for; every field that is set must match (byte
/// for byte for the text ones).
package struct ClientUploadFilter: Sendable, Equatable {
    package var registration: String?
    package var user: UserIdentity?
    package var app: String?
    /// Log entries only: this severity or a higher one.
    package var minimumSeverity: ClientLogSeverity?
    /// Log entries by their own time, uploads by their `receivedAt`: at or after (ms).
    package var from: Int64?
    /// Before (ms).
    package var until: Int64?
    /// Log entries only: the message contains this text (byte for byte).
    package var text: String?

    package init(
        registration: String? = nil, user: UserIdentity? = nil, app: String? = nil,
        minimumSeverity: ClientLogSeverity? = nil, from: Int64? = nil, until: Int64? = nil, text: String? = nil
    ) {
        self.registration = registration
        self.user = user
        self.app = app
        self.minimumSeverity = minimumSeverity
        self.from = from
        self.until = until
        self.text = text
    }
}

/// Where a page of a listing starts: after this item of the previous page (newest first).
package struct ClientUploadCursor: Sendable, Equatable {
    /// The last item's time (entry time for log entries, `receivedAt` for uploads).
    package var time: Int64
    package var upload: String
    /// Log entries only; 0 for uploads.
    package var sequence: Int

    package init(time: Int64, upload: String, sequence: Int) {
        self.time = time
        self.upload = upload
        self.sequence = sequence
    }
}

/// The bounds one registration's uploads are kept within.
package struct ClientUploadBounds: Sendable, Equatable {
    /// The most bytes (as stored) a registration's kept uploads of one kind may take
    /// together; the oldest are dropped to make room.
    package var bytesPerRegistration: Int
    /// The same for all of one user's registrations together.
    package var bytesPerUser: Int
    /// The most uploads of one kind a registration may make in `window` milliseconds.
    package var uploadsPerWindow: Int
    package var window: Int64

    package init(bytesPerRegistration: Int, bytesPerUser: Int = .max, uploadsPerWindow: Int, window: Int64) {
        self.bytesPerRegistration = bytesPerRegistration
        self.bytesPerUser = bytesPerUser
        self.uploadsPerWindow = uploadsPerWindow
        self.window = window
    }
}

/// The result of keeping an upload.
package enum ClientUploadSave: Sendable, Equatable {
    /// Kept; `dropped` older uploads of the registration or the user made room.
    case saved(dropped: Int)
    /// The registration already made `bounds.uploadsPerWindow` uploads of this kind in the
    /// window; nothing was written.
    case tooMany
    /// The registration is not active (deleted, locked or wiped meanwhile); nothing was written.
    case registrationInactive
}
