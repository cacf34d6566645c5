import HTTPTypes
import Hummingbird
import MidtierHTTP

/// Answers `405` with `Allow` for a request to a path of the admin listener with a method that
/// path does not serve (RFC 9110), whatever the method (`TRACE`, `QUERY`, …), before the token
/// is looked at: the methods are no secret (docs/admin-api.yaml). Other paths go on (to `404`).
///
/// The router resolves a path and method that it serves before any middleware added after the
/// route (`Router.add(middleware:)` applies to later routes only), so this check, added last,
/// only sees what no route took.
struct AdminMethodCheck<Context: RequestContext>: RouterMiddleware {
    /// Each path as its segments (`{name}` matches any one), with the methods it serves.
    let paths: [(segments: [Substring], allow: String, methods: [HTTPRequest.Method])]

    init(served: [String: [HTTPRequest.Method]]) {
        paths = served.sorted { $0.key < $1.key }.map { path, methods in
            (path.split(separator: "/"), methods.map(\.rawValue).sorted().joined(separator: ", "), methods)
        }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // As the router reads a path: empty segments do not count.
        let segments = request.uri.path.split(separator: "/")
        if let path = paths.first(where: { Self.matches(segments, $0.segments) }), !path.methods.contains(request.method) {
            throw Refusal.methodNotAllowed("\(request.method.rawValue) is not a method of this path, which answers \(path.allow)", allow: path.allow)
        }
        return try await next(request, context)
    }

    static func matches(_ segments: [Substring], _ template: [Substring]) -> Bool {
        segments.count == template.count
            && zip(segments, template).allSatisfy { segment, pattern in
                (pattern.hasPrefix("{") && pattern.hasSuffix("}")) || segment.utf8.elementsEqual(pattern.utf8)
            }
    }
}
