/// A checked path to a primitive property, through zero or more navigation properties:
/// `payDate`, `userIdNav/firstName`, `employeePayrollRunResultsItems/amount`.
struct ODataPropertyPath: Sendable {
    let navigations: [ODataNavigation]
    let property: ODataProperty

    /// True when the path crosses a to-many navigation property, so it has any number of values.
    var isMultiValued: Bool { navigations.contains { $0.toMany } }

    var text: String { (navigations.map(\.name) + [property.name]).joined(separator: "/") }

    /// Longest path accepted, so that cyclic navigation (`User/empInfo/userNav/empInfo/…`) stays bounded.
    static let maximumSegments = 8

    /// Resolves `segments` against `type`; `place` names the query option for error messages.
    static func resolve(
        _ segments: [String], from type: ODataEntityType, in model: ODataModel, place: String
    ) throws(ODataError) -> ODataPropertyPath {
        guard segments.count <= maximumSegments else {
            throw .badRequest("Invalid \(place): the path \(segments.joined(separator: "/")) is too long.")
        }
        var navigations: [ODataNavigation] = []
        var currentType = type
        for (offset, segment) in segments.enumerated() {
            let isLast = offset == segments.count - 1
            if isLast, let property = currentType.property(named: segment) {
                return ODataPropertyPath(navigations: navigations, property: property)
            }
            guard let navigation = currentType.navigation(named: segment) else {
                throw .propertyNotFound(segment, of: currentType, in: place)
            }
            guard !isLast else {
                throw .badRequest(
                    "Invalid \(place): \(segments.joined(separator: "/")) is a navigation property; "
                        + "name one of its properties, e.g. \(segment)/<property>.")
            }
            guard let target = model.entityType(named: navigation.target) else {
                throw .propertyNotFound(segment, of: currentType, in: place)
            }
            navigations.append(navigation)
            currentType = target
        }
        throw .badRequest("Invalid \(place): empty property path.")
    }
}

extension PayrollStore {
    /// The values a property path has for one entity. A path through to-one navigation
    /// properties only has exactly one value (null when a related entity is missing); a path
    /// through a to-many navigation property has one value per related entity.
    /// Only entities the user may see are followed.
    func values(of path: ODataPropertyPath, for entity: ODataEntity, visibleTo user: String) -> [ODataValue] {
        var current = [entity]
        for navigation in path.navigations {
            current = current.flatMap { related($0, via: navigation, visibleTo: user) }
        }
        if current.isEmpty && !path.isMultiValued { return [.null] }
        return current.map { $0[path.property.name] }
    }
}
