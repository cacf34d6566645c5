/// A token of an OData v2 expression (`$filter`, key predicates).
enum ODataToken: Equatable, Sendable {
    /// A name: property, navigation property, operator (`eq`, `and`), `true`/`false`/`null`.
    case identifier(String)
    /// A string, number or typed literal (`'x'`, `42`, `1.5M`, `100L`, `datetime'2024-01-31T00:00:00'`).
    case literal(ODataValue)
    case openParen, closeParen, comma, slash, equals
    case end

    var description: String {
        switch self {
        case .identifier(let name): return "'\(name)'"
        case .literal: return "a literal"
        case .openParen: return "'('"
        case .closeParen: return "')'"
        case .comma: return "','"
        case .slash: return "'/'"
        case .equals: return "'='"
        case .end: return "the end of the expression"
        }
    }
}

/// Splits an expression into tokens. Errors say what is wrong and where (1-based position).
struct ODataLexer {
    struct Token: Sendable {
        let kind: ODataToken
        /// 1-based position in the expression.
        let position: Int
    }

    /// `option` names the query option or path part in messages, e.g. `$filter`.
    static func tokenize(_ text: String, option: String) throws(ODataError) -> [Token] {
        var lexer = ODataLexer(scalars: Array(text.unicodeScalars), option: option)
        return try lexer.run()
    }

    private let scalars: [Unicode.Scalar]
    private let option: String
    private var index = 0

    private init(scalars: [Unicode.Scalar], option: String) {
        self.scalars = scalars
        self.option = option
    }

    private mutating func run() throws(ODataError) -> [Token] {
        var tokens: [Token] = []
        while true {
            while index < scalars.count, scalars[index] == " " || scalars[index] == "\t" { index += 1 }
            let position = index + 1
            guard index < scalars.count else {
                tokens.append(Token(kind: .end, position: position))
                return tokens
            }
            let scalar = scalars[index]
            let kind: ODataToken
            switch scalar {
            case "(": index += 1; kind = .openParen
            case ")": index += 1; kind = .closeParen
            case ",": index += 1; kind = .comma
            case "/": index += 1; kind = .slash
            case "=": index += 1; kind = .equals
            case "'": kind = .literal(.string(try quoted()))
            case "-", "0"..."9": kind = .literal(try number())
            default:
                guard Self.isNameStart(scalar) else {
                    throw .badRequest("Invalid \(option): unexpected character '\(scalar)' at position \(position).")
                }
                let name = identifier()
                if index < scalars.count, scalars[index] == "'" {
                    kind = .literal(try typedLiteral(prefix: name, position: position))
                } else {
                    kind = .identifier(name)
                }
            }
            tokens.append(Token(kind: kind, position: position))
        }
    }

    private static func isNameStart(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_" || scalar == "$"
    }

    private static func isNamePart(_ scalar: Unicode.Scalar) -> Bool {
        isNameStart(scalar) || ("0"..."9").contains(scalar)
    }

    private mutating func identifier() -> String {
        let start = index
        while index < scalars.count, Self.isNamePart(scalars[index]) { index += 1 }
        return String(String.UnicodeScalarView(scalars[start..<index]))
    }

    /// A `'…'` string; `''` stands for one quote.
    private mutating func quoted() throws(ODataError) -> String {
        let start = index + 1
        index += 1
        var text = String.UnicodeScalarView()
        while index < scalars.count {
            if scalars[index] == "'" {
                if index + 1 < scalars.count, scalars[index + 1] == "'" {
                    text.append("'")
                    index += 2
                    continue
                }
                index += 1
                return String(text)
            }
            text.append(scalars[index])
            index += 1
        }
        throw .badRequest("Invalid \(option): the string literal starting at position \(start - 1) has no closing quote.")
    }

    /// `42`, `-7`, `4250.00`, with an optional type suffix: `L` (Int64) or `M` (Decimal). No
    /// exponents and no `D`/`F` (the payroll model has no floating-point properties).
    private mutating func number() throws(ODataError) -> ODataValue {
        let position = index + 1
        let start = index
        if scalars[index] == "-" { index += 1 }
        let digitsStart = index
        while index < scalars.count, ("0"..."9").contains(scalars[index]) { index += 1 }
        guard index > digitsStart else {
            throw .badRequest("Invalid \(option): '-' at position \(position) is not followed by a number.")
        }
        var isInteger = true
        if index < scalars.count, scalars[index] == "." {
            isInteger = false
            index += 1
            let fractionStart = index
            while index < scalars.count, ("0"..."9").contains(scalars[index]) { index += 1 }
            guard index > fractionStart else {
                throw .badRequest("Invalid \(option): the number at position \(position) has no digits after '.'.")
            }
        }
        let text = String(String.UnicodeScalarView(scalars[start..<index]))
        var suffix: Unicode.Scalar?
        if index < scalars.count, "LlMm".unicodeScalars.contains(scalars[index]) {
            suffix = scalars[index]
            index += 1
        }
        if index < scalars.count, Self.isNamePart(scalars[index]) {
            throw .badRequest(
                "Invalid \(option): malformed number at position \(position); write numbers like 42, -7, 4250.00, 12L or 4250.00M.")
        }
        if suffix == "L" || suffix == "l" {
            guard isInteger, let value = Int64(text) else {
                throw .badRequest("Invalid \(option): \(text)L at position \(position) is not a valid Edm.Int64.")
            }
            return .int64(value)
        }
        if suffix == nil, isInteger, let value = Int64(text) {
            return .int64(value)
        }
        guard ODataValue.decimal(text).numericValue != nil else {
            throw .badRequest("Invalid \(option): \(text) at position \(position) is not a valid number.")
        }
        return .decimal(text)
    }

    /// `datetime'2024-01-31T00:00:00'`, `datetimeoffset'2024-01-31T00:00:00Z'`.
    private mutating func typedLiteral(prefix: String, position: Int) throws(ODataError) -> ODataValue {
        let text = try quoted()
        switch prefix.lowercased() {
        case "datetime":
            guard let ms = ODataDate.parse(text) else {
                throw .badRequest(
                    "Invalid \(option): datetime'\(text)' at position \(position) is not a valid date; "
                        + "use datetime'yyyy-mm-ddThh:mm[:ss[.fff]]'.")
            }
            return .dateTime(ms)
        case "datetimeoffset":
            guard let ms = ODataDate.parse(text) else {
                throw .badRequest(
                    "Invalid \(option): datetimeoffset'\(text)' at position \(position) is not a valid date; "
                        + "use datetimeoffset'yyyy-mm-ddThh:mm:ssZ'.")
            }
            return .dateTimeOffset(ms)
        default:
            throw .badRequest(
                "Invalid \(option): literals of type \(prefix)'…' (position \(position)) are not supported; "
                    + "use 'text', numbers, datetime'…' or datetimeoffset'…'.")
        }
    }
}
