import Foundation

/// The resource path of a request (the part after `/odata/v2/`), split into segments such as
/// `EmployeePayrollRunResults(externalCode='X',mdfSystemEffectiveStartDate=datetime'1900-01-01T00:00:00')`,
/// `userIdNav` or `$count`.
struct ODataPathSegment: Sendable {
    let name: String
    /// The text between the parentheses, if any.
    let keyPredicate: String?

    /// Splits a raw (percent-encoded) path on `/` and decodes each segment.
    static func parse(_ rawPath: String) throws(ODataError) -> [ODataPathSegment] {
        var segments: [ODataPathSegment] = []
        for raw in rawPath.split(separator: "/", omittingEmptySubsequences: false) {
            guard let text = String(raw).removingPercentEncoding else {
                throw .badRequest("Malformed resource path: '\(raw)' has an invalid percent-encoding.")
            }
            guard let open = text.firstIndex(of: "(") else {
                guard !text.isEmpty else { throw .badRequest("Malformed resource path '\(rawPath)': empty segment.") }
                segments.append(ODataPathSegment(name: text, keyPredicate: nil))
                continue
            }
            guard text.last == ")", open > text.startIndex else {
                throw .badRequest("Malformed resource path segment '\(text)': expected Name(key).")
            }
            let predicate = text[text.index(after: open)..<text.index(before: text.endIndex)]
            segments.append(ODataPathSegment(name: String(text[..<open]), keyPredicate: String(predicate)))
        }
        return segments
    }

    /// Parses a key predicate for `type`: `'100001'` for a single key, or `name=value,…` naming
    /// every key property. Values must have the key property's type.
    static func key(_ predicate: String, for type: ODataEntityType) throws(ODataError) -> [String: ODataValue] {
        let tokens = try ODataLexer.tokenize(predicate, option: "key predicate of \(type.name)")
        let kinds = tokens.map(\.kind)
        var values: [String: ODataValue] = [:]
        if kinds.count == 2, case .literal(let value) = kinds[0] {
            guard type.keys.count == 1, let name = type.keys.first, let property = type.property(named: name) else {
                throw .badRequest(
                    "Entity \(type.name) expects a complex key but a single-valued key [\(predicate)] is used; "
                        + "name every key: " + type.keys.map { "\($0)=…" }.joined(separator: ",") + ".")
            }
            values[name] = try convert(value, to: property, in: type)
            return values
        }
        var index = 0
        while true {
            guard index + 2 < kinds.count, case .identifier(let name) = kinds[index], kinds[index + 1] == .equals,
                case .literal(let value) = kinds[index + 2]
            else {
                throw .badRequest("Malformed key predicate (\(predicate)) for \(type.name): expected name=value pairs.")
            }
            guard type.keys.contains(name), let property = type.property(named: name) else {
                throw .badRequest("Malformed key predicate (\(predicate)): \(name) is not a key property of \(type.name).")
            }
            guard values[name] == nil else {
                throw .badRequest("Malformed key predicate (\(predicate)): \(name) is given twice.")
            }
            values[name] = try convert(value, to: property, in: type)
            index += 3
            let next = index < kinds.count ? kinds[index] : .end
            if next == .end { break }
            guard next == .comma else {
                throw .badRequest("Malformed key predicate (\(predicate)) for \(type.name): expected ',' between keys.")
            }
            index += 1
        }
        let missing = type.keys.filter { values[$0] == nil }
        guard missing.isEmpty else {
            throw .badRequest(
                "Malformed key predicate (\(predicate)): \(type.name) needs all its keys; missing "
                    + missing.joined(separator: ", ") + ".")
        }
        return values
    }

    private static func convert(
        _ value: ODataValue, to property: ODataProperty, in type: ODataEntityType
    ) throws(ODataError) -> ODataValue {
        switch (property.type, value) {
        case (.string, .string), (.int64, .int64), (.dateTime, .dateTime), (.dateTime, .dateTimeOffset):
            return value
        case (.dateTime, .string(let text)):
            if let ms = ODataDate.parse(text) { return .dateTime(ms) }
        default:
            break
        }
        let example: String
        switch property.type {
        case .string: example = "'text'"
        case .int64: example = "12L"
        case .dateTime, .dateTimeOffset: example = "datetime'2024-01-31T00:00:00'"
        case .boolean: example = "true"
        case .decimal: example = "1.5M"
        }
        throw .badRequest(
            "Malformed key predicate for \(type.name): \(property.name) is \(property.type.rawValue), write it like \(example).")
    }
}
