/// A JSON value whose objects keep their member order, so answers read like SuccessFactors'
/// (`__metadata` first, then properties in `$metadata` order, then navigation properties).
indirect enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    func serialized() -> String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .null:
            output += "null"
        case .bool(let value):
            output += value ? "true" : "false"
        case .string(let text):
            Self.writeString(text, to: &output)
        case .array(let elements):
            output += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                element.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { output += "," }
                Self.writeString(member.0, to: &output)
                output += ":"
                member.1.write(to: &output)
            }
            output += "}"
        }
    }

    private static func writeString(_ text: String, to output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    output.unicodeScalars.append(scalar)
                }
            }
        }
        output += "\""
    }
}

extension ODataValue {
    /// The OData v2 verbose JSON form SuccessFactors uses: `Edm.Int64` and `Edm.Decimal` as
    /// strings, `Edm.DateTime` as `"/Date(ms)/"`, `Edm.DateTimeOffset` as `"/Date(ms+0000)/"`.
    var json: JSONValue {
        switch self {
        case .null: return .null
        case .string(let text): return .string(text)
        case .boolean(let value): return .bool(value)
        case .int64(let number): return .string(String(number))
        case .decimal(let text): return .string(text)
        case .dateTime(let ms): return .string("/Date(\(ms))/")
        case .dateTimeOffset(let ms): return .string("/Date(\(ms)+0000)/")
        }
    }
}
