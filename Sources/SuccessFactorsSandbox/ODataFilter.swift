/// A parsed `$filter` expression, before it is checked against the model.
indirect enum ODataExpression: Sendable {
    case literal(ODataValue)
    /// A property path such as `payDate` or `userIdNav/firstName`.
    case path([String], position: Int)
    case and([ODataExpression])
    case or([ODataExpression])
    case not(ODataExpression)
    case comparison(ODataComparison, ODataExpression, ODataExpression)
    case call(String, [ODataExpression], position: Int)
    /// `x in ('a','b')`, or SuccessFactors' form `x in 'a','b'`.
    case isIn(ODataExpression, [ODataExpression])
}

enum ODataComparison: String, Sendable, CaseIterable {
    case eq, ne, gt, ge, lt, le
}

/// Parses OData v2 `$filter` syntax: `eq ne gt ge lt le`, `and or not`, parentheses, `in`,
/// function calls (`startswith(x,'A')`), property paths, and literals.
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

    /// `('a','b')` or SuccessFactors' unparenthesised `'a','b'` (literals only).
    private mutating func parseInList() throws(ODataError) -> [ODataExpression] {
        var values: [ODataExpression] = []
        if current.kind == .openParen {
            advance()
            values.append(try parseOperand())
            while current.kind == .comma {
                advance()
                values.append(try parseOperand())
            }
            try expect(.closeParen, "',' or ')' in the 'in' list")
            return values
        }
        repeat {
            if !values.isEmpty { advance() }
            guard case .literal(let value) = current.kind else { throw unexpected("a literal in the 'in' list") }
            values.append(.literal(value))
            advance()
        } while current.kind == .comma
        return values
    }

    private mutating func parseOperand() throws(ODataError) -> ODataExpression {
        let token = current
        switch token.kind {
        case .openParen:
            advance()
            try enter()
            defer { depth -= 1 }
            let inner = try parseOr()
            try expect(.closeParen, "')'")
            return inner
        case .literal(let value):
            advance()
            return .literal(value)
        case .identifier(let name):
            switch name {
            case "true": advance(); return .literal(.boolean(true))
            case "false": advance(); return .literal(.boolean(false))
            case "null": advance(); return .literal(.null)
            default: break
            }
            advance()
            if current.kind == .openParen {
                return try parseCall(name, position: token.position)
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

    private mutating func parseCall(_ name: String, position: Int) throws(ODataError) -> ODataExpression {
        advance()  // (
        try enter()
        defer { depth -= 1 }
        var arguments: [ODataExpression] = []
        if current.kind != .closeParen {
            arguments.append(try parseOr())
            while current.kind == .comma {
                advance()
                arguments.append(try parseOr())
            }
        }
        try expect(.closeParen, "',' or ')' in the arguments of \(name)")
        return .call(name, arguments, position: position)
    }
}
