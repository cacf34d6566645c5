package import MidtierJSON

// An app: how its devices sign in and the client policy they are given
// (docs/configuration.md, `apps/<appId>.json`).

/// How devices of an app prove who their user is (docs/identity.md).
package enum AppAuthentication: Sendable, Equatable {
    /// HTTP Basic against `config/users.json`.
    case basic
    /// Bearer JWT from the company IdP.
    case jwt(JWTAuthentication)
    /// HTTP Basic checked against a back end's own users (`{"type": "backend"}`), as SAP
    /// Mobile Platform's HTTP authentication provider did (docs/identity.md).
    case backend(BackendSignIn)

    /// The realm the app's users belong to (docs/identity.md): `users.json`'s (`""`) for basic,
    /// the issuer for jwt, `backend:<destination>` for backend.
    package var realm: String {
        switch self {
        case .basic: UserIdentity.localRealm
        case .jwt(let settings): settings.issuer
        case .backend(let settings): settings.realm
        }
    }
}

/// `{"type": "backend", "destination": …, "path": …}`: a device's Basic credentials are right
/// when the destination's back end answers 2xx to a GET of `path` with them.
package struct BackendSignIn: Sendable, Equatable {
    /// The destination whose back end (and TLS trust) checks the credentials.
    package var destination: String
    /// The path under the destination's `URL` that is read to check (default `/`).
    package var path: String

    package init(destination: String, path: String = "/") {
        self.destination = destination
        self.path = path
    }

    /// `backend:<destination>`: one realm of users per checking destination.
    package var realm: String { Self.realmPrefix + destination }
    package static let realmPrefix = "backend:"
}

package struct JWTAuthentication: Sendable, Equatable {
    package enum KeySource: Sendable, Equatable {
        case file(path: String)
        case url(String)
    }
    package var issuer: String
    package var audience: String
    package var jwks: KeySource
    /// The claim that names the user, default `sub`.
    package var userClaim: String
    /// `oauth2`: the IdP's endpoints and the app's OAuth2 clients, announced by
    /// `GET /config/v1/{appId}` so that SAP SDK apps can sign in (docs/device-api.md).
    package var oauth2: OAuth2Discovery?

    package init(issuer: String, audience: String, jwks: KeySource, userClaim: String = "sub", oauth2: OAuth2Discovery? = nil) {
        self.issuer = issuer
        self.audience = audience
        self.jwks = jwks
        self.userClaim = userClaim
        self.oauth2 = oauth2
    }
}

/// How a JWT app's clients get their tokens from the company IdP (OAuth2 authorization code,
/// with PKCE on the client's side).
package struct OAuth2Discovery: Sendable, Equatable {
    package struct Client: Sendable, Equatable {
        package var clientID: String
        package var redirectURL: String

        package init(clientID: String, redirectURL: String) {
            self.clientID = clientID
            self.redirectURL = redirectURL
        }
    }

    package var authorizationEndpoint: String
    package var tokenEndpoint: String
    /// Where the sign-in page is shown (`oauth2.endUserUI`); the authorization endpoint when
    /// not given.
    package var endUserUI: String
    /// At least one; the first is the one the flat (older) discovery keys name.
    package var clients: [Client]

    package init(authorizationEndpoint: String, tokenEndpoint: String, endUserUI: String? = nil, clients: [Client]) {
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.endUserUI = endUserUI ?? authorizationEndpoint
        self.clients = clients
    }
}

/// `blockWipingPolicy` of an app.
package struct BlockWipingPolicy: Sendable, Equatable {
    package var blockWipeEnabled: Bool
    /// Days without contact after which a registration is locked (0 = never).
    package var blockDisconnectedPeriod: Int
    /// Days without contact after which a registration is wiped (0 = never).
    package var wipeDisconnectedPeriod: Int

    package init(blockWipeEnabled: Bool = false, blockDisconnectedPeriod: Int = 0, wipeDisconnectedPeriod: Int = 0) {
        self.blockWipeEnabled = blockWipeEnabled
        self.blockDisconnectedPeriod = blockDisconnectedPeriod
        self.wipeDisconnectedPeriod = wipeDisconnectedPeriod
    }
}

/// The keys of the client policy groups the SAP SDK reads from the settings exchange, with
/// the type of each value (docs/configuration.md, "Client policy").
package enum ClientPolicy {
    package enum Value: Sendable {
        case bool
        case integer(ClosedRange<Int>)
        case strings
    }

    package static let passwordPolicy: [(key: String, value: Value)] = [
        ("passwordPolicyEnabled", .bool), ("passwordPolicyMinLength", .integer(1...256)),
        ("passwordPolicyDigitRequired", .bool), ("passwordPolicyLowerRequired", .bool),
        ("passwordPolicyUpperRequired", .bool), ("passwordPolicySpecialRequired", .bool),
        ("passwordPolicyExpiresInNDays", .integer(0...36500)), ("passwordPolicyMinUniqueChars", .integer(0...256)),
        ("passwordPolicyLockTimeout", .integer(0...Int(Int32.max))), ("passwordPolicyRetryLimit", .integer(0...1000)),
        ("passwordPolicyDefaultPasswordAllowed", .bool),
    ]

    package static let usagePolicy: [(key: String, value: Value)] = [
        ("dataCollectionEnabled", .bool), ("uploadDataAfterDays", .integer(0...36500)), ("crashLogUploadEnabled", .bool),
    ]

    package static let featureVectorPolicies: [(key: String, value: Value)] = [
        ("featureVectorPolicyAllEnabled", .bool), ("restrictedPolicies", .strings), ("allowedPolicies", .strings),
    ]
}

/// `config/apps/<appId>.json`.
package struct AppConfiguration: Sendable {
    package var id: String
    package var authentication: AppAuthentication
    /// Destination names this app may use.
    package var destinations: [String]
    package var blockWipingPolicy: BlockWipingPolicy
    /// The settings exchange's `passwordPolicy`, in the SAP SDK's key spelling, values checked
    /// and normalized (`ClientPolicy.passwordPolicy`). Default `{}`.
    package var passwordPolicy: [String: JSON]
    /// Passed to clients as given (settings exchange). Default `{}`.
    package var logSettings: [String: JSON]
    /// The settings exchange's `usagePolicy` (`ClientPolicy.usagePolicy`). Default `{}`.
    package var usagePolicy: [String: JSON] = [:]
    /// The settings exchange's `featureVectorPolicies` (`ClientPolicy.featureVectorPolicies`).
    /// Default `{}`.
    package var featureVectorPolicies: [String: JSON] = [:]
    /// Extra members merged into `GET /config/v1/{appId}`. Default `{}`.
    package var discovery: [String: JSON]
    /// `implicitRegistration`: a signed-in call with `X-SMP-APPID` and `X-SMP-DEVICEID` but no
    /// registration of that device onboards it, as a Connections POST would
    /// (docs/device-api.md, "Implicit registration"). Default false.
    package var implicitRegistration: Bool = false
    /// `push`: the app's push services (docs/push.md). Default none.
    package var push: PushSettings = PushSettings()

    package init(
        id: String,
        authentication: AppAuthentication = .basic,
        destinations: [String] = [],
        blockWipingPolicy: BlockWipingPolicy = BlockWipingPolicy(),
        passwordPolicy: [String: JSON] = [:],
        logSettings: [String: JSON] = [:],
        discovery: [String: JSON] = [:]
    ) {
        self.id = id
        self.authentication = authentication
        self.destinations = destinations
        self.blockWipingPolicy = blockWipingPolicy
        self.passwordPolicy = passwordPolicy
        self.logSettings = logSettings
        self.discovery = discovery
    }
}
