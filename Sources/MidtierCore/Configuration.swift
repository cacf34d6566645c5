// The configuration Midtier runs on (docs/configuration.md): validated values, built from
// files by ConfigurationFiles (nothing else creates one outside tests).

/// Everything loaded from one configuration directory. Immutable: a reload builds a new one
/// and swaps it in whole.
package struct MidtierConfiguration: Sendable {
    package var server: ServerSettings
    /// Apps by app id (the file name of `config/apps/<appId>.json`).
    package var apps: [String: AppConfiguration]
    /// Destinations by `Name` (which equals the file name of `config/destinations/<Name>.json`).
    package var destinations: [String: DestinationConfiguration]
    /// Local users for `basic` authentication, by user id.
    package var users: [String: LocalUser]
    /// Back-end senders of push notifications (`config/push-senders.json`, docs/push.md), in
    /// file order; looked up by their names' bytes.
    package var pushSenders: [PushSender]

    package init(
        server: ServerSettings,
        apps: [String: AppConfiguration],
        destinations: [String: DestinationConfiguration],
        users: [String: LocalUser],
        pushSenders: [PushSender] = []
    ) {
        self.server = server
        self.apps = apps
        self.destinations = destinations
        self.users = users
        self.pushSenders = pushSenders
    }

    /// The push sender named `name` (by its bytes).
    package func pushSender(named name: String) -> PushSender? {
        pushSenders.first { UserIdentity.sameBytes($0.name, name) }
    }
}

/// A `host:port` pair, as in `"0.0.0.0:8080"` or `"[::1]:9090"`.
package struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    package var host: String
    package var port: Int
    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Where durable state lives.
package enum StoreLocation: Sendable, Equatable {
    /// `sqlite:PATH` (relative paths against the working directory).
    case sqlite(path: String)
    /// A PostgreSQL server shared by several instances (docs/operations.md).
    case postgres(PostgresLocation)
}

/// Where a PostgreSQL store is and how to reach it, from a `postgres://` URL (and, in the
/// object form of `store`, a separate password secret). `description` never shows the
/// password.
package struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    /// libpq's `sslmode`, the ones Midtier supports.
    package enum TLSMode: String, Sendable, Equatable, CaseIterable {
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
    package var host: String
    package var port: Int
    package var user: String
    package var password: String?
    package var database: String
    package var tls: TLSMode
    /// `sslrootcert`: a PEM file of the roots to trust; the system's roots when nil.
    package var rootCertificatePath: String?
    /// `prepared_statements`: whether the reads on the request path stay prepared on each
    /// connection (`on`, the default); `off` behind a pooler that does not keep them, such as
    /// PgBouncer before 1.21 in transaction mode (docs/operations.md, "Prepared statements").
    package var preparedStatements: Bool

    package init(
        host: String, port: Int = 5432, user: String, password: String? = nil, database: String,
        tls: TLSMode = .prefer, rootCertificatePath: String? = nil, preparedStatements: Bool = true
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.tls = tls
        self.rootCertificatePath = rootCertificatePath
        self.preparedStatements = preparedStatements
    }

    /// Whether `host` names a Unix socket directory.
    package var isUnixSocket: Bool { host.hasPrefix("/") }

    package var description: String {
        let hostPart = isUnixSocket ? "" : (host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)")
        let socket = isUnixSocket ? "&host=\(host)" : ""
        let prepared = preparedStatements ? "" : "&prepared_statements=off"
        return "postgres://\(user)@\(hostPart)/\(database)?sslmode=\(tls.rawValue)\(socket)\(prepared)"
    }
}

/// `config/midtier.json`.
package struct ServerSettings: Sendable {
    /// `listen`, default `0.0.0.0:8080`.
    package var listen: ListenAddress
    /// `adminListen`, default `127.0.0.1:9090`.
    package var adminListen: ListenAddress
    /// `publicURL`: the device-facing base URL, without a trailing slash. Default
    /// `http://localhost:<listen port>`.
    package var publicURL: String
    /// `adminURL`: how admins reach `adminListen` (through a TLS-terminating proxy, say), without
    /// a trailing slash. Default `http://<adminListen>`. The console's cookies are `Secure`
    /// when it is https.
    package var adminURL: String?
    /// `store`, default `sqlite:data/midtier.sqlite`.
    package var store: StoreLocation
    /// `adminTokenHashes`: bcrypt hashes of admin bearer tokens (from `midtier hash-secret`).
    package var adminTokenHashes: [String]
    /// `logLevel`: one of trace, debug, info, notice, warning, error, critical. Default `info`.
    package var logLevel: String
    /// `maxRequestBodyBytes`: the largest request body forwarded to a back end. Default 10 MiB.
    package var maxRequestBodyBytes: Int
    /// `credentialCacheSeconds`: how long a verified device credential is remembered. Default 300.
    package var credentialCacheSeconds: Int
    /// `maxRegistrationsPerUser`: the most registrations one user may hold, over all apps.
    /// Default 20.
    package var maxRegistrationsPerUser: Int
    /// `backendSessionKeys`: the keys that seal the back-end sessions kept in the store. The
    /// first seals, every one opens (rotation); none keeps sessions in memory only.
    package var backendSessionKeys: [BackendSessionKey]
    /// `trustedProxies`: the load balancers or reverse proxies whose `X-Forwarded-For` names
    /// the client (throttling, audit, the back end's `X-Forwarded-For`). Default none.
    package var trustedProxies: [AddressRange]
    /// `requestHeadTimeoutSeconds`, `idleTimeoutSeconds`, `requestBodyTimeoutSeconds`,
    /// `maxConnectionsPerAddress`: slow and idle clients, on both listeners.
    package var connectionLimits: ConnectionLimits
    /// `clientUploads`: the client log and usage uploads' limits and retention.
    package var clientUploads: ClientUploadSettings
    /// `tracing`: OpenTelemetry traces over OTLP/HTTP; nil (the default): none.
    package var tracing: TracingSettings?
    /// `memoryCache`: how much of the store the request path keeps in memory.
    package var memoryCache: MemoryCacheSettings

    package init(
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
        trustedProxies: [AddressRange] = [],
        connectionLimits: ConnectionLimits = ConnectionLimits(),
        clientUploads: ClientUploadSettings = ClientUploadSettings(),
        tracing: TracingSettings? = nil,
        memoryCache: MemoryCacheSettings = MemoryCacheSettings()
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
        self.connectionLimits = connectionLimits
        self.clientUploads = clientUploads
        self.tracing = tracing
        self.memoryCache = memoryCache
    }
}

/// `memoryCache` in `midtier.json`: how many entries the memory in front of the store keeps
/// (docs/configuration.md; the memory each takes: docs/operations.md, "Memory"). Past them, the
/// entries not used lately make room, one at a time.
package struct MemoryCacheSettings: Sendable, Equatable {
    /// `registrations`: registrations whose standing (app, owner, state, last contact) is
    /// kept. Default 500 000.
    package var registrations: Int
    /// `unknownIds`: registration ids the store was asked for and had not. Default 100 000.
    package var unknownIds: Int
    /// `users`: users whose block (or that they have none) is kept. Default 500 000.
    package var users: Int

    package init(registrations: Int = 500_000, unknownIds: Int = 100_000, users: Int = 500_000) {
        self.registrations = registrations
        self.unknownIds = unknownIds
        self.users = users
    }
}

/// `clientUploads` in `midtier.json`: how much devices may upload through the client log and
/// usage services, and how long it is kept (docs/configuration.md, docs/device-api.md).
package struct ClientUploadSettings: Sendable, Equatable {
    package static let defaultStoredBytesPerUser = 100 * 1024 * 1024
    /// `maxUploadBytes`: the largest upload body (as sent, before unzipping). Default 5 MiB,
    /// the SAP SDK's default largest log file.
    package var maxUploadBytes: Int
    /// `maxStoredBytesPerRegistration`: the most bytes one registration's kept uploads of one
    /// kind take together, as stored (a log's entries, a usage report's text); the oldest go
    /// to make room, and a single upload larger than this is refused. Default 20 MiB.
    package var maxStoredBytesPerRegistration: Int
    /// `maxStoredBytesPerUser`: the same over all of one user's registrations. Default 100 MiB
    /// (never below `maxStoredBytesPerRegistration`).
    package var maxStoredBytesPerUser: Int
    /// `maxUploadsPerHour`: the most uploads of one kind per registration in an hour. Default 60.
    package var maxUploadsPerHour: Int
    /// `retentionDays`: uploads older than this are deleted. Default 14.
    package var retentionDays: Int

    package init(
        maxUploadBytes: Int = 5 * 1024 * 1024, maxStoredBytesPerRegistration: Int = 20 * 1024 * 1024,
        maxStoredBytesPerUser: Int? = nil, maxUploadsPerHour: Int = 60, retentionDays: Int = 14
    ) {
        self.maxUploadBytes = maxUploadBytes
        self.maxStoredBytesPerRegistration = maxStoredBytesPerRegistration
        self.maxStoredBytesPerUser = maxStoredBytesPerUser ?? max(Self.defaultStoredBytesPerUser, maxStoredBytesPerRegistration)
        self.maxUploadsPerHour = maxUploadsPerHour
        self.retentionDays = retentionDays
    }
}

/// A 256-bit key that seals back-end sessions at rest (docs/configuration.md,
/// `backendSessionKeys`). Never printed.
package struct BackendSessionKey: Sendable, Equatable, CustomStringConvertible {
    package static let byteCount = 32
    package let bytes: [UInt8]

    package init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    package var description: String { "BackendSessionKey(\(Self.byteCount) bytes, not shown)" }
}

/// One entry of `config/users.json`.
package struct LocalUser: Sendable {
    package var id: String
    /// bcrypt hash from `midtier hash-secret`.
    package var passwordHash: String
    package var attributes: [String: String]
    package init(id: String, passwordHash: String, attributes: [String: String] = [:]) {
        self.id = id
        self.passwordHash = passwordHash
        self.attributes = attributes
    }
}
