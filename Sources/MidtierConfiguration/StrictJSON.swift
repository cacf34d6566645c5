/// Strict JSON (RFC 8259) for request bodies as well as configuration files: no trailing
/// commas, no single quotes, no duplicate keys, bounded nesting, and an error that says where.
/// (Foundation's `JSONSerialization` accepts some of these.)
public enum StrictJSON {
    /// The members of a JSON object document; a message saying what is wrong otherwise.
    public static func object(_ bytes: [UInt8]) -> Result<[String: JSONValue], StrictJSONError> {
        let (value, duplicates, error) = JSONParser.parse(bytes)
        if let error { return .failure(StrictJSONError(message: error)) }
        if let duplicate = duplicates.first { return .failure(StrictJSONError(message: "the key \(duplicate) appears twice")) }
        guard case .object(let members)? = value else {
            return .failure(StrictJSONError(message: "the document is \(value?.kind ?? "empty"), not an object"))
        }
        return .success(Dictionary(members.map { ($0.key, convert($0.value)) }, uniquingKeysWith: { first, _ in first }))
    }

    static func convert(_ json: JSON) -> JSONValue {
        switch json {
        case .null: .null
        case .bool(let value): .bool(value)
        case .number(let text): .number(Double(text) ?? .nan)
        case .string(let value): .string(value)
        case .array(let values): .array(values.map(convert))
        case .object(let members): .object(Dictionary(members.map { ($0.key, convert($0.value)) }, uniquingKeysWith: { first, _ in first }))
        }
    }
}

public struct StrictJSONError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
