package import AsyncHTTPClient
package import Callers
package import DeviceAuthentication
package import Forwarding
import Foundation
package import Logging
package import MidtierCore
package import PrincipalPropagation
package import SAMLSigning
import Synchronization
package import TokenExchange

/// Everything derived from one loaded configuration: the configuration itself, how its callers
/// sign in, one token exchange per SAML destination (keys loaded once), the upstreams. Built
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
    /// How this configuration's callers sign in (devices of each app, push senders).
    package let signIn: CallerSignIn
    /// Where and how to forward, by destination name (with its URL rewriter).
    let upstreams: [String: UpstreamDestination]
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
        // A `backend` app's users are checked at the app's destination (docs/identity.md).
        let upstreamDestinations = self.upstreams
        self.signIn = CallerSignIn(
            configuration: configuration, httpClient: httpClient, throttle: throttle, limiter: limiter,
            backendCheck: { id, signIn in
                guard let upstreams, let destination = upstreamDestinations[signIn.destination] else {
                    return { _, _ in .unavailable("no connection pool") }
                }
                let forwarder = Forwarder(upstreams: upstreams, maxRequestBodyBytes: 0)
                return { user, password in
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
            }, logger: logger)
        let publicURL = configuration.server.publicURL
        if let schemeEnd = publicURL.range(of: "://") {
            publicScheme = String(publicURL[..<schemeEnd.lowerBound])
            publicHost = String(publicURL[schemeEnd.upperBound...].prefix { $0 != "/" })
        } else {
            publicScheme = "http"
            publicHost = publicURL
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
