import MidtierCore
import MidtierJSON

// `config/users.json`: `{"users":[{"id":..,"passwordHash":..,"attributes":{"k":"v"}}]}`.

extension ConfigurationLoader {
    /// Reads the local users. Ids are unique (exactly, letter case counts), non-empty, and
    /// free of `:` and control characters, because HTTP Basic could never carry them.
    /// Attribute values are strings; numbers are accepted and kept as written.
    func loadUsers(_ reader: ObjectReader) -> [String: LocalUser]? {
        guard let elements = reader.array("users", required: true) else {
            reader.reportUnknownKeys()
            return nil
        }
        var users: [String: LocalUser] = [:]
        var seenIds = Set<String>()
        for (path, element) in elements {
            guard let entry = ObjectReader.make(element, path: path, problems: reader.problems) else { continue }
            let id = entry.string("id", required: true)
            if let id {
                if id.contains(":") || StoredText.hasControlCharacters(id) {
                    entry.problem("id", "must not contain ':' or control characters (HTTP Basic cannot carry them)")
                } else if !seenIds.insert(id).inserted {
                    entry.problem("id", "duplicate user id \"\(id)\"")
                }
            }
            let hash = entry.string("passwordHash", required: true)
            if let hash, !isBcryptHash(hash) {
                entry.problem("passwordHash", "must be a bcrypt hash from `midtier hash-secret` ($2a$, $2b$ or $2y$, 60 characters)")
            }
            var attributes: [String: String] = [:]
            if let object = entry.object("attributes") {
                for name in object.keys {
                    switch object.value(name) {
                    case .string(let text)?: attributes[name] = text
                    case .number(let literal)?: attributes[name] = literal
                    case let value?: object.problem(name, "must be a string (found \(value.kind))")
                    case nil: break
                    }
                }
            }
            entry.reportUnknownKeys()
            if let id, let hash, entry.problems.isEmpty {
                users[id] = LocalUser(id: id, passwordHash: hash, attributes: attributes)
            }
        }
        reader.reportUnknownKeys()
        return users
    }
}
