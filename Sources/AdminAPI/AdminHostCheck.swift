package import Hummingbird
import MidtierHTTP

/// Refuses every request on the admin listener addressed to a host name other than
/// `localhost` and `adminURL`'s host (`421`); IP addresses are always taken. A page of another
/// site whose name was re-pointed at the admin listener (DNS rebinding) is same-origin to the
/// browser, so neither CORS nor `SameSite` would stop its scripts; its requests carry its own
/// name in `Host` (docs/operations.md, "Admin listener, reload, metrics").
///
/// Only health and metrics at exactly their paths answer any name: probes and scrapers may use
/// any, and these change nothing. Every other path is checked as it arrives, so no spelling the
/// router reads as an admin or console path (`//admin/…`, `/admin//…`) gets past.
package struct AdminHostCheck<Context: RequestContext>: RouterMiddleware {
    /// `adminURL`'s host, as configured now.
    let adminHost: @Sendable () -> String?

    /// Whether `path` (as it arrived) is one that answers any host name.
    static func answersAnyHost(_ path: String) -> Bool {
        switch path {
        case "/healthz", "/readyz", "/metrics": true
        default: false
        }
    }

    package init(adminHost: @escaping @Sendable () -> String?) { self.adminHost = adminHost }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let authority = request.head.authority, !Self.answersAnyHost(request.uri.path) {
            guard let host = Self.host(of: authority), Self.isAllowed(host, adminHost: adminHost()) else {
                throw Refusal(
                    .misdirectedRequest, code: "MISDIRECTED_REQUEST",
                    "this admin listener answers to its IP addresses, localhost and adminURL's host, not to \(Self.host(of: authority) ?? "that Host"); set adminURL to reach it by that name"
                )
            }
        }
        return try await next(request, context)
    }

    /// The host of a `Host` value, without its port: `a.example:9090` → `a.example`,
    /// `[::1]:9090` → `[::1]`.
    static func host(of authority: String) -> String? {
        if authority.hasPrefix("[") {
            guard let end = authority.firstIndex(of: "]") else { return nil }
            return String(authority[...end])
        }
        return String(authority.prefix { $0 != ":" })
    }

    static func isAllowed(_ host: String, adminHost: String?) -> Bool {
        let name = host.lowercased().hasSuffix(".") ? String(host.lowercased().dropLast()) : host.lowercased()
        if name == "localhost" || name.hasPrefix("[") { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 4,
            parts.allSatisfy({ part in !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber) })
        {
            return true
        }
        return adminHost.map { $0.lowercased() == name } ?? false
    }
}
