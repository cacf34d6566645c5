import MidtierCore
import MidtierJSON

// `config/push-senders.json` (docs/configuration.md; docs/push.md):
// `{"senders":[{"name":..,"passwordHash":..,"apiKeyHash":..,"oauth":{..},"apps":[..]}]}`.

extension ConfigurationLoader {
    /// Reads the back-end senders of push notifications, in file order. Names are unique
    /// (by their bytes, as user ids are), non-empty, and free of `:` and control characters,
    /// because HTTP Basic could never carry them. Each sender names at least one app, and
    /// every app it names has a file in `apps/` (`appIDs`, the file names without `.json`,
    /// whether or not that file loaded: a broken app file is reported on its own).
    func loadPushSenders(_ reader: ObjectReader, appIDs: Set<ExactString>) -> [PushSender] {
        guard let elements = reader.array("senders", required: true) else {
            reader.reportUnknownKeys()
            return []
        }
        var senders: [PushSender] = []
        var seenNames = Set<ExactString>()
        var seenKeys = Set<[UInt8]>()
        var seenClients: [PushSenderOAuth] = []
        for (path, element) in elements {
            guard let entry = ObjectReader.make(element, path: path, problems: reader.problems) else { continue }
            let before = reader.problems.problems.count
            var name = entry.string("name", required: true)
            if let text = name {
                if text.contains(":") || StoredText.hasControlCharacters(text) {
                    entry.problem("name", "must not contain ':' or control characters (HTTP Basic cannot carry them)")
                    name = nil
                } else if !seenNames.insert(ExactString(text)).inserted {
                    entry.problem("name", "duplicate sender name \"\(text)\"")
                }
            }
            let hash = entry.string("passwordHash", required: false)
            if let hash, !isBcryptHash(hash) {
                entry.problem("passwordHash", "must be a bcrypt hash from `midtier hash-secret` ($2a$, $2b$ or $2y$, 60 characters)")
            }
            var apiKeyDigest: [UInt8]?
            if let text = entry.string("apiKeyHash", required: false) {
                apiKeyDigest = Self.sha256Digest(text)
                if apiKeyDigest == nil {
                    entry.problem("apiKeyHash", "must be `sha256:` and 64 hex digits, from `midtier hash-secret --api-key`")
                } else if let digest = apiKeyDigest, !seenKeys.insert(digest).inserted {
                    entry.problem("apiKeyHash", "is another sender's API key too; each sender needs its own")
                }
            }
            var oauth: PushSenderOAuth?
            if let object = entry.object("oauth") {
                oauth = senderOAuth(object)
                if let found = oauth {
                    if seenClients.contains(where: { $0.hasSameBytes(as: found) }) {
                        entry.problem(
                            "oauth", "is another sender's OAuth client too (the same issuer, audience and clientId); each sender needs its own")
                    }
                    seenClients.append(found)
                }
            }
            if !entry.contains("passwordHash") && !entry.contains("apiKeyHash") && !entry.contains("oauth") {
                entry.problem("passwordHash", "is required unless the sender has an apiKeyHash or oauth (one of them, or several)")
            }
            var apps: [String] = []
            if let appElements = entry.array("apps", required: true) {
                if appElements.isEmpty {
                    entry.problem("apps", "must name at least one app the sender may send to")
                }
                var seenApps = Set<ExactString>()
                for (appPath, value) in appElements {
                    guard case .string(let app) = value else {
                        reader.problems.add(appPath, "must be an app id (found \(value.kind))")
                        continue
                    }
                    let sender = name.map { "sender \"\($0)\"" } ?? "this sender"
                    if !appIDs.contains(ExactString(app)) {
                        reader.problems.add(appPath, "\(sender) names app \(quoted(app)), but there is no such app (no file of that name in apps/)")
                    } else if !seenApps.insert(ExactString(app)).inserted {
                        reader.problems.add(appPath, "\(sender) names app \(quoted(app)) twice")
                    } else {
                        apps.append(app)
                    }
                }
            }
            entry.reportUnknownKeys()
            if let name, reader.problems.problems.count == before {
                senders.append(PushSender(name: name, passwordHash: hash, apiKeyDigest: apiKeyDigest, oauth: oauth, apps: apps))
            }
        }
        reader.reportUnknownKeys()
        return senders
    }

    /// `oauth`: `{"issuer":..,"audience":..,"jwks":{"file":..}|{"url":..},"clientId":..,
    /// "clientClaim":..}` (`clientClaim` optional, default `client_id`, the claim RFC 9068 names
    /// the client by), checked as a JWT app's `authentication` is.
    private func senderOAuth(_ object: ObjectReader) -> PushSenderOAuth? {
        let reason = "needed for oauth"
        let issuer = object.string("issuer", required: true, requiredBecause: reason)
        let audience = object.string("audience", required: true, requiredBecause: reason)
        let clientID = object.string("clientId", required: true, requiredBecause: reason)
        let clientClaim = object.string("clientClaim") ?? "client_id"
        let jwks = object.object("jwks", required: true, requiredBecause: reason).flatMap(jwksSource)
        for (key, value) in [("issuer", issuer), ("audience", audience), ("clientId", clientID), ("clientClaim", clientClaim)] {
            if let value, StoredText.hasControlCharacters(value) {
                object.problem(key, "must not contain control characters")
            }
        }
        object.reportUnknownKeys()
        guard let issuer, let audience, let clientID, let jwks, !object.problems.has(under: object.path) else { return nil }
        return PushSenderOAuth(
            token: JWTAuthentication(issuer: issuer, audience: audience, jwks: jwks, userClaim: clientClaim), clientID: clientID)
    }

    /// The 32 bytes of `sha256:` and 64 hex digits; nil for anything else.
    static func sha256Digest(_ text: String) -> [UInt8]? {
        guard text.hasPrefix("sha256:"), let bytes = Hex.decode(text.dropFirst(7)), bytes.count == 32 else { return nil }
        return bytes
    }

    /// An app id in a message: in quotes, control characters escaped (a name that is not an
    /// app's may hold anything).
    private func quoted(_ text: String) -> String {
        StoredText.hasControlCharacters(text) ? String(reflecting: text) : "\"\(text)\""
    }
}
