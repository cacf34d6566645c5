import Foundation

/// A `$filter` expression checked against an entity type: property paths resolved, operand types
/// compatible, literals converted to the property's type. Binding rejects with a clear 400 what
/// SuccessFactors would reject, so evaluation itself never fails.
indirect enum ODataCondition: Sendable {
    case literal(ODataValue)
    case property(ODataPropertyPath)
    case and([ODataCondition])
    case or([ODataCondition])
    case not(ODataCondition)
    case comparison(ODataComparison, ODataCondition, ODataCondition)
    case isIn(ODataCondition, [ODataValue])

    /// What a (sub)expression evaluates to, for type checking.
    enum Kind: String, Sendable {
        case string = "a string"
        case number = "a number"
        case date = "a date"
        case boolean = "a boolean"
        case null = "null"
    }

    var kind: Kind {
        switch self {
        case .literal(let value): return Self.kind(of: value)
        case .property(let path): return Self.kind(of: path.property.type)
        case .and, .or, .not, .comparison, .isIn: return .boolean
        }
    }

    static func kind(of value: ODataValue) -> Kind {
        switch value {
        case .null: return .null
        case .string: return .string
        case .boolean: return .boolean
        case .int64, .decimal: return .number
        case .dateTime, .dateTimeOffset: return .date
        }
    }

    static func kind(of type: EdmType) -> Kind {
        switch type {
        case .string: return .string
        case .boolean: return .boolean
        case .int64, .decimal: return .number
        case .dateTime, .dateTimeOffset: return .date
        }
    }
}

// MARK: Binding

extension ODataCondition {
    /// Checks a parsed `$filter` against `type`.
    static func bind(
        _ expression: ODataExpression, to type: ODataEntityType, in model: ODataModel
    ) throws(ODataError) -> ODataCondition {
        let condition = try bindAny(expression, type, model)
        guard condition.kind == .boolean else {
            throw .badRequest("Invalid $filter: the expression must be a condition (true or false), not \(condition.kind.rawValue).")
        }
        return condition
    }

    private static func bindAny(
        _ expression: ODataExpression, _ type: ODataEntityType, _ model: ODataModel
    ) throws(ODataError) -> ODataCondition {
        switch expression {
        case .literal(let value):
            return .literal(value)
        case .path(let segments, _):
            return .property(try ODataPropertyPath.resolve(segments, from: type, in: model, place: "$filter"))
        case .and(let operands):
            return .and(try bindConditions(operands, "and", type, model))
        case .or(let operands):
            return .or(try bindConditions(operands, "or", type, model))
        case .not(let operand):
            return .not(try bindConditions([operand], "not", type, model)[0])
        case .comparison(let comparison, let left, let right):
            return try bindComparison(comparison, try bindAny(left, type, model), try bindAny(right, type, model))
        case .isIn(let operand, let list):
            let left = try bindAny(operand, type, model)
            var values: [ODataValue] = []
            for value in list {
                let converted = try convert(value, toKindOf: left)
                try checkComparable(.eq, left.kind, kind(of: converted), literal: value)
                values.append(converted)
            }
            return .isIn(left, values)
        }
    }

    private static func bindConditions(
        _ operands: [ODataExpression], _ operatorName: String, _ type: ODataEntityType, _ model: ODataModel
    ) throws(ODataError) -> [ODataCondition] {
        var conditions: [ODataCondition] = []
        for operand in operands {
            let condition = try bindAny(operand, type, model)
            guard condition.kind == .boolean else {
                throw .badRequest(
                    "Invalid $filter: '\(operatorName)' needs conditions, but one operand is \(condition.kind.rawValue).")
            }
            conditions.append(condition)
        }
        return conditions
    }

    private static func bindComparison(
        _ comparison: ODataComparison, _ left: ODataCondition, _ right: ODataCondition
    ) throws(ODataError) -> ODataCondition {
        var left = left
        var right = right
        if case .literal(let value) = right { right = .literal(try convert(value, toKindOf: left)) }
        if case .literal(let value) = left { left = .literal(try convert(value, toKindOf: right)) }
        var literal: ODataValue?
        if case .literal(let value) = right { literal = value } else if case .literal(let value) = left { literal = value }
        try checkComparable(comparison, left.kind, right.kind, literal: literal)
        return .comparison(comparison, left, right)
    }

    /// SuccessFactors accepts quoted dates (`payDate ge '2024-01-01'`); quoted numbers are taken
    /// as numbers when compared with a number.
    private static func convert(_ value: ODataValue, toKindOf other: ODataCondition) throws(ODataError) -> ODataValue {
        guard case .string(let text) = value else { return value }
        switch other.kind {
        case .date:
            guard let ms = ODataDate.parse(text) else {
                throw .badRequest("Invalid $filter: '\(text)' is not a date; use datetime'yyyy-mm-ddThh:mm:ss' or 'yyyy-mm-dd'.")
            }
            return .dateTime(ms)
        case .number:
            let decimal = ODataValue.decimal(text)
            guard decimal.numericValue != nil else {
                throw .badRequest("Invalid $filter: '\(text)' is not a number.")
            }
            return decimal
        default:
            return value
        }
    }

    private static func checkComparable(
        _ comparison: ODataComparison, _ left: Kind, _ right: Kind, literal: ODataValue?
    ) throws(ODataError) {
        if left == .null || right == .null {
            guard comparison == .eq || comparison == .ne else {
                throw .badRequest("Invalid $filter: null can only be compared with 'eq' or 'ne', not '\(comparison.rawValue)'.")
            }
            return
        }
        guard left == right else {
            var hint = ""
            if left == .string || right == .string, literal.map({ kind(of: $0) == .number }) == true {
                hint = " Quote string literals, e.g. userId eq '100001'."
            }
            throw .badRequest(
                "Invalid $filter: cannot compare \(left.rawValue) with \(right.rawValue) using '\(comparison.rawValue)'.\(hint)")
        }
    }
}

// MARK: Evaluation

extension ODataCondition {
    /// Whether `entity` satisfies this condition. A path through a to-many navigation property
    /// satisfies a comparison when any of its values does.
    func matches(_ entity: ODataEntity, in store: PayrollStore, user: String) -> Bool {
        values(for: entity, in: store, user: user).contains(.boolean(true))
    }

    private func values(for entity: ODataEntity, in store: PayrollStore, user: String) -> [ODataValue] {
        switch self {
        case .literal(let value):
            return [value]
        case .property(let path):
            return store.values(of: path, for: entity, visibleTo: user)
        case .and(let operands):
            return [.boolean(operands.allSatisfy { $0.matches(entity, in: store, user: user) })]
        case .or(let operands):
            return [.boolean(operands.contains { $0.matches(entity, in: store, user: user) })]
        case .not(let operand):
            return [.boolean(!operand.matches(entity, in: store, user: user))]
        case .comparison(let comparison, let left, let right):
            let lefts = left.values(for: entity, in: store, user: user)
            let rights = right.values(for: entity, in: store, user: user)
            let result = lefts.contains { a in rights.contains { b in Self.test(comparison, a, b) } }
            return [.boolean(result)]
        case .isIn(let operand, let list):
            let candidates = operand.values(for: entity, in: store, user: user)
            return [.boolean(candidates.contains { a in list.contains { b in Self.test(.eq, a, b) } })]
        }
    }

    private static func test(_ comparison: ODataComparison, _ a: ODataValue, _ b: ODataValue) -> Bool {
        if a == .null || b == .null {
            let bothNull = a == .null && b == .null
            switch comparison {
            case .eq: return bothNull
            case .ne: return !bothNull
            default: return false
            }
        }
        guard let order = ODataValue.compare(a, b) else { return comparison == .ne }
        switch comparison {
        case .eq: return order == .orderedSame
        case .ne: return order != .orderedSame
        case .gt: return order == .orderedDescending
        case .ge: return order != .orderedAscending
        case .lt: return order == .orderedAscending
        case .le: return order != .orderedDescending
        }
    }
}
