import Foundation
import MidtierCore
import MidtierJSON

/// Writes entities in OData v2 verbose JSON, as SuccessFactors answers with `$format=json`:
/// - every entity starts with `"__metadata":{"uri":"<root>Set(key)","type":"SFOData.Type"}`;
/// - a navigation property that is not expanded is `{"__deferred":{"uri":"<entity uri>/nav"}}`;
/// - an expanded to-many navigation property is `{"results":[…]}`, a to-one one the entity or null.
struct ODataSerializer {
    let store: PayrollStore
    /// Absolute service root ending in `/`.
    let serviceRoot: String
    let user: String

    var model: ODataModel { store.model }

    func json(
        for entity: ODataEntity, of type: ODataEntityType, expand: ODataExpandTree, select: ODataSelectTree?
    ) -> JSON {
        let uri = self.uri(of: entity, type: type)
        var members = [
            JSONMember(key: "__metadata", value: .object(["uri": .string(uri), "type": .string(model.qualifiedName(of: type))]))
        ]
        for property in type.properties where select?.includes(property: property.name) ?? true {
            members.append(JSONMember(key: property.name, value: entity[property.name].json))
        }
        for navigation in type.navigations {
            if let expanded = expand.child(named: navigation.name), let target = model.entityType(named: navigation.target) {
                // An expanded navigation property is always written; `$select` can narrow it down.
                let subselection = select?.navigations[navigation.name]
                let related = store.related(entity, via: navigation, visibleTo: user)
                let elements = related.map { json(for: $0, of: target, expand: expanded, select: subselection) }
                if navigation.toMany {
                    members.append(JSONMember(key: navigation.name, value: .object(["results": .array(elements)])))
                } else {
                    members.append(JSONMember(key: navigation.name, value: elements.first ?? .null))
                }
            } else if select == nil || select?.allProperties == true || select?.navigations[navigation.name] != nil {
                let link = JSON.object(["uri": .string(uri + "/" + navigation.name)])
                members.append(JSONMember(key: navigation.name, value: .object(["__deferred": link])))
            }
        }
        return .object(members)
    }

    /// `<serviceRoot>User('100001')`.
    func uri(of entity: ODataEntity, type: ODataEntityType) -> String {
        serviceRoot + type.name + Self.keyPredicate(of: entity, type: type)
    }

    /// `('100001')` for a single key, `(externalCode='X',mdfSystemEffectiveStartDate=datetime'…')`
    /// for a composite one, as SuccessFactors writes them.
    static func keyPredicate(of entity: ODataEntity, type: ODataEntityType) -> String {
        if type.keys.count == 1, let key = type.keys.first {
            return "(" + literal(entity[key]) + ")"
        }
        return "(" + type.keys.map { $0 + "=" + literal(entity[$0]) }.joined(separator: ",") + ")"
    }

    /// A value as a URI literal, percent-encoded: `'O''Neil'`, `12L`, `datetime'2024-01-31T00:00:00'`.
    static func literal(_ value: ODataValue) -> String {
        switch value {
        case .null: return "null"
        case .string(let text):
            let quoted = "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
            return quoted.addingPercentEncoding(withAllowedCharacters: .odataPathSegment) ?? ""
        case .boolean(let flag): return flag ? "true" : "false"
        case .int64(let number): return "\(number)L"
        case .decimal(let text): return text + "M"
        case .dateTime(let ms): return "datetime'" + ODataDate.literalText(milliseconds: ms) + "'"
        case .dateTimeOffset(let ms): return "datetimeoffset'" + ODataDate.literalText(milliseconds: ms) + "Z'"
        }
    }
}

extension ODataValue {
    /// The OData v2 verbose JSON form SuccessFactors uses: `Edm.Int64` and `Edm.Decimal` as
    /// strings, `Edm.DateTime` as `"/Date(ms)/"`, `Edm.DateTimeOffset` as `"/Date(ms+0000)/"`.
    var json: JSON {
        switch self {
        case .null: return .null
        case .string(let text): return .string(text)
        case .boolean(let value): return .bool(value)
        case .int64(let number): return .string(String(number))
        case .decimal(let text): return .string(text)
        case .dateTime(let ms): return .string(ODataTime.json(milliseconds: ms))
        case .dateTimeOffset(let ms): return .string("/Date(\(ms)+0000)/")
        }
    }
}
