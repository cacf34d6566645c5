import MidtierCore
import MidtierJSON

// `config/push-senders.json` (docs/configuration.md; docs/push.md):
// `{"senders":[{"name":..,"passwordHash":..,"apps":[..]}]}`.

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
            let hash = entry.string("passwordHash", required: true)
            if let hash, !isBcryptHash(hash) {
                entry.problem("passwordHash", "must be a bcrypt hash from `midtier hash-secret` ($2a$, $2b$ or $2y$, 60 characters)")
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
            if let name, let hash, reader.problems.problems.count == before {
                senders.append(PushSender(name: name, passwordHash: hash, apps: apps))
            }
        }
        reader.reportUnknownKeys()
        return senders
    }

    /// An app id in a message: in quotes, control characters escaped (a name that is not an
    /// app's may hold anything).
    private func quoted(_ text: String) -> String {
        StoredText.hasControlCharacters(text) ? String(reflecting: text) : "\"\(text)\""
    }
}
