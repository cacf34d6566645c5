import MidtierCore

/// One problem in one file: printed by `midtier check-config` as "file: key: what is wrong".
package struct ConfigProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path as joined from the configuration directory given, e.g. `config/destinations/sf.json`.
    package var file: String
    /// The key path, e.g. `URL`, `authentication.jwks.file`, `users[2].passwordHash`;
    /// empty for problems with the file as a whole (missing, unreadable, not JSON).
    package var key: String
    /// What is wrong, in plain words. Never contains a secret value.
    package var message: String

    package init(file: String, key: String, message: String) {
        self.file = file
        self.key = key
        self.message = message
    }

    package var description: String { "\(file): \(key): \(message)" }
}

/// Every problem found in one load, across all files.
package struct ConfigurationErrors: Error, Sendable, CustomStringConvertible {
    package var problems: [ConfigProblem]

    package init(problems: [ConfigProblem]) {
        self.problems = problems
    }

    /// One problem per line.
    package var description: String { problems.map(\.description).joined(separator: "\n") }
}

/// Collects the problems of one file while it is read.
final class FileProblems {
    let file: String
    private(set) var problems: [ConfigProblem] = []

    init(file: String) {
        self.file = file
    }

    var isEmpty: Bool { problems.isEmpty }

    /// More problems than this in one file are summed up in one last problem: a file that
    /// wrong needs rewriting, not a longer list, and no input can grow the list without bound.
    static let limit = 1000

    func add(_ key: String, _ message: String) {
        if problems.count < Self.limit {
            problems.append(ConfigProblem(file: file, key: key, message: message))
        } else if problems.count == Self.limit {
            problems.append(ConfigProblem(file: file, key: "", message: "more than \(Self.limit) problems; the rest are not listed"))
        }
    }

    /// Whether a problem was recorded for `key` or for anything below it.
    func has(under key: String) -> Bool {
        problems.contains { $0.key == key || $0.key.hasPrefix(key + ".") || $0.key.hasPrefix(key + "[") }
    }
}
