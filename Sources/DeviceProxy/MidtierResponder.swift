import HTTPTypes
package import Hummingbird
import MidtierCore
package import MidtierHTTP
package import RequestTracing

/// The device listener's edge (docs/architecture.md, "The request path"): every request on
/// `listen` comes here, from Hummingbird's request loop or from ``ProxyChannelHandler``. The
/// configuration in force is read once, the client's address taken from a trusted proxy's
/// `X-Forwarded-For`, and the request traced; then Midtier's own routes (health, onboarding,
/// settings) go through a Hummingbird router and every other path, a destination call, to the
/// proxy.
package struct MidtierResponder: HTTPResponder {
    package typealias Context = MidtierRequestContext

    let ownRoutes: RouterResponder<MidtierRequestContext>
    let proxy: ProxyHandler
    let tracer: RequestTracer

    package init(ownRoutes: RouterResponder<MidtierRequestContext>, proxy: ProxyHandler, tracer: RequestTracer = .off) {
        self.ownRoutes = ownRoutes
        self.proxy = proxy
        self.tracer = tracer
    }

    package func respond(to request: Request, context: MidtierRequestContext) async throws -> Response {
        guard Self.isOwnRoute(request) else {
            return await respondToProxyCall(request, context: context)
        }
        let server = proxy.runtime.current.configuration.server
        let trustedCaller = server.trustedProxies.includes(context.clientIP)
        var context = context
        context.believeForwardedFor(request, trusting: server.trustedProxies)
        // A browser's request from another site changes nothing (docs/device-api.md).
        if let refusal = BrowserRequests.crossSiteRefusal(request, publicURL: server.publicURL) { return refusal.response }
        let segment = request.uri.path.dropFirst().prefix { $0 != "/" }
        guard let trace = startTrace(request, name: "\(request.method.rawValue) /\(segment)", route: "/\(segment)", trustedCaller: trustedCaller)
        else {
            return try await ownRoutes.respond(to: request, context: context)
        }
        // (Thrown errors become Hummingbird's answers: traced as the status they carry.)
        let outcome: Result<Response, any Error> = await trace.run {
            do { return .success(try await ownRoutes.respond(to: request, context: context)) } catch { return .failure(error) }
        }
        switch outcome {
        case .success(var response):
            Self.finish(trace, &response)
            return response
        case .failure(let error):
            trace.finish(status: (error as? any HTTPResponseError)?.status.code ?? 500)
            throw error
        }
    }

    /// A destination call, from Hummingbird's loop (a call with a body) or the channel
    /// pipeline (one without) alike: the request path with the configuration read once.
    package func respondToProxyCall(_ request: Request, context: MidtierRequestContext) async -> Response {
        let runtime = proxy.runtime.current
        let trustedProxies = runtime.configuration.server.trustedProxies
        let trustedCaller = trustedProxies.includes(context.clientIP)
        var context = context
        context.believeForwardedFor(request, trusting: trustedProxies)
        guard
            let trace = startTrace(
                request, name: request.method.rawValue + " /{destination}", route: "/{destination}/*", trustedCaller: trustedCaller)
        else {
            return await proxy.handle(request, context: context, runtime: runtime)
        }
        var response = await trace.run { await proxy.handle(request, context: context, runtime: runtime) }
        Self.finish(trace, &response)
        return response
    }

    /// The request's trace, continuing the device's (docs/operations.md, "Traces"); nil when
    /// tracing is off.
    @inline(__always)
    private func startTrace(_ request: Request, name: String, route: String, trustedCaller: Bool) -> RequestTrace? {
        guard tracer.isOn else { return nil }
        return tracer.start(
            name, method: request.method.rawValue, route: route, propagation: request.propagationHeaders, trustedCaller: trustedCaller)
    }

    /// Ends the trace with the answer's status, and names it in the answer (`traceresponse`).
    private static func finish(_ trace: RequestTrace, _ response: inout Response) {
        trace.finish(status: response.status.code)
        response.headers[.traceresponse] = trace.traceresponse
    }

    /// Whether `request` is for one of Midtier's own routes rather than a destination: its
    /// first path segment, exactly as sent, is a reserved name.
    static func isOwnRoute(_ request: Request) -> Bool {
        isOwnRoute(path: request.uri.path[...])
    }

    /// The same for a request's path (without its query).
    static func isOwnRoute(path: Substring) -> Bool {
        ReservedPathSegments.isOwnRoute(path.dropFirst().prefix { $0 != "/" })
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
