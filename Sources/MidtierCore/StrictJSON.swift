/// Strict JSON (RFC 8259) for request bodies as well as configuration files: no trailing
/// commas, no single quotes, no duplicate keys, bounded nesting, and an error that says where.
/// (Foundation's `JSONSerialization` accepts some of these.)
package enum StrictJSON {
    /// The members of a JSON object document; a message saying what is wrong otherwise.
    package static func object(_ bytes: [UInt8]) -> Result<[String: JSONValue], StrictJSONError> {
        let (value, duplicates, error) = JSONParser.parse(bytes)
        if let error { return .failure(StrictJSONError(message: error)) }
        if let duplicate = duplicates.first { return .failure(StrictJSONError(message: "the key \(duplicate) appears twice")) }
        guard case .object(let members)? = value else {
            return .failure(StrictJSONError(message: "the document is \(value?.kind ?? "empty"), not an object"))
        }
        do {
            return .success(try convert(members))
        } catch {
            return .failure(error)
        }
    }

    /// A parsed value as ``JSONValue``; a number no `Double` holds (`1e999`) is an error, never
    /// an infinity or a NaN.
    static func convert(_ json: JSON) throws(StrictJSONError) -> JSONValue {
        switch json {
        case .null: return .null
        case .bool(let value): return .bool(value)
        case .number(let text):
            guard let number = Double(text), number.isFinite else { throw StrictJSONError(message: "the number \(text.prefix(40)) is out of range") }
            return .number(number)
        case .string(let value): return .string(value)
        case .array(let values):
            var converted: [JSONValue] = []
            for value in values { converted.append(try convert(value)) }
            return .array(converted)
        case .object(let members): return .object(try convert(members))
        }
    }

    private static func convert(_ members: [JSONMember]) throws(StrictJSONError) -> [String: JSONValue] {
        var object: [String: JSONValue] = [:]
        for member in members where object[member.key] == nil { object[member.key] = try convert(member.value) }
        return object
    }
}

package struct StrictJSONError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}
