package import AsyncHTTPClient
package import DeviceAuthentication
package import Forwarding
import Foundation
import HTTPTypes
package import Hummingbird
package import Logging
package import MidtierCore
package import MidtierHTTP
package import PrincipalPropagation
package import SAMLSigning
import Synchronization
package import TokenExchange

/// Everything derived from one loaded configuration: the configuration itself, one token
/// exchange per SAML destination (keys loaded once), and the device authenticator. Built
/// whole and swapped whole, so a request sees one consistent configuration from start to end.
package final class Runtime: Sendable {
    package let configuration: MidtierConfiguration
    /// SAML bearer exchanges by destination name.
    package let exchanges: [String: SAMLBearerExchange]
    /// The token services of `OAuth2*` destinations, by destination name.
    package let oauth2Exchanges: [String: OAuth2Exchange]
    /// The CAs of `PrincipalPropagation` destinations, by destination name (keys loaded once).
    package let userCertificateAuthorities: [String: UserCertificateAuthority]
    /// `Authorization` values for `BasicAuthentication` destinations, by destination name.
    let basicAuthorizations: [String: String]
    package let basicAuthenticator: BasicAuthenticator
    /// Back-end senders of push notifications (`config/push-senders.json`), HTTP Basic with
    /// the same bcrypt queue, throttle and verified-credential memory as devices.
    package let pushSenderAuthenticator: BasicAuthenticator
    /// Where and how to forward, by destination name (with its URL rewriter).
    let upstreams: [String: UpstreamDestination]
    /// Basic authenticators by app id, for the apps whose authentication is `backend`: the
    /// back end checks.
    package let backendAuthenticators: [String: BasicAuthenticator]
    /// Bearer JWT authenticators by app id, for the apps whose authentication is `jwt`.
    package let jwtAuthenticators: [String: JWTAuthenticator]
    /// `publicURL` split for `X-Forwarded-Proto` / `-Host`.
    let publicScheme: String
    let publicHost: String

    /// - Parameters:
    ///   - throttle, limiter: the failed sign-in throttle and the verification queue; they
    ///     belong to the server and outlive a reload.
    package init(
        configuration: MidtierConfiguration, httpClient: HTTPClient, upstreams: UpstreamConnectionPool? = nil,
        throttle: SignInThrottle = SignInThrottle(), limiter: VerificationLimiter = VerificationLimiter(),
        logger: Logger = Logger(label: "midtier")
    ) throws(SigningError) {
        self.configuration = configuration
        var exchanges: [String: SAMLBearerExchange] = [:]
        var basic: [String: String] = [:]
        var authorities: [String: UserCertificateAuthority] = [:]
        var oauth2: [String: OAuth2Exchange] = [:]
        for (name, destination) in configuration.destinations {
            switch destination.authentication {
            case .samlBearer(let settings):
                exchanges[name] = try SAMLBearerExchange(
                    settings: settings, httpClient: httpClient,
                    timeoutMilliseconds: destination.timeoutMilliseconds)
            case .basic(let user, let password):
                basic[name] = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            case .principalPropagation(let settings):
                do {
                    authorities[name] = try UserCertificateAuthority(settings)
                } catch {
                    throw SigningError(.invalidCertificate, "the principal propagation CA of destination \(name): \(error.message)")
                }
            case .oauth2(let settings):
                oauth2[name] = OAuth2Exchange(settings: settings, httpClient: httpClient, timeoutMilliseconds: destination.timeoutMilliseconds)
            case .noAuthentication, .clientCertificate, .userBasic:
                break
            }
        }
        self.oauth2Exchanges = oauth2
        self.userCertificateAuthorities = authorities
        self.exchanges = exchanges
        self.basicAuthorizations = basic
        self.upstreams = configuration.destinations.mapValues { UpstreamDestination($0, publicURL: configuration.server.publicURL) }
        self.basicAuthenticator = BasicAuthenticator(
            users: configuration.users,
            cacheSeconds: configuration.server.credentialCacheSeconds,
            throttle: throttle, limiter: limiter)
        // Keyed by position: the names are unique by their bytes, which a String key is not.
        let senders = configuration.pushSenders.enumerated().map {
            (String($0.offset), LocalUser(id: $0.element.name, passwordHash: $0.element.passwordHash))
        }
        self.pushSenderAuthenticator = BasicAuthenticator(
            users: Dictionary(uniqueKeysWithValues: senders),
            cacheSeconds: configuration.server.credentialCacheSeconds,
            throttle: throttle, limiter: limiter)
        var jwt: [String: JWTAuthenticator] = [:]
        for (id, app) in configuration.apps {
            guard case .jwt(let settings) = app.authentication else { continue }
            jwt[id] = JWTAuthenticator(
                settings: settings, httpClient: httpClient,
                log: { level, message in
                    let metadata: Logger.Metadata = ["app": "\(id)"]
                    switch level {
                    case .info: logger.info("\(message)", metadata: metadata)
                    case .warning: logger.warning("\(message)", metadata: metadata)
                    case .error: logger.error("\(message)", metadata: metadata)
                    }
                })
        }
        self.jwtAuthenticators = jwt
        var backend: [String: BasicAuthenticator] = [:]
        let upstreamDestinations = self.upstreams
        for (id, app) in configuration.apps {
            guard case .backend(let signIn) = app.authentication else { continue }
            let check: BasicAuthenticator.RemoteCheck
            if let upstreams, let destination = upstreamDestinations[signIn.destination] {
                let forwarder = Forwarder(upstreams: upstreams, maxRequestBodyBytes: 0)
                check = { user, password in
                    let authorization = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
                    do {
                        let status = try await forwarder.status(ofGetting: signIn.path, at: destination, authorization: authorization)
                        switch status {
                        case 200..<300: return .accepted
                        case 401, 403: return .refused
                        default:
                            logger.warning("sign-in check answered neither yes nor no", metadata: ["app": "\(id)", "status": "\(status)"])
                            return .unavailable("HTTP \(status)")
                        }
                    } catch {
                        logger.warning("sign-in check failed", metadata: ["app": "\(id)", "error": "\(error)"])
                        return .unavailable("\(error)")
                    }
                }
            } else {
                check = { _, _ in .unavailable("no connection pool") }
            }
            backend[id] = BasicAuthenticator(
                remote: .init(realm: signIn.realm, check: check),
                cacheSeconds: configuration.server.credentialCacheSeconds, throttle: throttle)
        }
        self.backendAuthenticators = backend
        let publicURL = configuration.server.publicURL
        if let schemeEnd = publicURL.range(of: "://") {
            publicScheme = String(publicURL[..<schemeEnd.lowerBound])
            publicHost = String(publicURL[schemeEnd.upperBound...].prefix { $0 != "/" })
        } else {
            publicScheme = "http"
            publicHost = publicURL
        }
    }

    /// Authenticates a device of `app` (docs/identity.md): Basic against `users.json` for a
    /// basic app, a bearer JWT of the app's issuer and audience for a jwt app.
    package func authenticate(_ request: Request, app: AppConfiguration, client: String?) async throws(Refusal) -> AuthenticatedUser {
        switch app.authentication {
        case .basic:
            switch await basicAuthenticator.authenticate(authorization: request.headers[.authorization], client: client) {
            case .success(let user): return user
            case .failure(let failure): throw Self.refusal(failure)
            }
        case .backend:
            guard let authenticator = backendAuthenticators[app.id] else { throw Refusal.unauthorized("the app has no sign-in check") }
            switch await authenticator.authenticate(authorization: request.headers[.authorization], client: client) {
            case .success(let user): return user
            case .failure(let failure): throw Self.refusal(failure)
            }
        case .jwt:
            guard let authenticator = jwtAuthenticators[app.id] else { throw Refusal.bearerUnauthorized("the app has no token verifier") }
            switch await authenticator.authenticate(authorization: request.headers[.authorization]) {
            case .success(let user): return user
            case .failure(let failure): throw Refusal.bearerUnauthorized(failure.description)
            }
        }
    }

    /// Authenticates a caller without knowing the app (self-service, and the answer to a call
    /// whose registration does not let it in): Basic against `users.json`; a bearer JWT against
    /// the jwt apps of the issuer it claims (its signature, audience and the rest checked by
    /// them). The refusal depends on the request alone — its credentials and `X-SMP-APPID` —,
    /// never on whether a registration id exists.
    package func authenticateInAnyRealm(_ request: Request, client: String?) async throws(Refusal) -> AuthenticatedUser {
        let authorization = request.headers[.authorization]
        guard let authorization, !authorization.isEmpty else {
            throw Refusal(
                .unauthorized, code: "UNAUTHORIZED", AuthenticationFailure.missingCredentials.description,
                challenge: challenge(for: request))
        }
        guard authorization.prefix(7).lowercased() == "bearer " else {
            // A `backend` app's users are checked by its back end, which the app is named for
            // (`X-SMP-APPID`, which SAP's SDKs send on every call): a password never goes to
            // another back end than the app's.
            let named = request.headers[HTTPField.Name("X-SMP-APPID")!].flatMap { id in
                backendAuthenticators.first { UserIdentity.sameBytes($0.key, id) }?.value
            }
            switch await (named ?? basicAuthenticator).authenticate(authorization: authorization, client: client) {
            case .success(let user): return user
            case .failure(let failure): throw Self.refusal(failure)
            }
        }
        return try await authenticateBearer(authorization)
    }

    /// A bearer JWT (`Bearer <token>`), checked by the jwt apps of the issuer it claims.
    package func authenticateBearer(_ authorization: String) async throws(Refusal) -> AuthenticatedUser {
        let issuer = JWTAuthenticator.claimedIssuer(authorization: authorization)
        let candidates = jwtAuthenticators.sorted { $0.key < $1.key }.map(\.value)
            .filter { authenticator in issuer.map { authenticator.settings.issuer.utf8.elementsEqual($0.utf8) } ?? false }
        var firstFailure: JWTAuthenticationFailure?
        for authenticator in candidates {
            switch await authenticator.authenticate(authorization: authorization) {
            case .success(let user): return user
            case .failure(let failure): firstFailure = firstFailure ?? failure
            }
        }
        throw Refusal.bearerUnauthorized(firstFailure?.description ?? "the token is not from an identity provider that Midtier accepts")
    }

    /// The challenge for a request that sent no credentials: the one of the app `X-SMP-APPID`
    /// names, else both schemes Midtier accepts.
    package func challenge(for request: Request) -> String {
        if let appID = request.headers[HTTPField.Name("X-SMP-APPID")!], let app = configuration.apps[appID] {
            if case .jwt = app.authentication { return Refusal.bearerChallenge }
            return Refusal.basicChallenge
        }
        return jwtAuthenticators.isEmpty ? Refusal.basicChallenge : Refusal.basicChallenge + ", " + Refusal.bearerChallenge
    }

    /// The refusal for a failed Basic sign-in: 401, or 429/503 with `Retry-After`.
    package static func refusal(_ failure: AuthenticationFailure) -> Refusal {
        switch failure {
        case .throttled(let seconds): .tooManySignIns(failure.description, retryAfter: seconds)
        case .busy(let seconds): .signInBusy(failure.description, retryAfter: seconds)
        case .checkerUnavailable: .signInBusy(failure.description, retryAfter: 5)
        default: .unauthorized(failure.description)
        }
    }

    /// The back-end user name for `user` at `destination`: the `userIdSource` attribute, or the
    /// user id when none is set.
    package func backendUser(_ user: AuthenticatedUser, destination: DestinationConfiguration) -> String? {
        guard let source = destination.userIdSource else { return user.id }
        return user.attributes[source]
    }
}

/// The runtime in force; replaced whole on reload.
package final class RuntimeHolder: Sendable {
    private let state: Mutex<Runtime>
    package init(_ runtime: Runtime) { state = Mutex(runtime) }
    package var current: Runtime { state.withLock { $0 } }
    package func replace(with runtime: Runtime) { state.withLock { $0 = runtime } }
}
