package import BackendSessions
package import Callers
import DeviceAuthentication
package import Forwarding
import Foundation
package import HTTPTypes
package import Hummingbird
package import Logging
import MetadataPatching
import MidtierCore
package import MidtierHTTP
import MidtierJSON
package import MidtierMetrics
import MidtierStore
package import NIOSSL
package import PrincipalPropagation
package import Registrations
package import RequestTracing
package import TokenExchange

/// The destination proxy, `/{destinationName}/{path}` (docs/device-api.md, docs/forwarding.md):
/// the request path of Midtier, top to bottom (docs/architecture.md). Each step either refuses
/// with the status docs/device-api.md names or passes on.
package struct ProxyHandler: Sendable {
    let runtime: RuntimeHolder
    let callers: Callers
    let tokens: TokenCache
    /// Users' certificates for `PrincipalPropagation`, with the TLS context of `mutualTLS`.
    let certificates: UserCertificateCache<NIOSSLContext?>
    let forwarder: Forwarder
    let sessions: BackendSessions
    let metrics: MidtierMetrics
    let logger: Logger

    package init(
        runtime: RuntimeHolder, callers: Callers, tokens: TokenCache,
        certificates: UserCertificateCache<NIOSSLContext?>, forwarder: Forwarder,
        sessions: BackendSessions, metrics: MidtierMetrics, logger: Logger
    ) {
        self.certificates = certificates
        self.runtime = runtime
        self.callers = callers
        self.tokens = tokens
        self.forwarder = forwarder
        self.sessions = sessions
        self.metrics = metrics
        self.logger = logger
    }

    /// Answers one proxied call with the configuration `runtime` in force (read once, by
    /// ``MidtierResponder``, for the whole call), and counts it.
    package func handle(_ request: Request, context: MidtierRequestContext, runtime: Runtime) async -> Response {
        let start = ContinuousClock.now
        let response: Response
        do {
            response = try await proxy(request, context: context, runtime: runtime)
        } catch {
            response = error.response
        }
        // Only configured destination names become labels.
        let name = ProxyPath(rawPath: request.uri.path).map { String($0.destination) }
        let label = name.flatMap { runtime.configuration.destinations[$0] != nil ? $0 : nil }
        let duration = ContinuousClock.now - start
        metrics.recordRequest(destination: label, status: response.status.code, duration: duration)
        // The path without its query (which may hold `$filter` values); never headers.
        logger.debug(
            "proxied call",
            metadata: [
                "method": "\(request.method.rawValue)", "path": "\(request.uri.path)",
                "status": "\(response.status.code)",
                "microseconds": "\(duration.components.attoseconds / 1_000_000_000_000 + duration.components.seconds * 1_000_000)",
            ])
        return response
    }

    /// Methods never forwarded (any other is forwarded): TRACE and TRACK would have the back
    /// end echo the request, with the credential Midtier added; CONNECT asks for a tunnel.
    static let refusedMethods: Set<String> = ["TRACE", "TRACK", "CONNECT"]
    static let allowHeader = "GET, HEAD, POST, PUT, PATCH, MERGE, DELETE, OPTIONS"

    private func proxy(_ request: Request, context: MidtierRequestContext, runtime: Runtime) async throws(Refusal) -> Response {
        guard !Self.refusedMethods.contains(request.method.rawValue.uppercased()) else {
            throw .methodNotAllowed("the method \(request.method.rawValue) is not forwarded to back ends", allow: Self.allowHeader)
        }
        // A browser's request from another site changes nothing (docs/device-api.md).
        if let refusal = BrowserRequests.crossSiteRefusal(request, publicURL: runtime.configuration.server.publicURL) { throw refusal }

        // 1. HTTP hygiene the parser leaves to us: exactly one Host.
        guard request.head.authority != nil else { throw .badRequest("the request has no Host header") }
        guard request.headers[values: HTTPField.Name("Host")!].isEmpty else { throw .badRequest("the request has more than one Host header") }
        // Only `chunked` alone is a transfer coding Midtier forwards; anything else (`xchunked`,
        // `gzip, chunked`, …) is a framing a back end might read differently.
        let codings = request.headers[values: .transferEncoding]
        guard codings.isEmpty || (codings.count == 1 && codings[0].trimmingCharacters(in: .whitespaces).lowercased() == "chunked") else {
            throw .badRequest("the only Transfer-Encoding accepted is chunked")
        }

        // 2. The destination is the first path segment.
        guard let path = ProxyPath(rawPath: request.uri.path) else { throw .notFound("no destination in the path") }

        // 3. Who calls, and with which registration: the caller signs in before the
        //    registration id is looked at; the registration names the app, whose own sign-in
        //    must take the caller too (`Callers.admit`, docs/identity.md).
        // 4. Only the owner's registration, neither blocked, wiped nor locked, nor offline
        //    longer than the app's policy allows, lets the call through.
        let call = try await callers.admit(request, signIn: runtime.signIn, client: context.clientIP)
        let (app, user, registrationID) = (call.app, call.user, call.registration.id)

        // 5. The destination must exist and be one the app may use.
        let name = String(path.destination)
        guard app.destinations.contains(name), let upstream = runtime.upstreams[name] else {
            throw .notFound("destination \(name) is not available to app \(app.id)")
        }

        let destination = upstream.configuration
        RequestTrace.requestSpan.set("midtier.destination", name)

        // 6. Nothing that could leave the destination's base path.
        if let problem = ProxyPath.problem(in: path.remainder) { throw .badRequest(problem) }

        // 7. The back-end credential, in the user's own name for the user-propagating types: a
        //    token is keyed by what it was issued for (destination, realm-qualified user, NameID),
        //    a certificate by destination, user and subject (docs/identity.md).
        var tokenKey: TokenCacheKey?
        var exchange: TokenCache.Exchange?
        var authorization: String?
        var credentialHeaders: [(name: String, value: String)] = []
        var clientTLS: NIOSSLContext?
        switch destination.authentication {
        case .noAuthentication, .clientCertificate:
            break
        case .principalPropagation(let settings):
            let entry = try await RequestTrace.span("user certificate") { _ throws(Refusal) in
                try userCertificate(for: user, destination: upstream, settings: settings, runtime: runtime)
            }
            switch settings.mode {
            case .header: credentialHeaders = [(Self.clientCertificateHeader, entry.certificate.headerValue)]
            case .mutualTLS: clientTLS = entry.extra
            }
        case .basic:
            authorization = runtime.basicAuthorizations[name]
        case .userBasic:
            authorization = try userBasicAuthorization(request, user: user, app: app, destination: upstream, runtime: runtime)
        case .samlBearer:
            guard let saml = runtime.exchanges[name] else { throw .badGateway("destination \(name) has no token exchange") }
            guard let nameID = runtime.backendUser(user, destination: destination) else {
                throw .forbidden("user \(user.id) has no \(destination.userIdSource ?? "id") for destination \(name)")
            }
            tokenKey = TokenCacheKey(destination: name, user: user.identity, nameID: nameID)
            exchange = exchangeFunction { forceNew throws(TokenExchangeError) in
                try await saml.exchange(nameID: nameID, attributes: user.attributes, newToken: forceNew)
            }
        case .oauth2(let settings):
            guard let oauth = runtime.oauth2Exchanges[name] else { throw .badGateway("destination \(name) has no token exchange") }
            if settings.grant == .clientCredentials {
                // One technical token for the destination, whoever calls.
                tokenKey = TokenCacheKey(destination: name, user: Self.destinationItself, nameID: "")
                exchange = exchangeFunction { _ throws(TokenExchangeError) in try await oauth.exchange(userToken: nil) }
            } else {
                // The user's own identity-provider token, which Midtier has just verified.
                guard !user.identity.isLocal, let bearer = request.headers[.authorization], bearer.prefix(7).lowercased() == "bearer " else {
                    throw .forbidden("destination \(name) exchanges the user's identity-provider token; sign in through the identity provider")
                }
                let userToken = String(bearer.dropFirst(7)).trimmingCharacters(in: .whitespaces)
                tokenKey = TokenCacheKey(destination: name, user: user.identity, nameID: "")
                exchange = exchangeFunction { _ throws(TokenExchangeError) in try await oauth.exchange(userToken: userToken) }
            }
        }
        var token: AccessToken?
        if let tokenKey, let exchange {
            let (cached, outcome) = try await RequestTrace.span("token") { span throws(Refusal) in
                let found = try await mapExchangeErrors { () async throws -> (AccessToken, TokenCache.Outcome) in
                    try await tokens.token(for: tokenKey, exchange: exchange)
                }
                span.set("midtier.token.cache", found.1 == .hit ? "hit" : found.1 == .miss ? "miss" : "wait")
                return found
            }
            metrics.recordTokenLookup(outcome == .hit ? .hit : outcome == .miss ? .miss : .wait)
            logger.debug("token lookup", metadata: ["destination": "\(name)", "user": "\(user.identity)", "outcome": "\(outcome)"])
            token = cached
            authorization = "Bearer " + cached.value
        }

        // 8. Forward; if the back end rejects a cached token, renew it once and retry once.
        let session = await sessions.begin(
            registration: registrationID, destination: name, path: upstream.path(remainder: path.remainder),
            modifying: ![.get, .head, .options].contains(request.method))
        var forwarding = ForwardingContext(
            clientAddress: context.clientIP, publicScheme: runtime.publicScheme,
            publicHost: runtime.publicHost, authorization: authorization,
            backendCookies: session.cookieHeader)
        forwarding.credentialHeaders = credentialHeaders
        forwarding.clientTLS = clientTLS
        var answer = try await forward(request, to: upstream, remainder: path.remainder, context: forwarding)
        if answer.status == 401, let rejected = token, let tokenKey, let exchange, Forwarder.isReplayable(request.headers) {
            // (An unread streamed body closes its connection when dropped.)
            logger.info("back end rejected a cached token; renewing once", metadata: ["destination": "\(name)", "user": "\(user.identity)"])
            let renewed = try await RequestTrace.span("token renewal") { _ throws(Refusal) in
                try await mapExchangeErrors { () async throws -> AccessToken in
                    try await tokens.renew(for: tokenKey, rejected: rejected, exchange: exchange)
                }
            }
            forwarding.authorization = "Bearer " + renewed.value
            answer = try await forward(request, to: upstream, remainder: path.remainder, context: forwarding)
        }
        await sessions.finish(session, setCookies: answer.setCookies)
        logger.debug(
            "back end answered",
            metadata: [
                "destination": "\(name)", "user": "\(user.identity)", "status": "\(answer.status)",
                "keptCookies": "\(answer.setCookies.count)",
            ])

        // 9. The answer: `$metadata` patched where configured, the back end's URLs rewritten.
        if !destination.metadataPatches.isEmpty, answer.status == 200,
            path.remainder.hasSuffix("/$metadata") || path.remainder.lowercased().hasSuffix("/%24metadata")
        {
            return try await patchedMetadata(answer, destination: destination)
        }
        return await RequestTrace.span("answer") { span in
            span.set("midtier.rewrite", upstream.rewriter == nil ? "none" : "urls")
            let (head, body) = answer.deviceAnswer()
            switch body {
            case .whole(let buffer): return Response(status: head.status, headers: head.headerFields, body: ResponseBody(byteBuffer: buffer))
            case .stream(let stream): return Response(status: head.status, headers: head.headerFields, body: ResponseBody(asyncSequence: stream))
            }
        }
    }

    /// `UserBasicAuthentication`: the caller's own Basic credentials, only for a user the app's
    /// back end checked (`backend` authentication) and only to that same system (scheme, host
    /// and port of the checking destination): a password never reaches another server than
    /// the one that accepted it (docs/forwarding.md).
    private func userBasicAuthorization(
        _ request: Request, user: AuthenticatedUser, app: AppConfiguration,
        destination: UpstreamDestination, runtime: Runtime
    ) throws(Refusal) -> String {
        guard case .backend(let signIn) = app.authentication, UserIdentity.sameBytes(user.identity.realm, signIn.realm),
            let checking = runtime.upstreams[signIn.destination]?.origin, let target = destination.origin,
            checking.tls == target.tls, checking.port == target.port, checking.host.lowercased() == target.host.lowercased(),
            let authorization = request.headers[.authorization], authorization.prefix(6).lowercased() == "basic "
        else {
            throw .forbidden(
                "destination \(destination.name) forwards the user's own credentials only for users its back end signed in "
                    + "(an app with backend authentication on the same system)")
        }
        return authorization
    }

    /// SAP's name for the header that carries the user's certificate from a trusted proxy
    /// (SAP Cloud Connector, Web Dispatcher) to the ICM: base64 DER on one line.
    static let clientCertificateHeader = "SSL_CLIENT_CERT"

    /// The user's certificate for a `PrincipalPropagation` destination, from the cache or newly
    /// issued: its subject from `subjectPattern` over the user (docs/forwarding.md).
    private func userCertificate(
        for user: AuthenticatedUser, destination upstream: UpstreamDestination,
        settings: PrincipalPropagationSettings,
        runtime: Runtime
    ) throws(Refusal) -> UserCertificateCache<NIOSSLContext?>.Entry {
        let destination = upstream.configuration
        guard let authority = runtime.userCertificateAuthorities[destination.name] else {
            throw .badGateway("destination \(destination.name) has no certificate authority")
        }
        let subject: [(type: SubjectPattern.AttributeType, value: String)]
        do {
            subject = try settings.subjectPattern.fill(userID: user.id, attributes: user.attributes, userIdSource: destination.userIdSource)
        } catch {
            throw .forbidden("user \(user.id) cannot be named for destination \(destination.name): \(error.message)")
        }
        let key = UserCertificateKey(
            destination: destination.name, user: user.identity,
            subject: subject.map { $0.type.rawValue + "=" + $0.value }.joined(separator: "\u{1F}"))
        do {
            return try certificates.entry(for: key) { () throws(UserCertificateError) in
                let issued = try authority.issue(subject: subject)
                var context: NIOSSLContext?
                if settings.mode == .mutualTLS {
                    do {
                        context = try upstream.userTLS(
                            certificateDER: issued.certificateDER, issuerDER: issued.caCertificateDER,
                            keyDER: issued.keyDER)
                    } catch {
                        throw UserCertificateError("the TLS context could not be made: \(error)")
                    }
                }
                logger.info(
                    "user certificate issued",
                    metadata: [
                        "destination": "\(destination.name)", "user": "\(user.identity)",
                        "subject": "\(issued.subject)",
                    ])
                return (issued, context, settings.validityMinutes * 60)
            }
        } catch {
            logger.error(
                "user certificate failed",
                metadata: [
                    "destination": "\(destination.name)", "user": "\(user.identity)",
                    "error": "\(error.message)",
                ])
            throw .badGateway("Midtier could not make the user's certificate for destination \(destination.name)")
        }
    }

    private func patchedMetadata(_ upstream: UpstreamResponse, destination: DestinationConfiguration) async throws(Refusal) -> Response {
        let document: [UInt8]
        do {
            document = try await upstream.collect(upTo: 64 << 20)
        } catch {
            throw .badGateway("the $metadata of destination \(destination.name) could not be read")
        }
        let patches = destination.metadataPatches
        do {
            let result = try MetadataPatcher.apply(patches, to: upstream.redaction.redact(document) ?? document)
            for patch in result.unmatched {
                logger.warning(
                    "metadata patch matched nothing",
                    metadata: [
                        "destination": "\(destination.name)",
                        "entityType": "\(patch.entityType)", "property": "\(patch.property)",
                    ])
            }
            for unfitting in result.unfittingScales {
                logger.warning(
                    "metadata patch leaves a Scale without a fitting Precision",
                    metadata: [
                        "destination": "\(destination.name)", "entityType": "\(unfitting.entityType)", "property": "\(unfitting.property)",
                        "scale": "\(unfitting.scale)", "precision": "\(unfitting.precision.map(String.init) ?? "none")",
                    ])
            }
            var headers = upstream.headers
            headers[.contentLength] = String(result.document.count)
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: result.document)))
        } catch {
            throw .badGateway("the $metadata of destination \(destination.name) could not be patched: \(error.description)")
        }
    }

    /// The back-end call, in a client span whose `traceparent` the back end receives.
    private func forward(
        _ request: Request, to destination: UpstreamDestination, remainder: Substring,
        context: ForwardingContext
    ) async throws(Refusal) -> UpstreamResponse {
        try await RequestTrace.span("backend call", kind: .client) { span throws(Refusal) in
            if let origin = destination.origin {
                span.set("server.address", origin.host)
                span.set("server.port", origin.port)
            }
            var context = context
            context.propagation = RequestTrace.propagationHeaders()
            let answer = try await forwardUntraced(request, to: destination, remainder: remainder, context: context)
            span.set("http.response.status_code", answer.status)
            if let bytes = answer.wholeBodyBytes { span.set("http.response.body.size", bytes) }
            if answer.status >= 500 { span.fail() }
            return answer
        }
    }

    private func forwardUntraced(
        _ request: Request, to destination: UpstreamDestination, remainder: Substring,
        context: ForwardingContext
    ) async throws(Refusal) -> UpstreamResponse {
        do {
            return try await forwarder.forward(
                request.head, body: request.body, to: destination, remainder: remainder, context: context, logger: logger)
        } catch {
            switch error {
            case .badRequest(let reason): throw .badRequest(reason)
            case .bodyTooLarge(let limit):
                throw Refusal(.contentTooLarge, code: "PAYLOAD_TOO_LARGE", "the request body is larger than \(limit) bytes")
            case .unreachable(let reason): throw .badGateway(reason)
            case .timedOut(let milliseconds): throw .gatewayTimeout("destination \(destination.name) did not answer within \(milliseconds) ms")
            }
        }
    }

    /// The key under which `OAuth2ClientCredentials` tokens are kept: no user's (a user is
    /// never in this realm, which is not an issuer URL), one per destination.
    static let destinationItself = UserIdentity(realm: "midtier:destination", id: "")

    /// An exchange for the token cache, with its metrics, log lines and client span.
    private func exchangeFunction(
        _ exchange: @escaping @Sendable (_ forceNew: Bool) async throws(TokenExchangeError) -> AccessToken
    ) -> TokenCache.Exchange {
        let logger = self.logger
        let metrics = self.metrics
        return { key, forceNew in
            logger.debug(
                "exchanging a token",
                metadata: [
                    "destination": "\(key.destination)", "user": "\(key.user)", "nameID": "\(key.nameID)",
                    "newToken": "\(forceNew)",
                ])
            do {
                let token = try await RequestTrace.span("token exchange", kind: .client) { span in
                    span.set("midtier.destination", key.destination.value)
                    return try await exchange(forceNew)
                }
                metrics.recordExchange(destination: key.destination.value, succeeded: true)
                logger.info("token exchanged", metadata: ["destination": "\(key.destination)", "user": "\(key.user)", "newToken": "\(forceNew)"])
                return token
            } catch {
                metrics.recordExchange(destination: key.destination.value, succeeded: false)
                logger.warning("token exchange failed", metadata: ["destination": "\(key.destination)", "user": "\(key.user)", "error": "\(error)"])
                throw error
            }
        }
    }

    /// A failed exchange as the device sees it: what failed in plain words (the detail was
    /// logged by `exchangeFunction`).
    private func mapExchangeErrors<T>(_ body: () async throws -> T) async throws(Refusal) -> T {
        do {
            return try await body()
        } catch let error as TokenExchangeError {
            switch error {
            case .timedOut: throw .gatewayTimeout(error.deviceMessage)
            default: throw .badGateway(error.deviceMessage)
            }
        } catch {
            logger.warning("token exchange failed", metadata: ["error": "\(error)"])
            throw .badGateway("the token exchange failed")
        }
    }
}
