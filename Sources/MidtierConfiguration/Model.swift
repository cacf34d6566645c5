// The typed configuration Midtier runs on, as loaded from `config/` (docs/configuration.md).
// `ConfigurationLoader` builds a `MidtierConfiguration` from files; nothing else creates one
// outside tests. Every value here has already been validated.

/// Everything loaded from one configuration directory. Immutable: a reload builds a new one
/// and swaps it in whole.
public struct MidtierConfiguration: Sendable {
    public var server: ServerSettings
    /// Apps by app id (the file name of `config/apps/<appId>.json`).
    public var apps: [String: AppConfiguration]
    /// Destinations by `Name` (which equals the file name of `config/destinations/<Name>.json`).
    public var destinations: [String: DestinationConfiguration]
    /// Local users for `basic` authentication, by user id.
    public var users: [String: LocalUser]

    public init(
        server: ServerSettings,
        apps: [String: AppConfiguration],
        destinations: [String: DestinationConfiguration],
        users: [String: LocalUser]
    ) {
        self.server = server
        self.apps = apps
        self.destinations = destinations
        self.users = users
    }
}

/// A `host:port` pair, as in `"0.0.0.0:8080"` or `"[::1]:9090"`.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Where durable state lives.
public enum StoreLocation: Sendable, Equatable {
    /// `sqlite:PATH` (relative paths against the working directory).
    case sqlite(path: String)
    /// A PostgreSQL server shared by several instances (docs/operations.md).
    case postgres(PostgresLocation)
}

/// Where a PostgreSQL store is and how to reach it, from a `postgres://` URL (and, in the
/// object form of `store`, a separate password secret). `description` never shows the
/// password.
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    /// libpq's `sslmode`, the ones Midtier supports.
    public enum TLSMode: String, Sendable, Equatable, CaseIterable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it, without checking its certificate (libpq's default).
        case prefer
        /// TLS always, without checking the certificate.
        case require
        /// TLS always; the certificate must chain to the trusted roots (any host name).
        case verifyCA = "verify-ca"
        /// TLS always; the certificate must chain to the trusted roots and name the host.
        case verifyFull = "verify-full"
    }

    /// A host name or address, or a directory holding the server's Unix socket (starts with `/`).
    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// `sslrootcert`: a PEM file of the roots to trust; the system's roots when nil.
    public var rootCertificatePath: String?

    public init(host: String, port: Int = 5432, user: String, password: String? = nil, database: String,
                tls: TLSMode = .prefer, rootCertificatePath: String? = nil) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.tls = tls
        self.rootCertificatePath = rootCertificatePath
    }

    /// Whether `host` names a Unix socket directory.
    public var isUnixSocket: Bool { host.hasPrefix("/") }

    public var description: String {
        let hostPart = isUnixSocket ? "" : (host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
        let socket = isUnixSocket ? "&host=\(host)" : ""
        return "postgres://\(user)@\(hostPart)/\(database)?sslmode=\(tls.rawValue)\(socket)"
    }
}

/// `config/midtier.json`.
public struct ServerSettings: Sendable {
    /// `listen`, default `0.0.0.0:8080`.
    public var listen: ListenAddress
    /// `adminListen`, default `127.0.0.1:9090`.
    public var adminListen: ListenAddress
    /// `publicURL`: the device-facing base URL, without a trailing slash. Default
    /// `http://localhost:<listen port>`.
    public var publicURL: String
    /// `adminURL`: how admins reach `adminListen` (through a TLS-terminating proxy, say), without
    /// a trailing slash. Default `http://<adminListen>`. The console's cookies are `Secure`
    /// when it is https.
    public var adminURL: String?
    /// `store`, default `sqlite:data/midtier.sqlite`.
    public var store: StoreLocation
    /// `adminTokenHashes`: bcrypt hashes of admin bearer tokens (from `midtier hash-secret`).
    public var adminTokenHashes: [String]
    /// `logLevel`: one of trace, debug, info, notice, warning, error, critical. Default `info`.
    public var logLevel: String
    /// `maxRequestBodyBytes`: the largest request body forwarded to a back end. Default 10 MiB.
    public var maxRequestBodyBytes: Int
    /// `credentialCacheSeconds`: how long a verified device credential is remembered. Default 300.
    public var credentialCacheSeconds: Int
    /// `maxRegistrationsPerUser`: the most registrations one user may hold, over all apps.
    /// Default 20.
    public var maxRegistrationsPerUser: Int
    /// `backendSessionKeys`: the keys that seal the back-end sessions kept in the store. The
    /// first seals, every one opens (rotation); none keeps sessions in memory only.
    public var backendSessionKeys: [BackendSessionKey]
    /// `trustedProxies`: the load balancers or reverse proxies whose `X-Forwarded-For` names
    /// the client (throttling, audit, the back end's `X-Forwarded-For`). Default none.
    public var trustedProxies: [AddressRange]

    public init(
        listen: ListenAddress = ListenAddress(host: "0.0.0.0", port: 8080),
        adminListen: ListenAddress = ListenAddress(host: "127.0.0.1", port: 9090),
        publicURL: String = "http://localhost:8080",
        store: StoreLocation = .sqlite(path: "data/midtier.sqlite"),
        adminTokenHashes: [String] = [],
        logLevel: String = "info",
        maxRequestBodyBytes: Int = 10 * 1024 * 1024,
        credentialCacheSeconds: Int = 300,
        maxRegistrationsPerUser: Int = 20,
        backendSessionKeys: [BackendSessionKey] = [],
        trustedProxies: [AddressRange] = []
    ) {
        self.listen = listen
        self.adminListen = adminListen
        self.publicURL = publicURL
        self.store = store
        self.adminTokenHashes = adminTokenHashes
        self.logLevel = logLevel
        self.maxRequestBodyBytes = maxRequestBodyBytes
        self.credentialCacheSeconds = credentialCacheSeconds
        self.maxRegistrationsPerUser = maxRegistrationsPerUser
        self.backendSessionKeys = backendSessionKeys
        self.trustedProxies = trustedProxies
    }
}

/// A 256-bit key that seals back-end sessions at rest (docs/configuration.md,
/// `backendSessionKeys`). Never printed.
public struct BackendSessionKey: Sendable, Equatable, CustomStringConvertible {
    public static let byteCount = 32
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    public var description: String { "BackendSessionKey(\(Self.byteCount) bytes, not shown)" }
}

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

/// A JSON value kept as given, for the parts of an app file that Midtier passes to clients
/// as they are (`passwordPolicy`, `logSettings`, `discovery`).
public indirect enum JSONValue: Sendable, Equatable, Codable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
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

/// The `Authentication` property of a destination.
public enum DestinationAuthentication: Sendable {
    case noAuthentication
    /// A technical user; the password is already resolved from its secret.
    case basic(user: String, password: String)
    case samlBearer(SAMLBearerSettings)
}

/// How the SAML assertion is encoded in the token request.
public enum AssertionEncoding: String, Sendable {
    case base64
    case base64url
}

/// Everything needed to build, sign and exchange an assertion for one destination.
public struct SAMLBearerSettings: Sendable {
    /// `tokenServiceURL`.
    public var tokenServiceURL: String
    /// `clientKey` (the SuccessFactors API key).
    public var clientKey: String
    /// `companyId`.
    public var companyId: String
    /// `audience`, default `www.successfactors.com`.
    public var audience: String
    /// `assertionIssuer`, default `clientKey`.
    public var assertionIssuer: String
    /// `assertionRecipient`, default `tokenServiceURL` without its query.
    public var assertionRecipient: String
    /// `nameIdFormat`, default `urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified`.
    public var nameIdFormat: String
    /// `authnContextClassRef`, default `urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession`.
    public var authnContextClassRef: String
    /// `samlAssertionEncoding`, default base64.
    public var assertionEncoding: AssertionEncoding
    /// `signingKey`: PEM file contents (private key, possibly encrypted).
    public var signingKeyPEM: [UInt8]
    /// The passphrase of an encrypted `signingKey` (`signingKeyPassphrase`), resolved.
    public var signingKeyPassphrase: String?
    /// `signingCertificate`: PEM file contents.
    public var signingCertificatePEM: [UInt8]

    public init(
        tokenServiceURL: String,
        clientKey: String,
        companyId: String,
        audience: String = "www.successfactors.com",
        assertionIssuer: String? = nil,
        assertionRecipient: String? = nil,
        nameIdFormat: String = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified",
        authnContextClassRef: String = "urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession",
        assertionEncoding: AssertionEncoding = .base64,
        signingKeyPEM: [UInt8],
        signingKeyPassphrase: String? = nil,
        signingCertificatePEM: [UInt8]
    ) {
        self.tokenServiceURL = tokenServiceURL
        self.clientKey = clientKey
        self.companyId = companyId
        self.audience = audience
        self.assertionIssuer = assertionIssuer ?? clientKey
        self.assertionRecipient = assertionRecipient ?? String(tokenServiceURL.prefix { $0 != "?" })
        self.nameIdFormat = nameIdFormat
        self.authnContextClassRef = authnContextClassRef
        self.assertionEncoding = assertionEncoding
        self.signingKeyPEM = signingKeyPEM
        self.signingKeyPassphrase = signingKeyPassphrase
        self.signingCertificatePEM = signingCertificatePEM
    }
}

/// `config/destinations/<Name>.json`.
public struct DestinationConfiguration: Sendable {
    /// `Name`.
    public var name: String
    /// `URL`: scheme, host, optional port and base path, without a trailing slash.
    public var url: String
    public var authentication: DestinationAuthentication
    /// `userIdSource`: the user attribute (or JWT claim) whose value is the NameID; nil means
    /// the user id itself.
    public var userIdSource: String?
    /// `timeout` in milliseconds, default 30000.
    public var timeoutMilliseconds: Int
    /// `URL.headers.<name>`: headers added to every forwarded request.
    public var extraHeaders: [(name: String, value: String)]
    /// `URL.queries.<name>`: query parameters added to every forwarded request.
    public var extraQueries: [(name: String, value: String)]
    /// `metadataPatches` (docs/forwarding.md, "`$metadata` patches").
    public var metadataPatches: [MetadataPatch]
    /// `trustedCertificates`: PEM file contents; for an https `URL`, the back end's certificate
    /// must chain to one of these instead of the system's roots (a company CA).
    public var trustedCertificatesPEM: [UInt8]?

    public init(
        name: String,
        url: String,
        authentication: DestinationAuthentication,
        userIdSource: String? = nil,
        timeoutMilliseconds: Int = 30000,
        extraHeaders: [(name: String, value: String)] = [],
        extraQueries: [(name: String, value: String)] = [],
        metadataPatches: [MetadataPatch] = [],
        trustedCertificatesPEM: [UInt8]? = nil
    ) {
        self.trustedCertificatesPEM = trustedCertificatesPEM
        self.name = name
        self.url = url
        self.authentication = authentication
        self.userIdSource = userIdSource
        self.timeoutMilliseconds = timeoutMilliseconds
        self.extraHeaders = extraHeaders
        self.extraQueries = extraQueries
        self.metadataPatches = metadataPatches
    }
}

/// One `metadataPatches` entry: set facets (attributes) on one property of one entity type.
public struct MetadataPatch: Sendable, Equatable {
    public var entityType: String
    public var property: String
    public var set: [String: String]
    public init(entityType: String, property: String, set: [String: String]) {
        self.entityType = entityType
        self.property = property
        self.set = set
    }
}

/// One entry of `config/users.json`.
public struct LocalUser: Sendable {
    public var id: String
    /// bcrypt hash from `midtier hash-secret`.
    public var passwordHash: String
    public var attributes: [String: String]
    public init(id: String, passwordHash: String, attributes: [String: String] = [:]) {
        self.id = id
        self.passwordHash = passwordHash
        self.attributes = attributes
    }
}
