/// The navigation properties to expand, as a tree: `$expand=a,b/c,b/d` expands `a` and `b`, and
/// within `b` expands `c` and `d`.
struct ODataExpandTree: Sendable {
    struct Child: Sendable {
        let name: String
        var tree: ODataExpandTree
    }

    private(set) var children: [Child] = []

    func child(named name: String) -> ODataExpandTree? {
        children.first { $0.name == name }?.tree
    }

    /// Longest expand path accepted (SuccessFactors' seed query needs 5 levels).
    static let maximumDepth = 8

    /// Parses and checks `$expand`: each segment must be a navigation property of the type reached
    /// so far. Expanding a plain property is SuccessFactors' `COE_BAD_PROPERTY_EXPRESSION`.
    static func parse(_ text: String, from type: ODataEntityType, in model: ODataModel) throws(ODataError) -> ODataExpandTree {
        var tree = ODataExpandTree()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let path = item.trimmingSpaces
            let segments = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard !path.isEmpty, !segments.contains(where: \.isEmpty) else {
                throw .badRequest("Invalid $expand '\(text)': empty navigation property name.")
            }
            guard segments.count <= maximumDepth else {
                throw .badRequest("Invalid $expand: \(path) is nested deeper than \(maximumDepth) levels.")
            }
            var currentType = type
            for segment in segments {
                guard let navigation = currentType.navigation(named: segment) else {
                    if currentType.property(named: segment) != nil {
                        throw .badPropertyExpression(
                            "\(segment); cannot expand non-navigation property: \(currentType.name)/\(segment)")
                    }
                    throw .propertyNotFound(segment, of: currentType, in: "$expand")
                }
                guard let target = model.entityType(named: navigation.target) else {
                    throw .propertyNotFound(segment, of: currentType, in: "$expand")
                }
                currentType = target
            }
            tree.insert(segments[...])
        }
        return tree
    }

    private mutating func insert(_ segments: ArraySlice<String>) {
        guard let first = segments.first else { return }
        if let index = children.firstIndex(where: { $0.name == first }) {
            children[index].tree.insert(segments.dropFirst())
        } else {
            var tree = ODataExpandTree()
            tree.insert(segments.dropFirst())
            children.append(Child(name: first, tree: tree))
        }
    }
}

/// What `$select` keeps of an entity: some or all primitive properties, and for navigation
/// properties either their `__deferred` link (when not expanded) or a selection within them.
struct ODataSelectTree: Sendable {
    /// `*`, or the navigation property itself was selected.
    var allProperties = false
    var properties: Set<String> = []
    var navigations: [String: ODataSelectTree] = [:]

    func includes(property name: String) -> Bool {
        allProperties || properties.contains(name)
    }

    /// Parses and checks `$select`. A path into a navigation property (`items/amount`) needs
    /// that navigation property in `$expand`, as OData v2 requires.
    static func parse(
        _ text: String, from type: ODataEntityType, expand: ODataExpandTree, in model: ODataModel
    ) throws(ODataError) -> ODataSelectTree {
        var tree = ODataSelectTree()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let path = item.trimmingSpaces
            let segments = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard !path.isEmpty, !segments.contains(where: \.isEmpty) else {
                throw .badRequest("Invalid $select '\(text)': empty property name.")
            }
            guard segments.count <= ODataExpandTree.maximumDepth + 1 else {
                throw .badRequest("Invalid $select: \(path) is nested too deeply.")
            }
            try tree.add(segments[...], path: path, type: type, expand: expand, model: model)
        }
        return tree
    }

    private mutating func add(
        _ segments: ArraySlice<String>, path: String, type: ODataEntityType, expand: ODataExpandTree?,
        model: ODataModel
    ) throws(ODataError) {
        guard let first = segments.first else { return }
        let rest = segments.dropFirst()
        if first == "*" {
            guard rest.isEmpty else { throw .badRequest("Invalid $select: '*' must be the last segment in \(path).") }
            allProperties = true
            return
        }
        if type.property(named: first) != nil {
            guard rest.isEmpty else {
                throw .badRequest("Invalid $select: \(type.name)/\(first) is not a navigation property, so \(path) is invalid.")
            }
            properties.insert(first)
            return
        }
        guard let navigation = type.navigation(named: first), let target = model.entityType(named: navigation.target)
        else {
            throw .propertyNotFound(first, of: type, in: "$select")
        }
        if rest.isEmpty {
            navigations[first, default: ODataSelectTree()].allProperties = true
            return
        }
        guard let expanded = expand?.child(named: first) else {
            throw .badRequest("Invalid $select: \(path) selects inside \(first), which needs $expand=\(first).")
        }
        try navigations[first, default: ODataSelectTree()].add(
            rest, path: path, type: target, expand: expanded, model: model)
    }
}

extension Substring {
    /// Without leading and trailing spaces (query values decode `+` and `%20` to spaces).
    var trimmingSpaces: String {
        var slice = self[...]
        while slice.first == " " { slice = slice.dropFirst() }
        while slice.last == " " { slice = slice.dropLast() }
        return String(slice)
    }
}
