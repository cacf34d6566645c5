import AsyncHTTPClient
import DeviceAuthentication
import Forwarding
import Foundation
import Hummingbird
import Logging
import MidtierHTTP
import MidtierConfiguration
import SAMLSigning
import Synchronization
import TokenExchange

/// Everything derived from one loaded configuration: the configuration itself, one token
/// exchange per SAML destination (keys loaded once), and the device authenticator. Built
/// whole and swapped whole, so a request sees one consistent configuration from start to end.
public final class Runtime: Sendable {
    public let configuration: MidtierConfiguration
    /// SAML bearer exchanges by destination name.
    public let exchanges: [String: SAMLBearerExchange]
    /// `Authorization` values for `BasicAuthentication` destinations, by destination name.
    let basicAuthorizations: [String: String]
    let basicAuthenticator: BasicAuthenticator
    /// Back-end URL → device-facing URL, by destination name.
    let rewriters: [String: URLRewriter]
    /// Bearer JWT authenticators by app id, for the apps whose authentication is `jwt`.
    let jwtAuthenticators: [String: JWTAuthenticator]
    /// `publicURL` split for `X-Forwarded-Proto` / `-Host`.
    let publicScheme: String
    let publicHost: String

    public init(configuration: MidtierConfiguration, httpClient: HTTPClient,
                logger: Logger = Logger(label: "midtier")) throws(SigningError) {
        self.configuration = configuration
        var exchanges: [String: SAMLBearerExchange] = [:]
        var basic: [String: String] = [:]
        for (name, destination) in configuration.destinations {
            switch destination.authentication {
            case .samlBearer(let settings):
                exchanges[name] = try SAMLBearerExchange(settings: settings, httpClient: httpClient,
                                                         timeoutMilliseconds: destination.timeoutMilliseconds)
            case .basic(let user, let password):
                basic[name] = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            case .noAuthentication:
                break
            }
        }
        self.exchanges = exchanges
        self.basicAuthorizations = basic
        self.rewriters = configuration.destinations.mapValues { destination in
            URLRewriter(backendBase: destination.url, deviceBase: configuration.server.publicURL + "/" + destination.name)
        }
        self.basicAuthenticator = BasicAuthenticator(users: configuration.users,
                                                     cacheSeconds: configuration.server.credentialCacheSeconds)
        var jwt: [String: JWTAuthenticator] = [:]
        for (id, app) in configuration.apps {
            guard case .jwt(let settings) = app.authentication else { continue }
            jwt[id] = JWTAuthenticator(settings: settings, httpClient: httpClient, log: { level, message in
                let metadata: Logger.Metadata = ["app": "\(id)"]
                switch level {
                case .info: logger.info("\(message)", metadata: metadata)
                case .warning: logger.warning("\(message)", metadata: metadata)
                case .error: logger.error("\(message)", metadata: metadata)
                }
            })
        }
        self.jwtAuthenticators = jwt
        let publicURL = configuration.server.publicURL
        if let schemeEnd = publicURL.range(of: "://") {
            publicScheme = String(publicURL[..<schemeEnd.lowerBound])
            publicHost = String(publicURL[schemeEnd.upperBound...].prefix { $0 != "/" })
        } else {
            publicScheme = "http"
            publicHost = publicURL
        }
    }

    /// Authenticates a device of `app` (SPEC §3).
    func authenticate(_ request: Request, app: AppConfiguration) async throws(Refusal) -> AuthenticatedUser {
        switch app.authentication {
        case .basic:
            switch await basicAuthenticator.authenticate(authorization: request.headers[.authorization]) {
            case .success(let user): return user
            case .failure(let failure): throw Refusal.unauthorized(failure.description)
            }
        case .jwt:
            guard let authenticator = jwtAuthenticators[app.id] else { throw Refusal.bearerUnauthorized("the app has no token verifier") }
            switch await authenticator.authenticate(authorization: request.headers[.authorization]) {
            case .success(let user): return user
            case .failure(let failure): throw Refusal.bearerUnauthorized(failure.description)
            }
        }
    }

    /// The back-end user name for `user` at `destination`: the `userIdSource` attribute, or the
    /// user id when none is set.
    func backendUser(_ user: AuthenticatedUser, destination: DestinationConfiguration) -> String? {
        guard let source = destination.userIdSource else { return user.id }
        return user.attributes[source]
    }
}

/// The runtime in force; replaced whole on reload.
public final class RuntimeHolder: Sendable {
    private let state: Mutex<Runtime>
    public init(_ runtime: Runtime) { state = Mutex(runtime) }
    public var current: Runtime { state.withLock { $0 } }
    public func replace(with runtime: Runtime) { state.withLock { $0 = runtime } }
}
