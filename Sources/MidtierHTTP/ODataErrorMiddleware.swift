import Hummingbird

/// Turns every error a router answers with — its own "not found" and "method not allowed",
/// a handler's `Refusal` or `HTTPError` — into an OData v2 error body (SPEC §4: every refusal
/// has one). Router middlewares also wrap the not-found responder, so this sees those too.
public struct ODataErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let refusal as Refusal {
            return refusal.response
        } catch let error as HTTPError {
            let code = switch error.status.code {
            case 404: "NOT_FOUND"
            case 405: "METHOD_NOT_ALLOWED"
            case 413: "PAYLOAD_TOO_LARGE"
            default: error.status.code < 500 ? "BAD_REQUEST" : "ERROR"
            }
            let message = error.body ?? (error.status.code == 404 ? "no such resource: \(request.uri.path)" : error.status.reasonPhrase)
            return Refusal(error.status, code: code, message).response
        }
    }
}
