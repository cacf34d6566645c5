import ClientUploads

/// `client-log`: a client log upload body as `POST …/clientlogs` reads it (plain text, zip,
/// multipart). The first byte picks the `Content-Type`; the rest is the body.
enum ClientLogTarget {
    static let contentTypes: [String?] = [
        nil, "text/plain", "application/zip", "multipart/form-data; boundary=XyZ", "application/octet-stream",
        "multipart/mixed; boundary=\"a b\"", "application/x-zip-compressed",
    ]

    static func run(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let contentType = contentTypes[Int(first) % contentTypes.count]
        _ = try? ClientLogBody.entries(
            of: Array(bytes.dropFirst()), contentType: contentType, upload: "fuzz",
            limits: .forUploads(of: 1 << 20))
    }
}

/// `client-log-lines`: one log file's lines read into entries (ClientLogFormat), directly.
enum ClientLogLinesTarget {
    static func run(_ bytes: [UInt8]) {
        _ = try? ClientLogFormat.entries(of: bytes, upload: "fuzz", limit: 1000)
    }
}
