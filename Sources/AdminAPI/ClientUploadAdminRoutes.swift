import Administration
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
        return .json(PageJSON(items: .entries, values: page.records.map { LogEntryJSON($0).json }, next: page.next).json)
    }

    func listClientUsage(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let query = try Self.clientUploadQuery(.usage, request)
        let page = try await administration.clientUsage(query)
        return .json(PageJSON(items: .reports, values: page.uploads.map { UsageReportJSON($0).json }, next: page.next).json)
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
}
