/// The entity data model the sandbox serves: entity types with their properties, keys and
/// navigation properties. `$metadata` is generated from it, and query options are checked
/// against it. In SuccessFactors every entity set has the name of its entity type, so one
/// name serves for both here too.
struct ODataModel: Sendable {
    /// Schema namespace of the entity types (`SFOData.User`, …).
    let namespace: String
    let entityTypes: [ODataEntityType]

    func entityType(named name: String) -> ODataEntityType? {
        entityTypes.first { $0.name == name }
    }

    /// `SFOData.User` for `User`.
    func qualifiedName(of type: ODataEntityType) -> String {
        namespace + "." + type.name
    }
}

struct ODataEntityType: Sendable {
    let name: String
    /// Key property names, in the order SuccessFactors writes them in key predicates.
    let keys: [String]
    let properties: [ODataProperty]
    let navigations: [ODataNavigation]

    func property(named name: String) -> ODataProperty? {
        properties.first { $0.name == name }
    }

    func navigation(named name: String) -> ODataNavigation? {
        navigations.first { $0.name == name }
    }
}

struct ODataProperty: Sendable {
    let name: String
    let type: EdmType
    let nullable: Bool
    let maxLength: Int?
    /// Human-readable label (`sap:label` in `$metadata`).
    let label: String

    init(_ name: String, _ type: EdmType, nullable: Bool = true, maxLength: Int? = nil, label: String) {
        self.name = name
        self.type = type
        self.nullable = nullable
        self.maxLength = maxLength
        self.label = label
    }
}

/// A navigation property. Related entities are found by equal values: each `join` pair names a
/// property of the source and the property of the target that must hold the same value.
struct ODataNavigation: Sendable {
    struct Join: Sendable {
        let source: String
        let target: String
    }

    let name: String
    /// Target entity type (and entity set) name.
    let target: String
    let toMany: Bool
    let joins: [Join]

    init(_ name: String, to target: String, toMany: Bool, joins: [(String, String)]) {
        self.name = name
        self.target = target
        self.toMany = toMany
        self.joins = joins.map { Join(source: $0.0, target: $0.1) }
    }

    /// The association's name in `$metadata`: one association per navigation property.
    func associationName(from source: ODataEntityType) -> String {
        source.name + "_" + name
    }
}
