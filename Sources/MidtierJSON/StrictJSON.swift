/// Strict JSON (RFC 8259) for request bodies as well as configuration files: no trailing
/// commas, no single quotes, no duplicate keys, bounded nesting, numbers a `Double` holds, and
/// an error that says where. (Foundation's `JSONSerialization` accepts some of these.)
package enum StrictJSON {
    /// The deepest nesting the reader takes (objects and arrays, the outermost counted as 1):
    /// a deeper document is refused before it is built, so no input exhausts the stack.
    package static var maximumDepth: Int { JSONParser.maximumDepth }

    /// A whole document, members kept in order with their exact keys; a message saying what is
    /// wrong otherwise.
    package static func value(_ bytes: [UInt8]) -> Result<JSON, StrictJSONError> {
        let (value, duplicates, error) = JSONParser.parse(bytes)
        if let error { return .failure(StrictJSONError(message: error)) }
        if let duplicate = duplicates.first { return .failure(StrictJSONError(message: "the key \(duplicate) appears twice")) }
        guard let value else { return .failure(StrictJSONError(message: "the document is empty")) }
        if let number = value.firstNumberOutOfRange {
            return .failure(StrictJSONError(message: "the number \(number.prefix(40)) is out of range"))
        }
        return .success(value)
    }

    /// A document that must be an object, as members by name: for request bodies whose members
    /// have fixed names. (Where the keys are the client's own data, use ``value(_:)``, which keeps
    /// them as they were sent.)
    package static func object(_ bytes: [UInt8]) -> Result<[String: JSON], StrictJSONError> {
        switch value(bytes) {
        case .failure(let error): return .failure(error)
        case .success(let value):
            guard let members = value.members else { return .failure(StrictJSONError(message: "the document is \(value.kind), not an object")) }
            return .success(Dictionary(members.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first }))
        }
    }
}

extension JSON {
    /// The text of the first number in the value that no `Double` holds (`1e999`), if any.
    package var firstNumberOutOfRange: String? {
        switch self {
        case .null, .bool, .string: return nil
        case .number(let text): return Double(text).map(\.isFinite) == true ? nil : text
        case .array(let values):
            for value in values { if let found = value.firstNumberOutOfRange { return found } }
            return nil
        case .object(let members):
            for member in members { if let found = member.value.firstNumberOutOfRange { return found } }
            return nil
        }
    }
}

package struct StrictJSONError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}
