import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierJSON

/// One OData v2 entity of the registration service as Midtier answers it (docs/device-api.md,
/// "Onboarding"): its URI and type, and its properties with their OData types. The same value is
/// written as JSON (`{"d":{…}}`, `__metadata` first) and as an Atom entry (``ConnectionAtom``),
/// so the two forms and `$metadata` never disagree.
struct ODataEntity: Sendable {
    enum Value: Sendable, Equatable {
        case string(String)
        case bool(Bool)
        case int(Int)
        /// Milliseconds since 1970: `/Date(…)/` in JSON, `Edm.DateTime` in Atom.
        case dateTime(Int64)
        case null

        /// The OData v2 type `$metadata` and Atom give the value (nil: written as `m:null`).
        var edmType: String? {
            switch self {
            case .string: "Edm.String"
            case .bool: "Edm.Boolean"
            case .int: "Edm.Int32"
            case .dateTime: "Edm.DateTime"
            case .null: nil
            }
        }

        var json: JSON {
            switch self {
            case .string(let text): .string(text)
            case .bool(let flag): .bool(flag)
            case .int(let number): .number(number)
            case .dateTime(let milliseconds): .string(ODataTime.json(milliseconds: milliseconds))
            case .null: .null
            }
        }

        /// A client policy value from the app file (booleans and whole numbers typed, the rest text).
        init(_ value: JSON) {
            switch value {
            case .bool(let flag): self = .bool(flag)
            case .number(let text):
                if let number = Int(text), abs(number) < 2_147_483_648 { self = .int(number) } else { self = .string(text) }
            case .string(let text): self = .string(text)
            case .null, .array, .object: self = .null
            }
        }
    }

    var uri: String
    /// `applications.Connection`, `applications.Endpoint`.
    var type: String
    /// By name; written sorted by name.
    var properties: [String: Value]

    /// The properties sorted by name (by their bytes), as both forms write them.
    var sortedProperties: [(name: String, value: Value)] {
        properties.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { (name: $0.key, value: $0.value) }
    }

    /// The entity as OData v2 JSON writes it inside `d`.
    var json: JSON {
        .object(
            [JSONMember(key: "__metadata", value: .object(["uri": .string(uri), "type": .string(type)]))]
                + sortedProperties.map { JSONMember(key: $0.name, value: $0.value.json) })
    }

    /// `{"d":{…}}`.
    static func response(_ entity: ODataEntity, status: HTTPResponse.Status = .ok) -> Response {
        jsonResponse(.object(["d": entity.json]), status: status)
    }

    /// `{"d":{"results":[…]}}`.
    static func response(_ entities: [ODataEntity]) -> Response {
        jsonResponse(.object(["d": .object(["results": .array(entities.map(\.json))])]), status: .ok)
    }

    private static func jsonResponse(_ body: JSON, status: HTTPResponse.Status) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json;charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body.serialized())))
    }
}
