import HTTPTypes
package import Hummingbird
import MidtierCore
package import MidtierHTTP

/// The device-facing listener's responder: Midtier's own routes (health, onboarding, settings)
/// go through a Hummingbird router; every other path is a destination call for the proxy.
package struct MidtierResponder: HTTPResponder {
    package typealias Context = MidtierRequestContext

    let ownRoutes: RouterResponder<MidtierRequestContext>
    let proxy: ProxyHandler

    package init(ownRoutes: RouterResponder<MidtierRequestContext>, proxy: ProxyHandler) {
        self.ownRoutes = ownRoutes
        self.proxy = proxy
    }

    package func respond(to request: Request, context: MidtierRequestContext) async throws -> Response {
        guard Self.isOwnRoute(request) else {
            return await proxy.handle(request, context: context)
        }
        var context = context
        context.believeForwardedFor(request, trusting: proxy.runtime.current.configuration.server.trustedProxies)
        return try await ownRoutes.respond(to: request, context: context)
    }

    /// Whether `request` is for one of Midtier's own routes rather than a destination: its
    /// first path segment, exactly as sent, is a reserved name.
    static func isOwnRoute(_ request: Request) -> Bool {
        ReservedPathSegments.isOwnRoute(request.uri.path.dropFirst().prefix { $0 != "/" })
    }
}

extension MidtierRequestContext {
    /// Takes the client's address from `X-Forwarded-For` when the peer is a trusted proxy
    /// (docs/operations.md, "Behind a load balancer").
    mutating func believeForwardedFor(_ request: Request, trusting proxies: [AddressRange]) {
        guard !proxies.isEmpty else { return }
        clientIP = proxies.client(peer: clientIP, forwardedFor: request.headers[values: .xForwardedFor].map { $0[...] })
    }
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
}
