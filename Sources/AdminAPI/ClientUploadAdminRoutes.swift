import Administration
import Foundation
import Hummingbird
import MidtierCore
import MidtierHTTP
import MidtierStore
import Registrations

/// `GET /admin/v1/client-logs` and `GET /admin/v1/client-usage` (docs/admin-api.yaml): what
/// devices uploaded through the client log and usage services, newest first, a page at a
/// time. Device-supplied text is returned as JSON strings, never interpreted.
extension AdminRoutes {
    static let clientUploadPageSize = 100

    func listClientLogs(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let query = try Self.clientUploadQuery(.log, request)
        let page = try await administration.clientLogs(query)
        return AdminJSON.response(.ok, ["entries": page.records.map(Self.logEntry), "next": page.next.map { $0 as Any } ?? NSNull()])
    }

    func listClientUsage(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let query = try Self.clientUploadQuery(.usage, request)
        let page = try await administration.clientUsage(query)
        return AdminJSON.response(.ok, ["reports": page.uploads.map(Self.usageReport), "next": page.next.map { $0 as Any } ?? NSNull()])
    }

    /// The query's filter; a parameter given twice is a `400` naming it.
    private static func clientUploadQuery(_ kind: ClientUploadKind, _ request: Request) throws(Refusal) -> ClientUploadQuery {
        let parameters = request.uri.queryParameters
        return try ClientUploadQuery.read(kind, defaultLimit: clientUploadPageSize) { name throws(Refusal) in
            let values = parameters.getAll(name)
            guard values.count <= 1 else { throw .badRequest("\(name) is given more than once") }
            return values.first
        }
    }

    private static func upload(_ u: ClientUpload) -> [String: Any] {
        ["id": u.id, "receivedAt": AdminJSON.timestamp(u.receivedAt), "registration": u.registration, "app": u.app,
         "userId": u.user.id, "realm": u.user.realm, "deviceId": u.deviceId]
    }

    private static func logEntry(_ record: ClientLogRecord) -> [String: Any] {
        let e = record.entry
        return ["time": AdminJSON.timestamp(e.time), "severity": e.severity.rawValue, "correlationId": e.correlationId,
                "source": e.source, "location": e.location, "message": e.message, "upload": upload(record.upload)]
    }

    private static func usageReport(_ u: ClientUpload) -> [String: Any] {
        var object = upload(u)
        object["size"] = u.size
        object["report"] = report(u.report)
        return object
    }

    /// The report's JSON as a value; text that is not JSON (the store keeps what was sent) as
    /// a string.
    static func report(_ text: String) -> Any {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? text
    }
}
