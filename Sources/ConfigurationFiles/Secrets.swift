import MidtierCore
import MidtierJSON

// Secrets (`Password`, `signingKeyPassphrase`): inline, `{"env": "VAR"}` or `{"file": "path"}`.

extension ConfigurationLoader {
    /// Resolves a secret. Problems about the secret's shape name the inner key
    /// (`Password.env`); a variable that is not set or a file that cannot be read is a
    /// problem of the secret itself (`Password`). The value never appears in a message.
    ///
    /// An empty secret (inline, from the environment or from the file) is refused: it is
    /// almost always a variable or file that was not filled in.
    func secret(_ reader: ObjectReader, _ name: String, required: Bool, requiredBecause reason: String? = nil) -> String? {
        guard let value = reader.value(name, required: required, requiredBecause: reason) else { return nil }
        return secret(value, path: reader.key(name), problems: reader.problems)
    }

    /// Resolves a secret given as `value` at key path `path` (an array element, say).
    func secret(_ value: JSON, path keyPath: String, problems: FileProblems) -> String? {
        switch value {
        case .string(let inline):
            guard !inline.isEmpty else {
                problems.add(keyPath, "must not be empty")
                return nil
            }
            return inline
        case .object:
            guard let source = ObjectReader.make(value, path: keyPath, problems: problems) else { return nil }
            let variable = source.string("env")
            let path = source.string("file")
            source.reportUnknownKeys()
            switch (source.contains("env"), source.contains("file")) {
            case (true, true):
                problems.add(keyPath, "give either env or file, not both")
                return nil
            case (false, false):
                problems.add(keyPath, "must be a string, {\"env\": \"VAR\"} or {\"file\": \"path\"}")
                return nil
            default:
                break
            }
            if let variable {
                guard let resolved = environment[variable] else {
                    problems.add(keyPath, "environment variable \(variable) is not set")
                    return nil
                }
                guard !resolved.isEmpty else {
                    problems.add(keyPath, "environment variable \(variable) is empty")
                    return nil
                }
                return resolved
            }
            if let path {
                switch readFile(path) {
                case .failure(let error):
                    problems.add(keyPath, "cannot read secret file \(path): \(error.message)")
                    return nil
                case .success(let bytes):
                    guard var text = utf8Text(bytes) else {
                        problems.add(keyPath, "secret file \(path) is not UTF-8 text")
                        return nil
                    }
                    // Files written with `echo` or an editor end in a line break that is not
                    // part of the secret.
                    while text.hasSuffix("\n") || text.hasSuffix("\r") || text.hasSuffix("\r\n") { text.removeLast() }
                    guard !text.isEmpty else {
                        problems.add(keyPath, "secret file \(path) is empty")
                        return nil
                    }
                    return text
                }
            }
            return nil
        default:
            problems.add(keyPath, "must be a string, {\"env\": \"VAR\"} or {\"file\": \"path\"} (found \(value.kind))")
            return nil
        }
    }
}
