// `config/midtier.json`.

import Foundation

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

        if let text = reader.string("store") {
            switch parseStore(text) {
            case .success(let store): settings.store = store
            case .failure(let problem): reader.problem("store", problem.message)
            }
        }

        if let elements = reader.array("adminTokenHashes") {
            var hashes: [String] = []
            for (path, value) in elements {
                guard case .string(let hash) = value else {
                    reader.problems.add(path, "must be a string (found \(value.kind))")
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

        reader.reportUnknownKeys()
        return settings
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
        guard !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }),
              let components = URLComponents(string: text),
              !(components.host ?? "").isEmpty || components.query != nil  // host, or ?host=/socket/dir
        else { return .failure(ValueProblem("is not a valid postgres:// URL")) }
        return .success(.postgres(url: text))
    }
    return .failure(ValueProblem("must be sqlite:PATH or a postgres:// URL"))
}
