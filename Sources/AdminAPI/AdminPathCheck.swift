import Hummingbird
import MidtierHTTP

/// Answers `404` for an admin API path spelt with an empty segment — a trailing slash
/// (`/admin/v1/registrations/`) or a double one — before the router reads it: the router drops
/// empty segments, so the trailing-slash spelling of one registration's path, with its id left
/// out, answered the whole list (docs/admin-api.yaml). Added before the admin routes
/// (`Router.add(middleware:)` applies to the routes added after it); other paths go on.
struct AdminPathCheck<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        if path.hasPrefix("/admin/"), path.hasSuffix("/") || path.contains("//") {
            throw Refusal.notFound("no admin API path has an empty segment (a trailing or a double slash)")
        }
        return try await next(request, context)
    }
}
