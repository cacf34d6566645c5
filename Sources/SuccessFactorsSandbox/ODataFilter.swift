/// A parsed `$filter` expression, before it is checked against the model.
indirect enum ODataExpression: Sendable {
    case literal(ODataValue)
    /// A property path such as `payDate` or `userIdNav/firstName`.
    case path([String], position: Int)
    case and([ODataExpression])
    case or([ODataExpression])
    case not(ODataExpression)
    case comparison(ODataComparison, ODataExpression, ODataExpression)
    /// `x in ('a','b')`, or SuccessFactors' form `x in 'a','b'`: literals only.
    case isIn(ODataExpression, [ODataValue])
}

enum ODataComparison: String, Sendable {
    case eq, ne, gt, ge, lt, le
}

/// Parses the part of OData v2 `$filter` the sandbox's users need (docs/sandbox.md): `eq ne gt
/// ge lt le`, `and or not`, parentheses, `in`, property paths and literals. Functions
/// (`startswith(x,'A')`, `tolower(x)`, …) and arithmetic are refused with a 400 that says so.
///
/// Precedence, loosest first: `or`, `and`, `not`, comparison. (`not a eq b` means
/// `not (a eq b)`, which is what people mean by it.) `and`/`or` chains become one n-ary node and
/// nesting is limited, so no input can exhaust the stack.
struct ODataFilterParser {
    static let maximumNesting = 40

    static func parse(_ text: String) throws(ODataError) -> ODataExpression {
        var parser = ODataFilterParser(tokens: try ODataLexer.tokenize(text, option: "$filter"))
        let expression = try parser.parseOr()
        guard case .end = parser.current.kind else {
            throw parser.unexpected("an operator such as 'and', 'or' or 'eq'")
        }
        return expression
    }

    private let tokens: [ODataLexer.Token]
    private var index = 0
    private var depth = 0

    private init(tokens: [ODataLexer.Token]) {
        self.tokens = tokens
    }

    private var current: ODataLexer.Token { tokens[min(index, tokens.count - 1)] }

    private mutating func advance() { if index < tokens.count - 1 { index += 1 } }

    private func keyword(_ word: String) -> Bool {
        if case .identifier(let name) = current.kind { return name.lowercased() == word }
        return false
    }

    private func unexpected(_ expectation: String) -> ODataError {
        .badRequest(
            "Invalid $filter: expected \(expectation) at position \(current.position), found \(current.kind.description).")
    }

    private mutating func enter() throws(ODataError) {
        depth += 1
        if depth > Self.maximumNesting {
            throw .badRequest("Invalid $filter: the expression is nested too deeply (more than \(Self.maximumNesting) levels).")
        }
    }

    private mutating func expect(_ kind: ODataToken, _ expectation: String) throws(ODataError) {
        guard current.kind == kind else { throw unexpected(expectation) }
        advance()
    }

    private mutating func parseOr() throws(ODataError) -> ODataExpression {
        var operands = [try parseAnd()]
        while keyword("or") {
            advance()
            operands.append(try parseAnd())
        }
        return operands.count == 1 ? operands[0] : .or(operands)
    }

    private mutating func parseAnd() throws(ODataError) -> ODataExpression {
        var operands = [try parseUnary()]
        while keyword("and") {
            advance()
            operands.append(try parseUnary())
        }
        return operands.count == 1 ? operands[0] : .and(operands)
    }

    private mutating func parseUnary() throws(ODataError) -> ODataExpression {
        guard keyword("not") else { return try parseComparison() }
        advance()
        try enter()
        defer { depth -= 1 }
        return .not(try parseUnary())
    }

    private mutating func parseComparison() throws(ODataError) -> ODataExpression {
        let left = try parseOperand()
        if case .identifier(let name) = current.kind, let comparison = ODataComparison(rawValue: name.lowercased()) {
            advance()
            return .comparison(comparison, left, try parseOperand())
        }
        if keyword("in") {
            advance()
            return .isIn(left, try parseInList())
        }
        return left
    }

    /// `('a','b')` or SuccessFactors' unparenthesised `'a','b'`: literals only.
    private mutating func parseInList() throws(ODataError) -> [ODataValue] {
        let parenthesised = current.kind == .openParen
        if parenthesised { advance() }
        var values: [ODataValue] = []
        repeat {
            if !values.isEmpty { advance() }  // ,
            guard let value = literal() else { throw unexpected("a literal in the 'in' list") }
            values.append(value)
        } while current.kind == .comma
        if parenthesised { try expect(.closeParen, "',' or ')' in the 'in' list") }
        return values
    }

    /// A literal token, or `true`, `false`, `null`; nil (nothing consumed) for anything else.
    private mutating func literal() -> ODataValue? {
        let value: ODataValue
        switch current.kind {
        case .literal(let literal): value = literal
        case .identifier("true"): value = .boolean(true)
        case .identifier("false"): value = .boolean(false)
        case .identifier("null"): value = .null
        default: return nil
        }
        advance()
        return value
    }

    private mutating func parseOperand() throws(ODataError) -> ODataExpression {
        if let value = literal() { return .literal(value) }
        let token = current
        switch token.kind {
        case .openParen:
            advance()
            try enter()
            defer { depth -= 1 }
            let inner = try parseOr()
            try expect(.closeParen, "')'")
            return inner
        case .identifier(let name):
            advance()
            if current.kind == .openParen {
                throw .badRequest(
                    "Invalid $filter: \(name)(…) at position \(token.position) is a function call, and the SuccessFactors "
                        + "sandbox does not support functions in $filter; use comparisons (eq, ne, gt, ge, lt, le) "
                        + "combined with and, or, not, parentheses and in.")
            }
            var segments = [name]
            while current.kind == .slash {
                advance()
                guard case .identifier(let next) = current.kind else { throw unexpected("a property name after '/'") }
                segments.append(next)
                advance()
            }
            return .path(segments, position: token.position)
        default:
            throw unexpected("a property, literal or '('")
        }
    }
}
