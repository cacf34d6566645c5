package import Hummingbird
package import Logging
import MidtierCore

/// The one translation of errors into answers on Midtier's own routes (docs/device-api.md,
/// "Refusals"): a ``Refusal`` renders itself; the router's own errors (no such path, a method a
/// route does not take, a body too large) become the OData v2 error body every refusal has;
/// anything else is logged and answered `500` without its detail. Router middlewares also wrap
/// the router's not-found responder, so this sees every error a router answers with.
package struct ODataErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    package init(logger: Logger) { self.logger = logger }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as StoreError {
            return Refusal.storeFailed(error, logger).response
        } catch {
            let refusal = Refusal(translating: error, path: request.uri.path)
            if refusal.status == .internalServerError {
                logger.error("unexpected error", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            }
            return refusal.response
        }
    }
}

extension Refusal {
    /// `error` as a refusal: itself when it is one; Hummingbird's `HTTPError` with the code its
    /// status has everywhere else; anything else a `500` that says nothing of its cause.
    package init(translating error: any Error, path: String) {
        switch error {
        case let refusal as Refusal:
            self = refusal
        case is StoreError:
            self = .storeUnavailable
        case let error as HTTPError:
            let code =
                switch error.status {
                case .notFound: "NOT_FOUND"
                case .methodNotAllowed: "METHOD_NOT_ALLOWED"
                case .contentTooLarge: "PAYLOAD_TOO_LARGE"
                default: error.status.code < 500 ? "BAD_REQUEST" : "ERROR"
                }
            let message = error.body ?? (error.status == .notFound ? "no such resource: \(path)" : error.status.reasonPhrase)
            self.init(error.status, code: code, message)
        default:
            self.init(.internalServerError, code: "INTERNAL_ERROR", "an unexpected error occurred")
        }
    }
}

extension Refusal: HTTPResponseError {
    /// A refusal thrown by a route answers itself, wherever it is caught.
    package func response(from request: Request, context: some RequestContext) throws -> Response { response }
}

extension StoreError: HTTPResponseError {
    /// A store that failed answers `503` (the request can be repeated), never its detail.
    package var status: HTTPResponse.Status { .serviceUnavailable }
    package func response(from request: Request, context: some RequestContext) throws -> Response { Refusal.storeUnavailable.response }
}
