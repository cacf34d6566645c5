import HTTPTypes
package import Hummingbird
import MidtierCore
package import MidtierHTTP
import RequestTracing

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
        let server = proxy.runtime.current.configuration.server
        let trustedCaller = server.trustedProxies.includes(context.clientIP)
        context.believeForwardedFor(request, trusting: server.trustedProxies)
        // A browser's request from another site changes nothing (docs/device-api.md).
        if let refusal = BrowserRequests.crossSiteRefusal(request, publicURL: server.publicURL) { return refusal.response }
        let segment = request.uri.path.dropFirst().prefix { $0 != "/" }
        guard proxy.tracer.isOn,
            let trace = proxy.tracer.start(
                "\(request.method.rawValue) /\(segment)", method: request.method.rawValue, route: "/\(segment)",
                propagation: request.propagationHeaders, trustedCaller: trustedCaller)
        else {
            return try await ownRoutes.respond(to: request, context: context)
        }
        // (Thrown errors become Hummingbird's answers: traced as the status they carry.)
        let outcome: Result<Response, any Error> = await trace.run {
            do { return .success(try await ownRoutes.respond(to: request, context: context)) } catch { return .failure(error) }
        }
        switch outcome {
        case .success(var response):
            trace.finish(status: response.status.code)
            response.headers[.traceresponse] = trace.traceresponse
            return response
        case .failure(let error):
            trace.finish(status: (error as? any HTTPResponseError)?.status.code ?? 500)
            throw error
        }
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
