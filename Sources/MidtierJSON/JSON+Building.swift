/// Building and reading ``JSON`` values in code: literals for answers, typed constructors, and
/// member lookup by a key's exact bytes.
extension JSON: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    package init(stringLiteral value: String) { self = .string(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(integerLiteral value: Int) { self = .number(String(value)) }
    package init(arrayLiteral elements: JSON...) { self = .array(elements) }
    /// Members in the order written.
    package init(dictionaryLiteral members: (String, JSON)...) { self = .object(members.map { JSONMember(key: $0.0, value: $0.1) }) }
    package init(nilLiteral: ()) { self = .null }
}

extension JSON {
    /// An integer.
    package static func number(_ value: Int64) -> JSON { .number(String(value)) }

    /// A finite number; an infinity or a NaN (which JSON cannot write) is `null`.
    package static func number(_ value: Double) -> JSON {
        guard value.isFinite else { return .null }
        // `Double.description` writes integral values as `15.0`, which JSON reads as 15.
        return .number(value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value))
    }

    /// A string, or `null` for nil.
    package static func string(_ value: String?) -> JSON { value.map(JSON.string) ?? .null }

    /// A value mapped to JSON, or `null` for nil.
    package static func optional<T>(_ value: T?, _ transform: (T) -> JSON) -> JSON { value.map(transform) ?? .null }

    /// An array of strings.
    package static func strings(_ values: some Sequence<String>) -> JSON { .array(values.map(JSON.string)) }

    /// The value of the member whose key has exactly these bytes (the first, if the object has it
    /// twice); nil for a missing key or a value that is not an object.
    package subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key.utf8.elementsEqual(key.utf8) }?.value
    }

    /// The value with every object's members sorted by key (by their UTF-8 bytes), at every
    /// level, so that the same value always gives the same text.
    package var sortedByKey: JSON {
        switch self {
        case .null, .bool, .number, .string: self
        case .array(let values): .array(values.map(\.sortedByKey))
        case .object(let members):
            .object(
                members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { JSONMember(key: $0.key, value: $0.value.sortedByKey) })
        }
    }

    /// How deep objects and arrays nest in the value: 0 for a scalar, 1 for an object or array
    /// of scalars (or none). Recursive: for values of the strict reader, which bounds nesting
    /// (``StrictJSON/maximumDepth``), or built by Midtier.
    package var nestingDepth: Int {
        switch self {
        case .null, .bool, .number, .string: 0
        case .array(let values): 1 + values.reduce(0) { max($0, $1.nestingDepth) }
        case .object(let members): 1 + members.reduce(0) { max($0, $1.value.nestingDepth) }
        }
    }

    /// The members of an object; nil for any other value.
    package var members: [JSONMember]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// The text of a string value; nil for any other value.
    package var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// A boolean value; nil for any other value.
    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// A number as a `Double`; nil for any other value or a number no `Double` holds.
    package var doubleValue: Double? {
        guard case .number(let text) = self, let value = Double(text), value.isFinite else { return nil }
        return value
    }
}

/// ``JSON`` through `Codable`, for values inside other decoded documents (a JWT's claims).
/// Numbers keep their value: integers as integers, others as the shortest `Double` text.
extension JSON: Codable {
    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .number(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON].self) {
            self = .array(value)
        } else {
            self = .sortedObject(try container.decode([String: JSON].self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let text):
            if let integer = Int64(text) { try container.encode(integer) } else { try container.encode(Double(text) ?? 0) }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let members):
            try container.encode(Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first }))
        }
    }
}
