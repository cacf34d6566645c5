import Foundation
import MidtierCore
import MidtierJSON

// `config/midtier.json`.

extension ConfigurationLoader {
    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// Reads `midtier.json`; every key is optional (defaults as in `ServerSettings`).
    func loadServerSettings(_ reader: ObjectReader) -> ServerSettings {
        var settings = ServerSettings()

        if let text = reader.string("listen") {
            switch parseListenAddress(text) {
            case .success(let address): settings.listen = address
            case .failure(let problem): reader.problem("listen", problem.message)
            }
        }
        if let text = reader.string("adminListen") {
            switch parseListenAddress(text) {
            case .success(let address):
                settings.adminListen = address
                // The admin API must not share the device-facing socket.
                if listenAddressesClash(address, settings.listen) {
                    reader.problem("adminListen", "must not use the same port as listen")
                }
            case .failure(let problem):
                reader.problem("adminListen", problem.message)
            }
        }

        // publicURL: the device-facing base URL; a path is allowed (behind a reverse proxy),
        // a query or fragment is not. Default: http://localhost:<listen port>.
        settings.publicURL = "http://localhost:\(settings.listen.port)"
        if let text = reader.string("publicURL") {
            switch checkHTTPURL(text, allowQuery: false) {
            case .success(let url): settings.publicURL = url
            case .failure(let problem): reader.problem("publicURL", problem.message)
            }
        }

        // adminURL: how admins reach the admin listener (the console's cookies are Secure when
        // it is https). A path is allowed, a query or fragment is not.
        if let text = reader.string("adminURL") {
            switch checkHTTPURL(text, allowQuery: false) {
            case .success(let url): settings.adminURL = url
            case .failure(let problem): reader.problem("adminURL", problem.message)
            }
        }

        if let store = storeLocation(reader) { settings.store = store }

        if let elements = reader.array("adminTokenHashes") {
            var hashes: [String] = []
            for (path, value) in elements {
                let hash: String
                switch value {
                case .string(let inline):
                    hash = inline
                case .object:
                    // From a file or the environment, as a secret is (a Kubernetes Secret, a
                    // systemd credential): docs/configuration.md.
                    guard let read = secret(value, path: path, problems: reader.problems) else { continue }
                    hash = read
                default:
                    reader.problems.add(path, "must be a string, {\"env\": \"VAR\"} or {\"file\": \"path\"} (found \(value.kind))")
                    continue
                }
                guard isBcryptHash(hash) else {
                    reader.problems.add(path, "must be a bcrypt hash from `midtier hash-secret` ($2a$, $2b$ or $2y$, 60 characters)")
                    continue
                }
                hashes.append(hash)
            }
            settings.adminTokenHashes = hashes
        }

        if let level = reader.choice("logLevel", Self.logLevels) { settings.logLevel = level }
        if let bytes = reader.integer("maxRequestBodyBytes", in: 1...Int.max) { settings.maxRequestBodyBytes = bytes }
        if let seconds = reader.integer("credentialCacheSeconds", in: 0...86400) { settings.credentialCacheSeconds = seconds }
        if let count = reader.integer("maxRegistrationsPerUser", in: 1...100_000) { settings.maxRegistrationsPerUser = count }
        if let keys = backendSessionKeys(reader) { settings.backendSessionKeys = keys }
        if let elements = reader.array("trustedProxies") {
            settings.trustedProxies = elements.compactMap { path, value in
                guard case .string(let text) = value, let range = AddressRange(text) else {
                    reader.problems.add(path, "must be an IP address or a CIDR block such as \"10.0.0.5\" or \"10.0.1.0/24\"")
                    return nil
                }
                return range
            }
        }

        // Slow and idle clients (docs/operations.md, "Slow and idle clients").
        if let seconds = reader.integer("requestHeadTimeoutSeconds", in: 1...3600) { settings.connectionLimits.requestHeadSeconds = seconds }
        if let seconds = reader.integer("idleTimeoutSeconds", in: 1...86400) { settings.connectionLimits.idleSeconds = seconds }
        if let seconds = reader.integer("requestBodyTimeoutSeconds", in: 1...3600) { settings.connectionLimits.requestBodySeconds = seconds }
        if let count = reader.integer("maxConnectionsPerAddress", in: 1...1_000_000) { settings.connectionLimits.maxConnectionsPerAddress = count }

        if let uploads = reader.object("clientUploads") { settings.clientUploads = clientUploadSettings(uploads) }
        if let tracing = reader.object("tracing") { settings.tracing = tracingSettings(tracing) }
        if let memory = reader.object("memoryCache") { settings.memoryCache = memoryCacheSettings(memory) }
        reader.reportUnknownKeys()
        return settings
    }
}

extension ConfigurationLoader {
    /// `memoryCache`: `registrations`, `unknownIds`, `users` (entries kept in memory).
    func memoryCacheSettings(_ reader: ObjectReader) -> MemoryCacheSettings {
        var settings = MemoryCacheSettings()
        if let count = reader.integer("registrations", in: 1...100_000_000) { settings.registrations = count }
        if let count = reader.integer("unknownIds", in: 1...100_000_000) { settings.unknownIds = count }
        if let count = reader.integer("users", in: 1...100_000_000) { settings.users = count }
        reader.reportUnknownKeys()
        return settings
    }

    /// `tracing`: `endpoint` (required), `samplingRatio`, `serviceName`, `maxQueuedSpans`.
    func tracingSettings(_ reader: ObjectReader) -> TracingSettings? {
        var endpoint: String?
        if let text = reader.string("endpoint", required: true) {
            switch checkHTTPURL(text, allowQuery: false) {
            case .success(let url): endpoint = url
            case .failure(let problem):
                reader.problem("endpoint", problem.message + " (the collector's OTLP/HTTP traces URL, as http://collector:4318/v1/traces)")
            }
        }
        var settings = TracingSettings(endpoint: endpoint ?? "")
        if let ratio = reader.fraction("samplingRatio") { settings.samplingRatio = ratio }
        if let name = reader.string("serviceName") {
            if name.isEmpty || name.utf8.count > 100 || containsControlCharacters(name) {
                reader.problem("serviceName", "must be 1 to 100 characters without control characters")
            } else {
                settings.serviceName = name
            }
        }
        if let count = reader.integer("maxQueuedSpans", in: 1...1_000_000) { settings.maxQueuedSpans = count }
        reader.reportUnknownKeys()
        return endpoint == nil ? nil : settings
    }
}

extension ConfigurationLoader {
    /// `backendSessionKeys`: an array of secrets, each 32 random bytes in base64
    /// (`openssl rand -base64 32`). The value never appears in a message.
    /// `clientUploads`: the client log and usage uploads' limits and retention.
    func clientUploadSettings(_ reader: ObjectReader) -> ClientUploadSettings {
        var settings = ClientUploadSettings()
        if let bytes = reader.integer("maxUploadBytes", in: 1024...(1 << 30)) { settings.maxUploadBytes = bytes }
        if let bytes = reader.integer("maxStoredBytesPerRegistration", in: 1024...(1 << 40)) { settings.maxStoredBytesPerRegistration = bytes }
        if let bytes = reader.integer("maxStoredBytesPerUser", in: 1024...(1 << 40)) {
            settings.maxStoredBytesPerUser = bytes
            if bytes < settings.maxStoredBytesPerRegistration {
                reader.problem(
                    "maxStoredBytesPerUser", "must not be smaller than maxStoredBytesPerRegistration (\(settings.maxStoredBytesPerRegistration))")
            }
        } else {
            settings.maxStoredBytesPerUser = max(ClientUploadSettings.defaultStoredBytesPerUser, settings.maxStoredBytesPerRegistration)
        }
        if let count = reader.integer("maxUploadsPerHour", in: 1...100_000) { settings.maxUploadsPerHour = count }
        if let days = reader.integer("retentionDays", in: 1...3650) { settings.retentionDays = days }
        if settings.maxUploadBytes > settings.maxStoredBytesPerRegistration {
            reader.problem(
                "maxUploadBytes",
                "must not be larger than maxStoredBytesPerRegistration (\(settings.maxStoredBytesPerRegistration)): an upload that large could never be kept"
            )
        }
        reader.reportUnknownKeys()
        return settings
    }

    func backendSessionKeys(_ reader: ObjectReader) -> [BackendSessionKey]? {
        guard let elements = reader.array("backendSessionKeys") else { return nil }
        var keys: [BackendSessionKey] = []
        for (path, value) in elements {
            guard let text = secret(value, path: path, problems: reader.problems) else { continue }
            guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespaces)),
                let key = BackendSessionKey(bytes: Array(data))
            else {
                reader.problems.add(path, "must be \(BackendSessionKey.byteCount) random bytes in base64 (make one with `openssl rand -base64 32`)")
                continue
            }
            if keys.contains(key) {
                reader.problems.add(path, "repeats an earlier key")
                continue
            }
            keys.append(key)
        }
        return keys
    }

    /// `store`: a string (`sqlite:PATH` or a `postgres://` URL), or for PostgreSQL the object
    /// `{"url": "postgres://…", "password": secret}` so that the password can come from
    /// `{"env": …}` or `{"file": …}` instead of the URL.
    func storeLocation(_ reader: ObjectReader) -> StoreLocation? {
        guard let value = reader.value("store") else { return nil }
        switch value {
        case .string(let text):
            switch parseStore(text) {
            case .success(let store): return store
            case .failure(let problem): reader.problem("store", problem.message)
            }
        case .object:
            guard let object = ObjectReader.make(value, path: reader.key("store"), problems: reader.problems) else { return nil }
            let url = object.string("url", required: true)
            let password = secret(object, "password", required: false)
            object.reportUnknownKeys()
            guard let url else { return nil }
            switch parsePostgresURL(url) {
            case .success(var location):
                if let password {
                    guard location.password == nil else {
                        object.problem("password", "the url carries a password already: give it in one place")
                        return nil
                    }
                    location.password = password
                }
                return .postgres(location)
            case .failure(let problem):
                object.problem("url", problem.message)
            }
        default:
            reader.problem("store", "must be sqlite:PATH, a postgres:// URL or {\"url\": …, \"password\": …} (found \(value.kind))")
        }
        return nil
    }
}

/// `sqlite:PATH` (a relative PATH resolves against the working directory) or a
/// `postgres://` / `postgresql://` URL. `sqlite://…` is refused: it reads like a URL but
/// would name an absolute path, which is rarely what was meant.
/// The value is never echoed: a Postgres URL may carry a password.
func parseStore(_ text: String) -> Result<StoreLocation, ValueProblem> {
    let lowered = text.lowercased()
    if lowered.hasPrefix("sqlite:") {
        let path = String(text.dropFirst("sqlite:".count))
        guard !path.isEmpty, !path.hasPrefix("//"), !containsControlCharacters(path) else {
            return .failure(ValueProblem("must be sqlite:PATH, as in sqlite:data/midtier.sqlite"))
        }
        return .success(.sqlite(path: path))
    }
    if lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://") {
        return parsePostgresURL(text).map(StoreLocation.postgres)
    }
    return .failure(ValueProblem("must be sqlite:PATH or a postgres:// URL"))
}

/// `postgres://user[:password]@host[:port]/database?sslmode=…&sslrootcert=…&host=…`, as libpq
/// reads it: `%`-escapes in the user, password and database; the port defaults to 5432, the
/// database to the user name, `sslmode` to `prefer`; `host=/dir` names a Unix socket
/// directory; and Midtier's own `prepared_statements=on|off` (docs/configuration.md). Other
/// parameters are refused rather than ignored. Messages never echo the URL.
func parsePostgresURL(_ text: String) -> Result<PostgresLocation, ValueProblem> {
    let lowered = text.lowercased()
    guard lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://") else {
        return .failure(ValueProblem("must be a postgres:// URL"))
    }
    guard !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }),
        let components = URLComponents(string: text), components.fragment == nil
    else { return .failure(ValueProblem("is not a valid postgres:// URL")) }
    var host = components.host.map { $0.hasPrefix("[") && $0.hasSuffix("]") ? String($0.dropFirst().dropLast()) : $0 } ?? ""
    var tls = PostgresLocation.TLSMode.prefer
    var rootCertificatePath: String?
    var preparedStatements = true
    for item in components.queryItems ?? [] {
        let value = item.value ?? ""
        switch item.name {
        case "sslmode":
            guard let mode = PostgresLocation.TLSMode(rawValue: value) else {
                return .failure(ValueProblem("sslmode must be one of \(PostgresLocation.TLSMode.allCases.map(\.rawValue).joined(separator: ", "))"))
            }
            tls = mode
        case "sslrootcert":
            guard !value.isEmpty else { return .failure(ValueProblem("sslrootcert must name a PEM file")) }
            rootCertificatePath = value
        case "host":
            guard value.hasPrefix("/") else { return .failure(ValueProblem("the host parameter must name a socket directory (starting with /)")) }
            host = value
        case "prepared_statements":
            switch value {
            case "on": preparedStatements = true
            case "off": preparedStatements = false
            default: return .failure(ValueProblem("prepared_statements must be on or off"))
            }
        default:
            return .failure(
                ValueProblem("unknown parameter \(item.name) (Midtier takes sslmode, sslrootcert, host and prepared_statements)"))
        }
    }
    guard !host.isEmpty else { return .failure(ValueProblem("must name a host, or a socket directory with ?host=/path")) }
    let user = components.user.flatMap { $0.removingPercentEncoding } ?? ""
    guard !user.isEmpty else { return .failure(ValueProblem("must name a user, as in postgres://midtier@db.example/midtier")) }
    if let port = components.port, !(1...65535).contains(port) { return .failure(ValueProblem("port must be 1 to 65535")) }
    var database = components.path
    if database.hasPrefix("/") { database.removeFirst() }
    guard !database.contains("/"), let decoded = database.removingPercentEncoding else {
        return .failure(ValueProblem("the path must be one database name"))
    }
    if (tls == .verifyCA || tls == .verifyFull) == false, rootCertificatePath != nil {
        return .failure(ValueProblem("sslrootcert needs sslmode verify-ca or verify-full"))
    }
    return .success(
        PostgresLocation(
            host: host, port: components.port ?? 5432, user: user,
            password: components.password.flatMap { $0.removingPercentEncoding },
            database: decoded.isEmpty ? user : decoded, tls: tls, rootCertificatePath: rootCertificatePath,
            preparedStatements: preparedStatements))
}

extension StoreLocation {
    /// A `store` value in its string form (`sqlite:PATH` or a `postgres://` URL); nil when it
    /// is not one.
    package init?(_ text: String) {
        guard case .success(let location) = parseStore(text) else { return nil }
        self = location
    }
}
