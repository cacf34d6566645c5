import Foundation

/// The query options of a request, decoded and syntax-checked but not yet checked against an
/// entity type.
///
/// System query options SuccessFactors' OData v2 API knows and the sandbox supports: `$filter`,
/// `$expand`, `$select`, `$orderby`, `$top`, `$skip`, `$skiptoken`, `$inlinecount`, `$format`.
/// Any other `$` option is rejected; options without `$` (SuccessFactors' custom options such as
/// `paging=snapshot`, `asOfDate`, `customPageSize`) are accepted and ignored.
struct ODataQueryOptions: Sendable {
    /// One `name=value` pair as it arrived, and decoded.
    struct Option: Sendable {
        let name: String
        let value: String
    }

    static let systemOptions: Set<String> = [
        "$filter", "$expand", "$select", "$orderby", "$top", "$skip", "$skiptoken", "$inlinecount", "$format",
    ]

    /// All options in request order (for building `__next`).
    private(set) var options: [Option] = []
    var filter: String?
    var expand: String?
    var select: String?
    var orderBy: String?
    var top: Int?
    var skip: Int?
    /// Position in the whole result where this page starts (sandbox tokens are plain numbers).
    var skipToken: Int?
    var inlineCount = false

    static func parse(_ query: String?) throws(ODataError) -> ODataQueryOptions {
        var result = ODataQueryOptions()
        guard let query, !query.isEmpty else { return result }
        var seen: Set<String> = []
        for piece in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = String(parts[0]).formDecoded, let value = (parts.count > 1 ? String(parts[1]) : "").formDecoded
            else {
                throw .badRequest("Malformed query string: '\(piece)' has an invalid percent-encoding.")
            }
            result.options.append(Option(name: name, value: value))
            guard name.hasPrefix("$") else { continue }
            guard systemOptions.contains(name) else {
                throw .badRequest(
                    "Unknown system query option \(name); supported: "
                        + systemOptions.sorted().joined(separator: ", ") + ".")
            }
            guard seen.insert(name).inserted else {
                throw .badRequest("The system query option \(name) is given more than once.")
            }
            try result.apply(name, value)
        }
        return result
    }

    private mutating func apply(_ name: String, _ value: String) throws(ODataError) {
        switch name {
        case "$filter": filter = try nonEmpty(value, name)
        case "$expand": expand = try nonEmpty(value, name)
        case "$select": select = try nonEmpty(value, name)
        case "$orderby": orderBy = try nonEmpty(value, name)
        case "$top": top = try Self.nonNegativeInteger(value, name)
        case "$skip": skip = try Self.nonNegativeInteger(value, name)
        case "$skiptoken": skipToken = try Self.nonNegativeInteger(value, name)
        case "$inlinecount":
            switch value {
            case "allpages": inlineCount = true
            case "none": inlineCount = false
            default: throw .badRequest("Invalid $inlinecount '\(value)': use allpages or none.")
            }
        case "$format":
            let format = value.lowercased()
            guard format == "json" || format == "application/json" else {
                throw .badRequest("Unsupported $format '\(value)': the SuccessFactors sandbox answers JSON only ($format=json).")
            }
        default:
            break
        }
    }

    private func nonEmpty(_ value: String, _ name: String) throws(ODataError) -> String {
        guard !value.allSatisfy({ $0 == " " }) else { throw .badRequest("The system query option \(name) is empty.") }
        return value
    }

    /// Digits only; values too large for `Int` count as `Int.max` (so `$top=99999999999999999999`
    /// means "everything" rather than trapping).
    static func nonNegativeInteger(_ text: String, _ name: String) throws(ODataError) -> Int {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw .badRequest("Invalid \(name) '\(text)': it must be a non-negative integer.")
        }
        var value = 0
        for byte in text.utf8 {
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = shifted.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            if overflow1 || overflow2 { return Int.max }
            value = sum
        }
        return value
    }

    /// The query string of the `__next` link: the request's options without `$skip` and
    /// `$skiptoken`, `$top` reduced to what is left of it, and `$skiptoken` for the next page.
    func nextLinkQuery(remainingTop: Int?, skipToken: Int) -> String {
        var parts: [String] = []
        for option in options where option.name != "$skip" && option.name != "$skiptoken" {
            let value = option.name == "$top" ? String(remainingTop ?? 0) : option.value
            parts.append(Self.encoded(option.name) + "=" + Self.encoded(value))
        }
        parts.append("$skiptoken=\(skipToken)")
        return parts.joined(separator: "&")
    }

    private static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .odataQueryValue) ?? ""
    }
}

/// Query options checked against the entity type of the addressed collection or entity.
struct ODataQuery: Sendable {
    struct OrderItem: Sendable {
        let path: ODataPropertyPath
        let descending: Bool
    }

    var filter: ODataCondition?
    var orderBy: [OrderItem] = []
    var expand = ODataExpandTree()
    /// nil when there is no `$select`: everything is selected.
    var select: ODataSelectTree?

    static func bind(
        _ options: ODataQueryOptions, to type: ODataEntityType, in model: ODataModel
    ) throws(ODataError) -> ODataQuery {
        var query = ODataQuery()
        if let text = options.filter {
            query.filter = try ODataCondition.bind(try ODataFilterParser.parse(text), to: type, in: model)
        }
        if let text = options.orderBy {
            query.orderBy = try orderItems(text, type, model)
        }
        if let text = options.expand {
            query.expand = try ODataExpandTree.parse(text, from: type, in: model)
        }
        if let text = options.select {
            query.select = try ODataSelectTree.parse(text, from: type, expand: query.expand, in: model)
        }
        return query
    }

    /// `payDate desc, externalCode` → items; only single-valued paths can be ordered by.
    private static func orderItems(
        _ text: String, _ type: ODataEntityType, _ model: ODataModel
    ) throws(ODataError) -> [OrderItem] {
        var items: [OrderItem] = []
        for clause in text.split(separator: ",", omittingEmptySubsequences: false) {
            let words = clause.split(separator: " ")
            guard !words.isEmpty, words.count <= 2 else {
                throw .badRequest("Invalid $orderby '\(clause)': use <property> [asc|desc], separated by commas.")
            }
            var descending = false
            if words.count == 2 {
                switch words[1].lowercased() {
                case "asc": descending = false
                case "desc": descending = true
                default: throw .badRequest("Invalid $orderby '\(clause)': the direction must be asc or desc, not '\(words[1])'.")
                }
            }
            let segments = words[0].split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            let path = try ODataPropertyPath.resolve(segments, from: type, in: model, place: "$orderby")
            guard !path.isMultiValued else {
                throw .badRequest("Invalid $orderby: \(path.text) goes through a to-many navigation property and has many values.")
            }
            items.append(OrderItem(path: path, descending: descending))
        }
        return items
    }
}
