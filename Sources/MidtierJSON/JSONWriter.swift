/// Writing a ``JSON`` value as text, for answers that must come out in a given shape (the
/// SuccessFactors sandbox's OData answers: `__metadata` first, then properties in `$metadata`
/// order).
///
/// The text is compact (no whitespace), object members keep their order, numbers are written as
/// their text, and strings are escaped as RFC 8259 requires: `"` and `\` with a backslash, line
/// feed, carriage return and tab as `\n`, `\r`, `\t`, every other control character
/// (U+0000–U+001F) as `\u00xx`; everything else, `/` and non-ASCII included, as it is.
extension JSON {
    package func serialized() -> String {
        var output = ""
        write(to: &output, indent: nil)
        return output
    }

    /// The same text laid out for people: one member or element per line, indented by two
    /// spaces, `"key": value`. For files people open (the console's onboarding download).
    package func prettyPrinted() -> String {
        var output = ""
        write(to: &output, indent: "")
        return output + "\n"
    }

    /// An object from `"key": value` pairs, in the order written.
    package static func object(_ members: KeyValuePairs<String, JSON>) -> JSON {
        .object(members.map { JSONMember(key: $0.key, value: $0.value) })
    }

    /// An object from a dictionary, members sorted by key (by their UTF-8 bytes), so that the
    /// same members always give the same text.
    package static func sortedObject(_ members: [String: JSON]) -> JSON {
        .object(members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { JSONMember(key: $0.key, value: $0.value) })
    }

    /// An integer. (`.number(text)` is written as it is, so its text must be a JSON number.)
    package static func number(_ value: Int) -> JSON {
        .number(String(value))
    }

    /// `indent` is the current line's indentation when pretty-printing, nil for compact text.
    private func write(to output: inout String, indent: String?) {
        switch self {
        case .null:
            output += "null"
        case .bool(let value):
            output += value ? "true" : "false"
        case .number(let text):
            output += text
        case .string(let text):
            Self.writeString(text, to: &output)
        case .array(let elements):
            output += "["
            let inner = indent.map { $0 + "  " }
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                if let inner { output += "\n" + inner }
                element.write(to: &output, indent: inner)
            }
            if let indent, !elements.isEmpty { output += "\n" + indent }
            output += "]"
        case .object(let members):
            output += "{"
            let inner = indent.map { $0 + "  " }
            for (index, member) in members.enumerated() {
                if index > 0 { output += "," }
                if let inner { output += "\n" + inner }
                Self.writeString(member.key, to: &output)
                output += indent == nil ? ":" : ": "
                member.value.write(to: &output, indent: inner)
            }
            if let indent, !members.isEmpty { output += "\n" + indent }
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
            case "\u{00}"..."\u{1F}":
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
