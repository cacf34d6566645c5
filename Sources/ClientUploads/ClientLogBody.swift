import Foundation
package import MidtierStore

/// An uploaded log body as SAP's log upload takes it ("zipped data, multipart data or simple
/// binary data"; docs/device-api.md, "Client logs and usage"), read into entries:
/// - a zip archive (`Content-Type` `application/zip` or `application/x-zip-compressed`, or a body
///   starting with `PK\x03\x04` whatever its type): every file in it is a log;
/// - `multipart/…` with a boundary: every part is a log, itself zipped or not;
/// - anything else (`text/plain`, `application/octet-stream`, none): the body is the log.
package enum ClientLogBody {
    /// Every entry of the body, numbered across its files in order, for the upload `upload`.
    /// An empty body, or one whose files hold no entry, is an error.
    package static func entries(
        of body: [UInt8], contentType: String?, upload: String,
        limits: ClientLogLimits
    ) throws(ClientUploadError) -> [ClientLogEntry] {
        let files = try self.files(of: body, contentType: contentType, limits: limits)
        var entries: [ClientLogEntry] = []
        for (index, file) in files.enumerated() {
            do {
                entries += try ClientLogFormat.entries(
                    of: file, upload: upload, startingAt: entries.count,
                    limit: limits.maxEntries - entries.count)
            } catch {
                guard files.count > 1 else { throw error }
                throw ClientUploadError(error.kind, "file \(index + 1) of the upload: \(error.message)")
            }
        }
        guard !entries.isEmpty else { throw .invalid("the log upload holds no entry (#Date time#Severity#CorrelationId#Source#Location#Message#)") }
        return entries
    }

    /// The log files the body carries, unpacked.
    static func files(of body: [UInt8], contentType: String?, limits: ClientLogLimits) throws(ClientUploadError) -> [[UInt8]] {
        guard !body.isEmpty else { throw .invalid("the log upload is empty") }
        var budget = limits.maxInflatedBytes
        if let contentType, let boundary = try ClientLogMultipart.boundary(of: contentType) {
            var files: [[UInt8]] = []
            for (index, part) in try ClientLogMultipart.parts(of: body, boundary: boundary, maxParts: limits.maxFiles).enumerated() {
                if ClientLogZip.looksLikeZip(part) {
                    files += try ClientLogZip.files(of: part, limits: limits, budget: &budget, described: "part \(index + 1) of the multipart body")
                } else {
                    files.append(part)
                }
                guard files.count <= limits.maxFiles else { throw .tooLarge("the upload holds more than \(limits.maxFiles) files") }
            }
            return files
        }
        if isZip(contentType) || ClientLogZip.looksLikeZip(body) {
            return try ClientLogZip.files(of: body, limits: limits, budget: &budget, described: "the body")
        }
        return [body]
    }

    /// Whether the `Content-Type` names a zip archive.
    static func isZip(_ contentType: String?) -> Bool {
        guard let type = contentType?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() else { return false }
        return type == "application/zip" || type == "application/x-zip-compressed" || type == "application/x-zip"
    }
}
