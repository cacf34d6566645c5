package import Hummingbird

/// Answers `404` for a path under `prefix` spelt with an empty segment — a trailing slash
/// (`/admin/v1/registrations/`) or a double one — before the router reads it: the router drops
/// empty segments, so the trailing-slash spelling of one registration's path, with its id left
/// out, answered the whole list (docs/admin-api.yaml). Added before the routes it guards
/// (`Router.add(middleware:)` applies to the routes added after it); other paths go on. The
/// admin API and the push senders' API use it (docs/push.md, "Sending").
package struct EmptySegmentCheck<Context: RequestContext>: RouterMiddleware {
    let prefix: String
    let described: String

    /// `described` names the API in the error, e.g. "admin API".
    package init(under prefix: String, described: String) {
        self.prefix = prefix
        self.described = described
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        if path.hasPrefix(prefix), path.hasSuffix("/") || path.contains("//") {
            throw Refusal.notFound("no \(described) path has an empty segment (a trailing or a double slash)")
        }
        return try await next(request, context)
    }
}
