// An app: how its devices sign in and the client policy they are given
// (docs/configuration.md, `apps/<appId>.json`).

/// How devices of an app prove who their user is (docs/identity.md).
public enum AppAuthentication: Sendable, Equatable {
    /// HTTP Basic against `config/users.json`.
    case basic
    /// Bearer JWT from the company IdP.
    case jwt(JWTAuthentication)
}

public struct JWTAuthentication: Sendable, Equatable {
    public enum KeySource: Sendable, Equatable {
        case file(path: String)
        case url(String)
    }
    public var issuer: String
    public var audience: String
    public var jwks: KeySource
    /// The claim that names the user, default `sub`.
    public var userClaim: String
    /// `oauth2`: the IdP's endpoints and the app's OAuth2 clients, announced by
    /// `GET /config/v1/{appId}` so that SAP SDK apps can sign in (docs/device-api.md).
    public var oauth2: OAuth2Discovery?

    public init(issuer: String, audience: String, jwks: KeySource, userClaim: String = "sub", oauth2: OAuth2Discovery? = nil) {
        self.issuer = issuer
        self.audience = audience
        self.jwks = jwks
        self.userClaim = userClaim
        self.oauth2 = oauth2
    }
}

/// How a JWT app's clients get their tokens from the company IdP (OAuth2 authorization code,
/// with PKCE on the client's side).
public struct OAuth2Discovery: Sendable, Equatable {
    public struct Client: Sendable, Equatable {
        public var clientID: String
        public var redirectURL: String

        public init(clientID: String, redirectURL: String) {
            self.clientID = clientID
            self.redirectURL = redirectURL
        }
    }

    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    /// Where the sign-in page is shown (`oauth2.endUserUI`); the authorization endpoint when
    /// not given.
    public var endUserUI: String
    /// At least one; the first is the one the flat (older) discovery keys name.
    public var clients: [Client]

    public init(authorizationEndpoint: String, tokenEndpoint: String, endUserUI: String? = nil, clients: [Client]) {
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.endUserUI = endUserUI ?? authorizationEndpoint
        self.clients = clients
    }
}

/// `blockWipingPolicy` of an app.
public struct BlockWipingPolicy: Sendable, Equatable {
    public var blockWipeEnabled: Bool
    /// Days without contact after which a registration is locked (0 = never).
    public var blockDisconnectedPeriod: Int
    /// Days without contact after which a registration is wiped (0 = never).
    public var wipeDisconnectedPeriod: Int

    public init(blockWipeEnabled: Bool = false, blockDisconnectedPeriod: Int = 0, wipeDisconnectedPeriod: Int = 0) {
        self.blockWipeEnabled = blockWipeEnabled
        self.blockDisconnectedPeriod = blockDisconnectedPeriod
        self.wipeDisconnectedPeriod = wipeDisconnectedPeriod
    }
}

/// The keys of the client policy groups the SAP SDK reads from the settings exchange, with
/// the type of each value (docs/configuration.md, "Client policy").
public enum ClientPolicy {
    public enum Value: Sendable {
        case bool
        case integer(ClosedRange<Int>)
        case strings
    }

    public static let passwordPolicy: [(key: String, value: Value)] = [
        ("passwordPolicyEnabled", .bool), ("passwordPolicyMinLength", .integer(1...256)),
        ("passwordPolicyDigitRequired", .bool), ("passwordPolicyLowerRequired", .bool),
        ("passwordPolicyUpperRequired", .bool), ("passwordPolicySpecialRequired", .bool),
        ("passwordPolicyExpiresInNDays", .integer(0...36500)), ("passwordPolicyMinUniqueChars", .integer(0...256)),
        ("passwordPolicyLockTimeout", .integer(0...Int(Int32.max))), ("passwordPolicyRetryLimit", .integer(0...1000)),
        ("passwordPolicyDefaultPasswordAllowed", .bool),
    ]

    public static let usagePolicy: [(key: String, value: Value)] = [
        ("dataCollectionEnabled", .bool), ("uploadDataAfterDays", .integer(0...36500)), ("crashLogUploadEnabled", .bool),
    ]

    public static let featureVectorPolicies: [(key: String, value: Value)] = [
        ("featureVectorPolicyAllEnabled", .bool), ("restrictedPolicies", .strings), ("allowedPolicies", .strings),
    ]
}

/// `config/apps/<appId>.json`.
public struct AppConfiguration: Sendable {
    public var id: String
    public var authentication: AppAuthentication
    /// Destination names this app may use.
    public var destinations: [String]
    public var blockWipingPolicy: BlockWipingPolicy
    /// The settings exchange's `passwordPolicy`, in the SAP SDK's key spelling, values checked
    /// and normalized (`ClientPolicy.passwordPolicy`). Default `{}`.
    public var passwordPolicy: [String: JSONValue]
    /// Passed to clients as given (settings exchange). Default `{}`.
    public var logSettings: [String: JSONValue]
    /// The settings exchange's `usagePolicy` (`ClientPolicy.usagePolicy`). Default `{}`.
    public var usagePolicy: [String: JSONValue] = [:]
    /// The settings exchange's `featureVectorPolicies` (`ClientPolicy.featureVectorPolicies`).
    /// Default `{}`.
    public var featureVectorPolicies: [String: JSONValue] = [:]
    /// Extra members merged into `GET /config/v1/{appId}`. Default `{}`.
    public var discovery: [String: JSONValue]

    public init(
        id: String,
        authentication: AppAuthentication = .basic,
        destinations: [String] = [],
        blockWipingPolicy: BlockWipingPolicy = BlockWipingPolicy(),
        passwordPolicy: [String: JSONValue] = [:],
        logSettings: [String: JSONValue] = [:],
        discovery: [String: JSONValue] = [:]
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
