package import Callers
import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
package import MidtierJSON
package import SAMLSigning

/// The registration API's original format: Connections as OData v2 Atom/XML, for clients that
/// ask for it or send it (docs/device-api.md, "Registration in Atom"), the service document and
/// `$metadata`. The properties are the JSON entity's, typed the way OData v2 writes them.
/// Reading an Atom body is `ODataAtomEntry`'s job.
enum ConnectionAtom {
    static let atomNamespace = ODataAtomEntry.atomNamespace
    static let metadataNamespace = ODataAtomEntry.metadataNamespace
    static let dataNamespace = ODataAtomEntry.dataNamespace

    /// Whether a read answers Atom rather than JSON: Atom unless the request asks for JSON, as
    /// OData v2 and SAP's registration service answer (docs/device-api.md, "Registration in Atom").
    static func isWanted(_ request: Request) -> Bool { preference(request) ?? true }

    /// What the request asks for: Atom (true), JSON (false), or nothing (nil). `$format`
    /// (`atom`/`xml` or `json`) decides first; then `Accept` by its quality values: the one of
    /// JSON and Atom/XML it prefers (JSON on a tie), a type with `q=0` refused; nothing when it
    /// names neither, or refuses both.
    static func preference(_ request: Request) -> Bool? {
        if let format = request.uri.queryParameters["$format"] {
            return format == "atom" || format == "xml"
        }
        var json: Double?
        var atom: Double?
        for value in request.headers[values: .accept] {
            for range in value.split(separator: ",") {
                let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
                guard let type = parts.first else { continue }
                // A missing or malformed q is 1: the type was named.
                let quality =
                    parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) }.flatMap {
                        $0.isFinite ? min(max($0, 0), 1) : nil
                    }
                    ?? 1
                switch type {
                case "application/json": json = max(json ?? 0, quality)
                case "application/atom+xml", "application/xml": atom = max(atom ?? 0, quality)
                default: continue
                }
            }
        }
        let jsonQuality = json ?? -1
        let atomQuality = atom ?? -1
        if jsonQuality > 0 && jsonQuality >= atomQuality { return false }
        if atomQuality > 0 { return true }
        // Only refusals: the one not refused, if one was refused and the other not named.
        if json == 0 && atom == nil { return true }
        if atom == 0 && json == nil { return false }
        return nil
    }

    /// Whether the request's body is Atom/XML by its `Content-Type` (`application/atom+xml`,
    /// `application/xml`, `text/xml`); any other body is read as JSON.
    static func isBody(_ request: Request) -> Bool {
        let type =
            (request.headers[.contentType] ?? "").split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return ["application/atom+xml", "application/xml", "text/xml"].contains(type)
    }

    /// One entity as an Atom `entry` document.
    static func entry(_ entity: ODataEntity, now: Int64) -> String {
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n" + entryElement(entity, root: true, now: now)
    }

    /// A collection (`Connections` unless `set` says another) as an Atom `feed` document; `base`
    /// is the collection's URL.
    static func feed(_ entities: [ODataEntity], base: String, set: String = "Connections", now: Int64) -> String {
        var xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
        xml += "<feed xmlns=\"\(atomNamespace)\" xmlns:m=\"\(metadataNamespace)\" xmlns:d=\"\(dataNamespace)\">"
        xml += "<id>\(escaped(base))</id><title type=\"text\">\(set)</title><updated>\(timestamp(now))</updated>"
        xml += "<link rel=\"self\" title=\"\(set)\" href=\"\(escaped(base))\"/>"
        for entity in entities { xml += entryElement(entity, root: false, now: now) }
        return xml + "</feed>"
    }

    private static func entryElement(_ entity: ODataEntity, root: Bool, now: Int64) -> String {
        let uri = entity.uri, type = entity.type
        var xml = root ? "<entry xmlns=\"\(atomNamespace)\" xmlns:m=\"\(metadataNamespace)\" xmlns:d=\"\(dataNamespace)\">" : "<entry>"
        xml += "<id>\(escaped(uri))</id><title type=\"text\"/><updated>\(timestamp(now))</updated><author><name/></author>"
        xml += "<link rel=\"edit\" title=\"\(type.split(separator: ".").last ?? "")\" href=\"\(escaped(uri))\"/>"
        xml += "<category term=\"\(type)\" scheme=\"http://schemas.microsoft.com/ado/2007/08/dataservices/scheme\"/>"
        xml += "<content type=\"application/xml\"><m:properties>"
        for (name, value) in entity.sortedProperties {
            xml += property(name, value)
        }
        return xml + "</m:properties></content></entry>"
    }

    /// The service's collections, as the service document and `$metadata` name them.
    static let entitySets = ["Connections", "Endpoints"]

    /// The service document: one workspace with the `Connections` and `Endpoints` collections;
    /// `base` ends in `/`.
    static func serviceDocument(base: String) -> String {
        var xml =
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<service xml:base=\"\(escaped(base))\" xmlns=\"http://www.w3.org/2007/app\" "
            + "xmlns:atom=\"\(atomNamespace)\"><workspace><atom:title>Default</atom:title>"
        for set in entitySets { xml += "<collection href=\"\(set)\"><atom:title>\(set)</atom:title></collection>" }
        return xml + "</workspace></service>"
    }

    /// `$metadata` of the service: namespace `applications`, EntityType `Connection` keyed by
    /// `ApplicationConnectionId` and `Endpoint` keyed by `EndpointName`, each with its sample's
    /// property names and the types `entry` writes them with; EntitySets `Connections` and
    /// `Endpoints` in the container `Container`.
    static func metadata(connection: ODataEntity, endpoint: ODataEntity) -> String {
        var xml =
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<edmx:Edmx Version=\"1.0\" xmlns:edmx=\"http://schemas.microsoft.com/ado/2007/06/edmx\">"
        xml += "<edmx:DataServices m:DataServiceVersion=\"2.0\" xmlns:m=\"\(metadataNamespace)\">"
        xml += "<Schema Namespace=\"applications\" xmlns=\"http://schemas.microsoft.com/ado/2008/09/edm\">"
        xml += entityType("Connection", key: "ApplicationConnectionId", connection)
        xml += entityType("Endpoint", key: "EndpointName", endpoint)
        xml += "<EntityContainer Name=\"Container\" m:IsDefaultEntityContainer=\"true\">"
        xml += "<EntitySet Name=\"Connections\" EntityType=\"applications.Connection\"/>"
        xml += "<EntitySet Name=\"Endpoints\" EntityType=\"applications.Endpoint\"/></EntityContainer>"
        return xml + "</Schema></edmx:DataServices></edmx:Edmx>"
    }

    private static func entityType(_ name: String, key: String, _ sample: ODataEntity) -> String {
        var xml = "<EntityType Name=\"\(name)\"><Key><PropertyRef Name=\"\(key)\"/></Key>"
        for (property, value) in sample.sortedProperties {
            let nullable = property == key ? "false" : "true"
            xml += "<Property Name=\"\(escaped(property))\" Type=\"\(value.edmType ?? "Edm.String")\" Nullable=\"\(nullable)\"/>"
        }
        return xml + "</EntityType>"
    }

    private static func property(_ name: String, _ value: ODataEntity.Value) -> String {
        switch value {
        case .bool(let flag):
            "<d:\(name) m:type=\"Edm.Boolean\">\(flag)</d:\(name)>"
        case .int(let number):
            "<d:\(name) m:type=\"Edm.Int32\">\(number)</d:\(name)>"
        case .dateTime(let milliseconds):
            "<d:\(name) m:type=\"Edm.DateTime\">\(ODataTime.xml(milliseconds: milliseconds))</d:\(name)>"
        case .string(let text):
            "<d:\(name)>\(escaped(text))</d:\(name)>"
        case .null:
            "<d:\(name) m:null=\"true\"/>"
        }
    }

    /// Device-supplied text for the feed: escaped, characters XML cannot carry replaced.
    static func escaped(_ text: String) -> String {
        XMLText.escaped(text, unrepresentable: .replace) ?? ""
    }

    /// Atom's `updated`: RFC 3339 in UTC.
    private static func timestamp(_ milliseconds: Int64) -> String { ISO8601Time.format(milliseconds: milliseconds) }

    static func response(_ xml: String, status: HTTPResponse.Status, contentType: String = "application/atom+xml;charset=utf-8") -> Response {
        var headers = HTTPFields()
        headers[.contentType] = contentType
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: xml)))
    }
}

extension DeviceFields {
    /// An Atom registration body as the fields a JSON one has: its properties as strings (null
    /// for `m:null`), and its inline Capability feed as the `Capability` list
    /// (docs/push.md, "Capabilities").
    package static func fields(ofAtom bytes: [UInt8]) -> Result<[String: JSON], ODataAtomEntry.Problem> {
        ODataAtomEntry.entry(of: bytes).map { entry in
            var object = Dictionary(entry.properties.map { ($0.name, JSON.string($0.value)) }, uniquingKeysWith: { first, _ in first })
            if let capabilities = entry.inline.first(where: { $0.navigation == DeviceFields.capabilityNavigation }) {
                object[DeviceFields.capabilityNavigation] = .array(
                    capabilities.entries.map { properties in
                        .object(properties.map { JSONMember(key: $0.name, value: JSON.string($0.value)) })
                    })
            }
            return object
        }
    }
}
