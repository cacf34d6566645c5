package import AsyncHTTPClient
package import DeviceAuthentication
import Foundation
import HTTPTypes
package import Hummingbird
package import Logging
package import MidtierCore
package import MidtierHTTP

/// How the callers of one loaded configuration sign in (docs/identity.md): devices of each app
/// by the app's method (Basic against `users.json`, a back end's check, a bearer JWT), and
/// back-end push senders (`config/push-senders.json`). Built whole with the rest of a
/// configuration and swapped whole on reload, so one request sees one configuration.
package final class CallerSignIn: Sendable {
    package let configuration: MidtierConfiguration
    package let basicAuthenticator: BasicAuthenticator
    /// Back-end senders of push notifications (`config/push-senders.json`), HTTP Basic with
    /// the same bcrypt queue, throttle and verified-credential memory as devices.
    package let pushSenderAuthenticator: BasicAuthenticator
    /// Back-end senders' API keys (`X-API-Key`).
    package let pushSenderKeys: APIKeys
    /// Back-end senders' OAuth access tokens: one verifier per issuer, audience, key set and
    /// client claim the senders name, shared by the senders that name the same.
    let pushSenderTokens: [JWTAuthenticator]
    /// Basic authenticators by app id, for the apps whose authentication is `backend`: the
    /// back end checks.
    package let backendAuthenticators: [String: BasicAuthenticator]
    /// Bearer JWT authenticators by app id, for the apps whose authentication is `jwt`.
    package let jwtAuthenticators: [String: JWTAuthenticator]

    /// The check a `backend` app's sign-in makes at its back end: the app id and its settings
    /// give the function that asks the back end about one user and password.
    package typealias BackendCheck = @Sendable (_ app: String, _ signIn: BackendSignIn) -> BasicAuthenticator.RemoteCheck

    /// - Parameters:
    ///   - throttle, limiter: the failed sign-in throttle and the verification queue; they
    ///     belong to the server and outlive a reload.
    ///   - backendCheck: how a `backend` app's users are checked (the proxy's forwarder asks
    ///     the app's destination).
    package init(
        configuration: MidtierConfiguration, httpClient: HTTPClient,
        throttle: SignInThrottle = SignInThrottle(), limiter: VerificationLimiter = VerificationLimiter(),
        backendCheck: BackendCheck = { _, _ in { _, _ in .unavailable("no connection pool") } },
        logger: Logger = Logger(label: "midtier")
    ) {
        self.configuration = configuration
        let cacheSeconds = configuration.server.credentialCacheSeconds
        self.basicAuthenticator = BasicAuthenticator(
            users: configuration.users, cacheSeconds: cacheSeconds, throttle: throttle, limiter: limiter)
        // Keyed by position: the names are unique by their bytes, which a String key is not.
        let senders = configuration.pushSenders.enumerated().compactMap { sender in
            sender.element.passwordHash.map { (String(sender.offset), LocalUser(id: sender.element.name, passwordHash: $0)) }
        }
        self.pushSenderKeys = APIKeys(senders: configuration.pushSenders)
        self.pushSenderAuthenticator = BasicAuthenticator(
            users: Dictionary(uniqueKeysWithValues: senders), cacheSeconds: cacheSeconds, throttle: throttle, limiter: limiter)
        var tokenSettings: [JWTAuthentication] = []
        for sender in configuration.pushSenders {
            if let oauth = sender.oauth, !tokenSettings.contains(where: { $0.hasSameBytes(as: oauth.token) }) {
                tokenSettings.append(oauth.token)
            }
        }
        self.pushSenderTokens = tokenSettings.map { settings in
            JWTAuthenticator(
                settings: settings, httpClient: httpClient, cacheSeconds: cacheSeconds,
                log: Self.keySetLog(logger, ["push_sender_issuer": "\(settings.issuer)"]))
        }
        var jwt: [String: JWTAuthenticator] = [:]
        var backend: [String: BasicAuthenticator] = [:]
        for (id, app) in configuration.apps {
            switch app.authentication {
            case .basic:
                continue
            case .jwt(let settings):
                jwt[id] = JWTAuthenticator(settings: settings, httpClient: httpClient, log: Self.keySetLog(logger, ["app": "\(id)"]))
            case .backend(let signIn):
                backend[id] = BasicAuthenticator(
                    remote: .init(realm: signIn.realm, check: backendCheck(id, signIn)), cacheSeconds: cacheSeconds, throttle: throttle)
            }
        }
        self.jwtAuthenticators = jwt
        self.backendAuthenticators = backend
    }

    /// Where a token verifier's key-set loads and problems go: the server's log, with
    /// `metadata` naming whose keys they are (never a token).
    static func keySetLog(_ logger: Logger, _ metadata: Logger.Metadata) -> @Sendable (JWKSLogLevel, String) -> Void {
        { level, message in
            switch level {
            case .info: logger.info("\(message)", metadata: metadata)
            case .warning: logger.warning("\(message)", metadata: metadata)
            case .error: logger.error("\(message)", metadata: metadata)
            }
        }
    }

    /// Authenticates a device of `app` (docs/identity.md): Basic against `users.json` for a
    /// basic app, the back end's answer for a backend app, a bearer JWT of the app's issuer and
    /// audience for a jwt app.
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
            let named = request.headers[RegistrationHeaders.app].flatMap { id in
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
        if let appID = request.headers[RegistrationHeaders.app], let app = configuration.apps[appID] {
            if case .jwt = app.authentication { return Refusal.bearerChallenge }
            return Refusal.basicChallenge
        }
        return jwtAuthenticators.isEmpty ? Refusal.basicChallenge : Refusal.basicChallenge + ", " + Refusal.bearerChallenge
    }

    /// The challenge a push sender is refused with (docs/push.md, "Sending").
    package static let pushSenderChallenge = "Basic realm=\"midtier push\", charset=\"UTF-8\""

    /// The header that carries a sender's API key, as SAP's Java library sends it.
    package static let apiKeyHeader = HTTPField.Name("X-API-Key")!

    /// A back-end sender of push notifications, by HTTP Basic, by its API key (`X-API-Key`) or
    /// by an OAuth access token (`Bearer`), against `config/push-senders.json` (docs/push.md,
    /// "Sending").
    package func authenticatePushSender(_ request: Request, client: String?) async throws(Refusal) -> PushSender {
        let keys = request.headers[values: Self.apiKeyHeader]
        if !keys.isEmpty {
            guard keys.count == 1, request.headers[.authorization] == nil else {
                throw .badRequest("a sender signs in with one credential: Authorization or one X-API-Key header, not both or several")
            }
            guard let index = pushSenderKeys.sender(withKey: keys[0]), configuration.pushSenders.indices.contains(index) else {
                throw Refusal(.unauthorized, code: "UNAUTHORIZED", "the X-API-Key is not a sender's", challenge: Self.pushSenderChallenge)
            }
            return configuration.pushSenders[index]
        }
        if let authorization = request.headers[.authorization], authorization.prefix(7).lowercased() == "bearer " {
            return try await authenticatePushSenderToken(authorization)
        }
        switch await pushSenderAuthenticator.authenticate(authorization: request.headers[.authorization], client: client) {
        case .success(let user):
            guard let sender = configuration.pushSender(named: user.identity.id) else {
                throw Refusal(.unauthorized, code: "UNAUTHORIZED", "unknown sender", challenge: Self.pushSenderChallenge)
            }
            return sender
        case .failure(let failure):
            var refusal = Self.refusal(failure)
            if refusal.challenge != nil { refusal.challenge = Self.pushSenderChallenge }
            throw refusal
        }
    }

    /// The sender whose OAuth client an access token names: the token verified by the verifier
    /// of its claimed issuer (each, when senders name the same issuer with other audiences or
    /// keys), then its client claim compared with the senders' `clientId` by its bytes.
    func authenticatePushSenderToken(_ authorization: String) async throws(Refusal) -> PushSender {
        let issuer = JWTAuthenticator.claimedIssuer(authorization: authorization)
        var firstFailure: String?
        for verifier in pushSenderTokens where issuer.map({ UserIdentity.sameBytes($0, verifier.settings.issuer) }) ?? false {
            switch await verifier.authenticate(authorization: authorization) {
            case .success(let caller):
                let sender = configuration.pushSenders.first { sender in
                    guard let oauth = sender.oauth else { return false }
                    return oauth.token.hasSameBytes(as: verifier.settings) && UserIdentity.sameBytes(oauth.clientID, caller.identity.id)
                }
                if let sender { return sender }
                firstFailure = firstFailure ?? "the token's \(verifier.settings.userClaim) names no sender's OAuth client"
            case .failure(let failure):
                firstFailure = firstFailure ?? failure.description
            }
        }
        throw Refusal.bearerUnauthorized(firstFailure ?? "the token is not from an identity provider a push sender is configured with")
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
}

/// The sign-in of the configuration in force, read once per request: a reload swaps the whole
/// configuration, so a request that read it sees one configuration from start to end.
package struct CurrentSignIn: Sendable {
    private let read: @Sendable () -> CallerSignIn
    package init(_ read: @escaping @Sendable () -> CallerSignIn) { self.read = read }
    package var current: CallerSignIn { read() }
}
