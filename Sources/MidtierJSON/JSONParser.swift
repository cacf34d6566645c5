/// A small strict JSON parser (RFC 8259) over UTF-8 bytes.
///
/// Written here rather than taken from Foundation so that a syntax error says where it is
/// (line and column), duplicate keys are reported with their key path, numbers keep their
/// text, and nesting is bounded so that no input can exhaust the stack.
package struct JSONParser {
    struct SyntaxError: Error {
        var message: String
    }

    /// Deeper nesting than this is refused; configuration files need a handful of levels.
    static let maximumDepth = 100

    private let bytes: [UInt8]
    private var position = 0
    /// Key paths of keys that appear twice in one object (the first occurrence is kept).
    private(set) var duplicateKeys: [String] = []
    /// Where the parser is, for `duplicateKeys`.
    private var pathStack: [PathComponent] = []

    /// Parses a whole document. On a syntax error, `error` says what and where (line, column).
    package static func parse(_ bytes: [UInt8]) -> (value: JSON?, duplicateKeys: [String], error: String?) {
        guard utf8Text(bytes) != nil else {
            return (nil, [], "the file is not valid UTF-8 text")
        }
        var parser = JSONParser(bytes: bytes)
        // A UTF-8 byte order mark, as some editors write, is skipped.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.position = 3 }
        do throws(SyntaxError) {
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            if parser.position < bytes.count {
                throw parser.error("unexpected characters after the end of the JSON value")
            }
            return (value, parser.duplicateKeys, nil)
        } catch {
            return (nil, [], error.message)
        }
    }

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    private func error(_ what: String) -> SyntaxError {
        // Line and column (in characters) of the current position, both from 1.
        var line = 1
        var column = 1
        for byte in bytes[..<min(position, bytes.count)] {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return SyntaxError(message: "invalid JSON at line \(line), column \(column): \(what)")
    }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 {
            position += 1
        }
    }

    private mutating func expect(_ character: Character) throws(SyntaxError) {
        guard current == character.asciiValue else { throw error("expected '\(character)'") }
        position += 1
    }

    private mutating func parseValue(depth: Int) throws(SyntaxError) -> JSON {
        guard let byte = current else { throw error("unexpected end of file") }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        case UInt8(ascii: "t"): try parseLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try parseLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try parseLiteral("null"); return .null
        default: throw error("expected a value")
        }
    }

    private mutating func parseLiteral(_ word: String) throws(SyntaxError) {
        let expected = Array(word.utf8)
        guard bytes[position...].starts(with: expected) else { throw error("expected a value") }
        position += expected.count
    }

    private mutating func parseObject(depth: Int) throws(SyntaxError) -> JSON {
        guard depth <= Self.maximumDepth else { throw error("nested more than \(Self.maximumDepth) levels deep") }
        position += 1  // {
        var members: [JSONMember] = []
        var seen = Set<String>()
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            if current == UInt8(ascii: "}") { throw error("a comma after the last member is not allowed") }
            guard current == UInt8(ascii: "\"") else { throw error("expected a key in double quotes") }
            let key = try parseString()
            skipWhitespace()
            try expect(":")
            skipWhitespace()
            pathStack.append(.key(key))
            let value = try parseValue(depth: depth)
            if seen.insert(key).inserted {
                members.append(JSONMember(key: key, value: value))
            } else {
                duplicateKeys.append(keyPath(pathStack))
            }
            pathStack.removeLast()
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                position += 1
            } else if current == UInt8(ascii: "}") {
                position += 1
                return .object(members)
            } else {
                throw error("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(SyntaxError) -> JSON {
        guard depth <= Self.maximumDepth else { throw error("nested more than \(Self.maximumDepth) levels deep") }
        position += 1  // [
        var elements: [JSON] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            if current == UInt8(ascii: "]") { throw error("a comma after the last element is not allowed") }
            pathStack.append(.index(elements.count))
            elements.append(try parseValue(depth: depth))
            pathStack.removeLast()
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                position += 1
            } else if current == UInt8(ascii: "]") {
                position += 1
                return .array(elements)
            } else {
                throw error("expected ',' or ']'")
            }
        }
    }

    private mutating func parseNumber() throws(SyntaxError) -> String {
        let start = position
        func digits(_ parser: inout JSONParser) -> Int {
            var count = 0
            while let byte = parser.current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                parser.position += 1
                count += 1
            }
            return count
        }
        if current == UInt8(ascii: "-") { position += 1 }
        if current == UInt8(ascii: "0") {
            position += 1
        } else if digits(&self) == 0 {
            throw error("invalid number")
        }
        if current == UInt8(ascii: ".") {
            position += 1
            guard digits(&self) > 0 else { throw error("invalid number") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard digits(&self) > 0 else { throw error("invalid number") }
        }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    private mutating func parseString() throws(SyntaxError) -> String {
        position += 1  // opening quote
        var result: [UInt8] = []
        while true {
            guard let byte = current else { throw error("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return String(decoding: result, as: UTF8.self)
            case UInt8(ascii: "\\"):
                position += 1
                try parseEscape(into: &result)
            case 0x00..<0x20:
                throw error("control character in a string (write line breaks as \\n)")
            default:
                result.append(byte)
                position += 1
            }
        }
    }

    private mutating func parseEscape(into result: inout [UInt8]) throws(SyntaxError) {
        guard let byte = current else { throw error("unterminated string") }
        position += 1
        switch byte {
        case UInt8(ascii: "\""): result.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): result.append(UInt8(ascii: "\\"))
        case UInt8(ascii: "/"): result.append(UInt8(ascii: "/"))
        case UInt8(ascii: "b"): result.append(0x08)
        case UInt8(ascii: "f"): result.append(0x0C)
        case UInt8(ascii: "n"): result.append(0x0A)
        case UInt8(ascii: "r"): result.append(0x0D)
        case UInt8(ascii: "t"): result.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by an escaped low surrogate.
                guard current == UInt8(ascii: "\\"), position + 1 < bytes.count,
                    bytes[position + 1] == UInt8(ascii: "u")
                else { throw error("unpaired surrogate in \\u escape") }
                position += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate in \\u escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw error("unpaired surrogate in \\u escape")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
            result.append(contentsOf: Array(String(Character(unicode)).utf8))
        default:
            position -= 1
            throw error("invalid escape in a string")
        }
    }

    private mutating func parseHex4() throws(SyntaxError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = current else { throw error("invalid \\u escape") }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid \\u escape")
            }
            value = value * 16 + UInt32(digit)
            position += 1
        }
        return value
    }
}
