import Foundation
import MidtierCore
import MidtierJSON

/// An HTTP answer of the sandbox's OData service, framework-free.
package struct ODataResult: Sendable {
    /// 200, 400, 404, 405 …
    package var status: Int
    /// `application/json;charset=utf-8`, `application/xml;charset=utf-8` (`$metadata`) or
    /// `text/plain;charset=utf-8` (`$count`).
    package var contentType: String
    package var body: [UInt8]

    package init(status: Int, contentType: String, body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }
}

/// The SuccessFactors sandbox's OData v2 payroll service: `User`, `EmpEmployment`,
/// `PaymentInformationV3`, `PaymentInformationDetailV3`, `Bank`, `EmployeePayrollRunResults` and
/// `EmployeePayrollRunResultsItems`, read-only, answering like SuccessFactors does with
/// `$format=json`, and showing each user their own data only (see `PayrollStore`).
///
/// Paging: a collection answers at most `pageSize` entities; when more remain, `__next` is
/// `<serviceRoot><path>?<the request's options without $skip/$skiptoken>&$skiptoken=<n>`, where
/// `n` is the position of the next page in the filtered, ordered result. SuccessFactors' tokens
/// are opaque; the sandbox's are plain numbers. If the request had `$top`, `__next` carries what
/// is left of it, so `$top` bounds the total over all pages.
package struct PayrollODataService: Sendable {
    private let store: PayrollStore
    private let pageSize: Int

    package init(data: PayrollData = .demo, pageSize: Int = 20) {
        self.store = PayrollStore(data: data)
        self.pageSize = max(1, pageSize)
    }

    /// Answers one request.
    /// - Parameters:
    ///   - method: HTTP method; only GET (and HEAD) are allowed.
    ///   - path: the raw (percent-encoded) part after `/odata/v2/`, e.g. `User('100001')`, `$metadata`.
    ///   - query: raw query string without `?`, or nil.
    ///   - serviceRoot: absolute URL of the service root ending in `/`.
    ///   - user: the SuccessFactors user id the bearer token belongs to (already authenticated).
    package func handle(method: String, path: String, query: String?, serviceRoot: String, user: String) -> ODataResult {
        do throws(ODataError) {
            return try respond(method: method, path: path, query: query, serviceRoot: serviceRoot, user: user)
        } catch {
            return ODataResult(status: error.status, contentType: Self.jsonContentType, body: error.body)
        }
    }

    static let jsonContentType = "application/json;charset=utf-8"
    static let xmlContentType = "application/xml;charset=utf-8"
    static let textContentType = "text/plain;charset=utf-8"

    private var model: ODataModel { store.model }

    private func respond(
        method: String, path: String, query: String?, serviceRoot: String, user: String
    ) throws(ODataError) -> ODataResult {
        let verb = method.uppercased()
        guard verb == "GET" || verb == "HEAD" else { throw .methodNotAllowed(method) }

        let trimmedPath = String(path.drop { $0 == "/" }.reversed().drop { $0 == "/" }.reversed())
        if trimmedPath == "$metadata" {
            return ODataResult(status: 200, contentType: Self.xmlContentType, body: PayrollMetadata.document)
        }
        let options = try ODataQueryOptions.parse(query)
        if trimmedPath.isEmpty {
            return json(.object(["EntitySets": .array(model.entityTypes.map { .string($0.name) })]))
        }

        let segments = try ODataPathSegment.parse(trimmedPath)
        let (target, isCount) = try resolve(segments, user: user)
        let serializer = ODataSerializer(store: store, serviceRoot: serviceRoot, user: user)
        switch target {
        case .collection(let type, let entities):
            let canonicalPath = segments.map { segment in
                let text = segment.name + (segment.keyPredicate.map { "(" + $0 + ")" } ?? "")
                return text.addingPercentEncoding(withAllowedCharacters: .odataPathSegment) ?? ""
            }.joined(separator: "/")
            return try collection(
                entities, of: type, options: options, isCount: isCount, serializer: serializer,
                nextLinkBase: serviceRoot + canonicalPath, user: user)
        case .entity(let type, let entity):
            let bound = try ODataQuery.bind(options, to: type, in: model)
            return json(serializer.json(for: entity, of: type, expand: bound.expand, select: bound.select))
        case .property(let property, let value):
            return json(.object([JSONMember(key: property.name, value: value.json)]))
        }
    }

    // MARK: Resource path

    private enum Target {
        case collection(ODataEntityType, [ODataEntity])
        case entity(ODataEntityType, ODataEntity)
        case property(ODataProperty, ODataValue)
    }

    /// Follows the path: entity set, optional key, then navigation properties (each from a single
    /// entity), optionally ending in a property name or `$count`.
    private func resolve(_ segments: [ODataPathSegment], user: String) throws(ODataError) -> (Target, Bool) {
        var segments = segments
        var isCount = false
        if segments.count > 1, let last = segments.last, last.name == "$count", last.keyPredicate == nil {
            isCount = true
            segments.removeLast()
        }
        guard let first = segments.first else { throw .badRequest("Empty resource path.") }
        guard let type = model.entityType(named: first.name) else { throw .entitySetNotFound(first.name) }
        var target = Target.collection(type, store.entities(of: type, visibleTo: user))
        if let predicate = first.keyPredicate {
            target = try selectEntity(matching: predicate, in: target)
        }
        for segment in segments.dropFirst() {
            guard case .entity(let type, let entity) = target else {
                throw .badRequest(
                    "Cannot address '\(segment.name)' here: only a single entity (Set(key)) has navigation "
                        + "properties and properties in the resource path.")
            }
            if let navigation = type.navigation(named: segment.name),
                let targetType = model.entityType(named: navigation.target)
            {
                let related = store.related(entity, via: navigation, visibleTo: user)
                if navigation.toMany {
                    target = .collection(targetType, related)
                } else if let single = related.first {
                    target = .entity(targetType, single)
                } else {
                    throw ODataError(
                        status: 404, code: "NotFoundException",
                        message: "No \(targetType.name) is related to this \(type.name) through \(navigation.name).")
                }
                if let predicate = segment.keyPredicate {
                    target = try selectEntity(matching: predicate, in: target)
                }
            } else if let property = type.property(named: segment.name), segment.keyPredicate == nil {
                target = .property(property, entity[property.name])
            } else {
                throw .propertyNotFound(segment.name, of: type, in: "the resource path")
            }
        }
        if isCount, case .collection = target {
        } else if isCount {
            throw .badRequest("$count can only follow a collection, e.g. EmployeePayrollRunResults/$count.")
        }
        return (target, isCount)
    }

    /// The entity of a collection with the given key; 404 when there is none the user may see.
    private func selectEntity(matching predicate: String, in target: Target) throws(ODataError) -> Target {
        guard case .collection(let type, let entities) = target else {
            throw .badRequest("A key predicate can only select from a collection.")
        }
        let key = try ODataPathSegment.key(predicate, for: type)
        let match = entities.first { entity in
            type.keys.allSatisfy { name in
                guard let wanted = key[name] else { return false }
                return ODataValue.compare(entity[name], wanted) == .orderedSame
            }
        }
        guard let match else { throw .notFound(type, key: "(" + predicate + ")") }
        return .entity(type, match)
    }

    // MARK: Collections

    private func collection(
        _ entities: [ODataEntity], of type: ODataEntityType, options: ODataQueryOptions, isCount: Bool,
        serializer: ODataSerializer, nextLinkBase: String, user: String
    ) throws(ODataError) -> ODataResult {
        let query = try ODataQuery.bind(options, to: type, in: model)
        var rows = entities
        if let filter = query.filter {
            rows = rows.filter { filter.matches($0, in: store, user: user) }
        }
        let total = rows.count
        let start = min(options.skipToken ?? options.skip ?? 0, total)
        let windowEnd = options.top.map { min(total, Self.saturatingAdd(start, $0)) } ?? total
        if isCount {
            return ODataResult(status: 200, contentType: Self.textContentType, body: Array(String(windowEnd - start).utf8))
        }
        rows = sorted(rows, by: query.orderBy, user: user)
        let pageEnd = min(windowEnd, Self.saturatingAdd(start, pageSize))

        var members: [JSONMember] = []
        if options.inlineCount {
            members.append(JSONMember(key: "__count", value: .string(String(total))))
        }
        let results = rows[start..<pageEnd].map {
            serializer.json(for: $0, of: type, expand: query.expand, select: query.select)
        }
        members.append(JSONMember(key: "results", value: .array(results)))
        if pageEnd < windowEnd {
            let remainingTop = options.top == nil ? nil : windowEnd - pageEnd
            let next = nextLinkBase + "?" + options.nextLinkQuery(remainingTop: remainingTop, skipToken: pageEnd)
            members.append(JSONMember(key: "__next", value: .string(next)))
        }
        return json(.object(members))
    }

    /// `$orderby`, ties broken by key order (the order the entities come in), so paging is stable.
    private func sorted(_ rows: [ODataEntity], by items: [ODataQuery.OrderItem], user: String) -> [ODataEntity] {
        guard !items.isEmpty else { return rows }
        let keyed = rows.enumerated().map { offset, entity in
            (offset, entity, items.map { store.values(of: $0.path, for: entity, visibleTo: user).first ?? .null })
        }
        return keyed.sorted { a, b in
            for (index, item) in items.enumerated() {
                let order = ODataValue.sortOrder(a.2[index], b.2[index])
                if order != .orderedSame {
                    return item.descending ? order == .orderedDescending : order == .orderedAscending
                }
            }
            return a.0 < b.0
        }.map(\.1)
    }

    private static func saturatingAdd(_ a: Int, _ b: Int) -> Int {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? Int.max : sum
    }

    /// `{"d": …}`.
    private func json(_ value: JSON) -> ODataResult {
        ODataResult(status: 200, contentType: Self.jsonContentType, body: Array(JSON.object(["d": value]).serialized().utf8))
    }
}
