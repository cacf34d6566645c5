import Hummingbird
import Logging

/// The device-facing listener's responder: Midtier's own routes (health, onboarding, settings)
/// go through a Hummingbird router; every other path is a destination call for the proxy.
/// Every refusal, including the router's own, is an OData v2 error body.
struct MidtierResponder: HTTPResponder {
    typealias Context = MidtierRequestContext

    let ownRoutes: RouterResponder<MidtierRequestContext>
    let proxy: ProxyHandler
    let logger: Logger

    /// First path segments that belong to Midtier; destinations may not use these names.
    static let reservedSegments: Set<Substring> = ["odata", "config", "mobileservices", "healthz", "readyz", "metrics", "admin"]

    func respond(to request: Request, context: MidtierRequestContext) async throws -> Response {
        let path = request.uri.path
        let first = path.dropFirst().prefix { $0 != "/" }
        guard Self.reservedSegments.contains(first) else {
            return await proxy.handle(request, context: context)
        }
        do {
            return try await ownRoutes.respond(to: request, context: context)
        } catch let refusal as Refusal {
            return refusal.response
        } catch let error as HTTPError {
            return Refusal(error.status, code: error.status.code == 404 ? "NOT_FOUND" : "ERROR",
                           error.body ?? error.status.reasonPhrase).response
        } catch {
            logger.error("unexpected error", metadata: ["path": "\(path)", "error": "\(error)"])
            return Refusal(.internalServerError, code: "INTERNAL_ERROR", "an unexpected error occurred").response
        }
    }
}
