import MidtierCore
import MidtierJSON

/// Reads the members of one JSON object by key, records a problem with the key path for
/// every wrong type or missing required key, and remembers which keys were read so that
/// `reportUnknownKeys()` can name the rest.
///
/// Values are not quoted in messages (any of them might be a secret pasted in the wrong
/// place), except names that are not secrets: destination names, user ids, paths of files,
/// names of environment variables.
final class ObjectReader {
    /// Key path of this object (`""` for the top level of a file).
    let path: String
    let problems: FileProblems
    private let members: [JSONMember]
    /// Members by key, so that a file with very many keys is still read in linear time.
    private let index: [String: JSON]
    /// Keys this reader was asked about (present or not): any other key is unknown.
    private var known = Set<String>()
    /// The fixed key names among `known` (not `URL.headers.<name>` and the like), for hints.
    private var named = Set<String>()

    init(path: String, members: [JSONMember], problems: FileProblems) {
        self.path = path
        self.members = members
        self.problems = problems
        // The parser keeps only the first of duplicate keys, so keys are unique here.
        self.index = Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// A reader for `value`, or a problem at `path` if it is not an object.
    static func make(_ value: JSON, path: String, problems: FileProblems) -> ObjectReader? {
        guard case .object(let members) = value else {
            problems.add(path, "must be an object (found \(value.kind))")
            return nil
        }
        return ObjectReader(path: path, members: members, problems: problems)
    }

    /// The key path of one member.
    func key(_ name: String) -> String { keyPath(path, name) }

    /// All keys present, in file order.
    var keys: [String] { members.map { $0.key } }

    func contains(_ name: String) -> Bool { index[name] != nil }

    /// Marks keys as accepted without reading them (keys a pasted BTP destination carries for
    /// another authentication type).
    func accept(_ names: [String]) {
        known.formUnion(names)
        named.formUnion(names)
    }

    /// Records a problem on one member.
    func problem(_ name: String, _ message: String) {
        problems.add(key(name), message)
    }

    /// The raw value of a member, marking it as known. A missing required key is a problem.
    /// `dynamic` marks a key whose name is data (`URL.headers.<name>`), never offered as a hint.
    func value(_ name: String, required: Bool = false, requiredBecause reason: String? = nil, dynamic: Bool = false) -> JSON? {
        known.insert(name)
        if !dynamic { named.insert(name) }
        guard let value = index[name] else {
            if required { problem(name, "missing required key" + (reason.map { " (\($0))" } ?? "")) }
            return nil
        }
        return value
    }

    /// A string member. Empty strings are refused unless `allowEmpty`.
    func string(
        _ name: String, required: Bool = false, requiredBecause reason: String? = nil,
        allowEmpty: Bool = false, dynamic: Bool = false
    ) -> String? {
        guard let value = value(name, required: required, requiredBecause: reason, dynamic: dynamic) else { return nil }
        guard case .string(let string) = value else {
            problem(name, "must be a string (found \(value.kind))")
            return nil
        }
        if string.isEmpty && !allowEmpty {
            problem(name, "must not be empty")
            return nil
        }
        return string
    }

    /// A string member that must be one of `choices`.
    func choice(_ name: String, _ choices: [String], required: Bool = false) -> String? {
        guard let string = string(name, required: required, allowEmpty: true) else { return nil }
        guard choices.contains(string) else {
            problem(name, "must be one of " + choices.map { "\"\($0)\"" }.joined(separator: ", "))
            return nil
        }
        return string
    }

    /// A whole number in `range`, written as a JSON number or as a string of digits (as a
    /// pasted BTP destination carries it, e.g. `"timeout": "30000"`).
    func integer(_ name: String, in range: ClosedRange<Int>, required: Bool = false) -> Int? {
        guard let value = value(name, required: required) else { return nil }
        let expectation =
            range.upperBound == Int.max
            ? "must be a whole number of at least \(range.lowerBound)"
            : "must be a whole number from \(range.lowerBound) to \(range.upperBound)"
        let text: String
        switch value {
        case .number(let literal): text = literal
        case .string(let string): text = string
        default:
            problem(name, "\(expectation) (found \(value.kind))")
            return nil
        }
        guard let number = parseInteger(text), range.contains(number) else {
            problem(name, expectation)
            return nil
        }
        return number
    }

    /// A number from 0 to 1 (a share), written as a JSON number, as `0.05` or `1`.
    func fraction(_ name: String, required: Bool = false) -> Double? {
        guard let value = value(name, required: required) else { return nil }
        guard case .number(let literal) = value, let number = Double(literal), number.isFinite, (0...1).contains(number) else {
            let found = if case .number = value { "a number outside 0 to 1" } else { value.kind }
            problem(name, "must be a number from 0 to 1, as 0.05 (found \(found))")
            return nil
        }
        return number
    }

    /// A boolean, written as JSON `true`/`false` or as the string `"true"`/`"false"` (any
    /// letter case), as a pasted BTP destination carries it.
    func bool(_ name: String, required: Bool = false) -> Bool? {
        guard let value = value(name, required: required) else { return nil }
        switch value {
        case .bool(let bool):
            return bool
        case .string(let string) where string.lowercased() == "true":
            return true
        case .string(let string) where string.lowercased() == "false":
            return false
        default:
            problem(name, "must be true or false (found \(value.kind))")
            return nil
        }
    }

    /// A nested object.
    func object(_ name: String, required: Bool = false, requiredBecause reason: String? = nil) -> ObjectReader? {
        guard let value = value(name, required: required, requiredBecause: reason) else { return nil }
        return ObjectReader.make(value, path: key(name), problems: problems)
    }

    /// An array, as (key path, element) pairs.
    func array(_ name: String, required: Bool = false) -> [(path: String, value: JSON)]? {
        guard let value = value(name, required: required) else { return nil }
        guard case .array(let elements) = value else {
            problem(name, "must be an array (found \(value.kind))")
            return nil
        }
        return elements.enumerated().map { (keyPath(key(name), index: $0.offset), $0.element) }
    }

    /// A free-form object kept as given (`passwordPolicy`, `logSettings`, `discovery`).
    func freeObject(_ name: String) -> [String: JSON]? {
        guard let value = value(name) else { return nil }
        guard case .object(let members) = value else {
            problem(name, "must be an object (found \(value.kind))")
            return nil
        }
        guard checkedJSON(value, path: key(name), problems: problems) != nil else { return nil }
        return Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// Records "unknown key" for every member that was neither read nor accepted.
    func reportUnknownKeys() {
        let candidates = named.sorted()
        for name in keys where !known.contains(name) {
            if let hint = closestKey(to: name, among: candidates) {
                problem(name, "unknown key (did you mean \"\(hint)\"?)")
            } else {
                problem(name, "unknown key")
            }
        }
    }

    /// The candidate that differs from `name` only in letter case or by at most two edits
    /// (a typo), for a hint.
    private func closestKey(to name: String, among candidates: [String]) -> String? {
        let lowered = name.lowercased()
        if let sameLetters = candidates.first(where: { $0.lowercased() == lowered }) {
            return sameLetters
        }
        let limit = min(2, name.count / 3)
        return
            candidates
            .filter { abs($0.count - name.count) <= limit }
            .map { (key: $0, distance: editDistance($0.lowercased(), lowered)) }
            .filter { $0.distance <= limit }
            .min { $0.distance < $1.distance }?.key
    }
}

/// Levenshtein distance between two short texts.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var row = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = row
    }
    return previous[b.count]
}

/// A whole number from its decimal text (an optional `-` and digits only).
func parseInteger(_ text: String) -> Int? {
    let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
    guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    return Int(text)
}

/// Checks a value kept as given in the model: every number that no `Double` holds (such as
/// `1e999`) is a problem at its key path, since clients could not read it. Every member is
/// checked, so that every such problem is reported. The value itself is kept as written.
func checkedJSON(_ value: JSON, path: String, problems: FileProblems) -> JSON? {
    var stack: [PathComponent] = [.key(path)]
    return checkNumbers(value, stack: &stack, problems: problems) ? value : nil
}

private func checkNumbers(_ value: JSON, stack: inout [PathComponent], problems: FileProblems) -> Bool {
    switch value {
    case .null, .bool, .string:
        return true
    case .number(let literal):
        guard let number = Double(literal), number.isFinite else {
            problems.add(keyPath(stack), "number is too large")
            return false
        }
        return true
    case .array(let elements):
        var complete = true
        for (index, element) in elements.enumerated() {
            stack.append(.index(index))
            if !checkNumbers(element, stack: &stack, problems: problems) { complete = false }
            stack.removeLast()
        }
        return complete
    case .object(let members):
        var complete = true
        for member in members {
            stack.append(.key(member.key))
            if !checkNumbers(member.value, stack: &stack, problems: problems) { complete = false }
            stack.removeLast()
        }
        return complete
    }
}
