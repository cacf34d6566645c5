import Hummingbird
import MidtierHTTP

/// Refuses admin API and console requests addressed to a host name other than `localhost` and
/// `adminURL`'s host (`421`); IP addresses are always taken. A page of another site whose name
/// was re-pointed at the admin listener (DNS rebinding) is same-origin to the browser, so
/// neither CORS nor `SameSite` would stop its scripts; its requests carry its own name in `Host`
/// (docs/operations.md, "Admin listener, reload, metrics"). Health and metrics are not checked:
/// probes and scrapers may use any name and change nothing.
package struct AdminHostCheck<Context: RequestContext>: RouterMiddleware {
    /// `adminURL`'s host, as configured now.
    let adminHost: @Sendable () -> String?

    package init(adminHost: @escaping @Sendable () -> String?) { self.adminHost = adminHost }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        if path.hasPrefix("/admin/") || path == "/console" || path.hasPrefix("/console/"),
           let authority = request.head.authority, let host = Self.host(of: authority), !Self.isAllowed(host, adminHost: adminHost()) {
            throw Refusal(.misdirectedRequest, code: "MISDIRECTED_REQUEST",
                          "this admin listener answers to its IP addresses, localhost and adminURL's host, not to \(host); set adminURL to reach it by that name")
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
        if parts.count == 4, parts.allSatisfy({ part in !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber) }) {
            return true
        }
        return adminHost.map { $0.lowercased() == name } ?? false
    }
}
