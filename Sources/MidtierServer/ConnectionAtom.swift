import Foundation
import HTTPTypes
import Hummingbird
import SAMLSigning

/// The registration API's original format: Connections as OData v2 Atom/XML, for clients that
/// ask for it (`Accept: application/atom+xml` or `$format=atom`; docs/device-api.md). The
/// properties are the JSON entity's, typed the way OData v2 writes them.
enum ConnectionAtom {
    static let atomNamespace = "http://www.w3.org/2005/Atom"
    static let metadataNamespace = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
    static let dataNamespace = "http://schemas.microsoft.com/ado/2007/08/dataservices"

    /// Whether the request asks for Atom rather than JSON: `$format=atom|xml`, or (without
    /// `$format`) an `Accept` that names Atom or XML and not JSON.
    static func isWanted(_ request: Request) -> Bool {
        if let format = request.uri.queryParameters["$format"] {
            return format == "atom" || format == "xml"
        }
        let accept = request.headers[values: .accept].joined(separator: ",").lowercased()
        return (accept.contains("application/atom+xml") || accept.contains("application/xml")) && !accept.contains("application/json")
    }

    /// One Connection as an Atom `entry` document.
    static func entry(_ properties: [String: Any], now: Date = Date()) -> String {
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n" + entryElement(properties, root: true, now: now)
    }

    /// Connections as an Atom `feed` document; `base` is the collection's URL.
    static func feed(_ entities: [[String: Any]], base: String, now: Date = Date()) -> String {
        var xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
        xml += "<feed xmlns=\"\(atomNamespace)\" xmlns:m=\"\(metadataNamespace)\" xmlns:d=\"\(dataNamespace)\">"
        xml += "<id>\(escaped(base))</id><title type=\"text\">Connections</title><updated>\(timestamp(now))</updated>"
        xml += "<link rel=\"self\" title=\"Connections\" href=\"\(escaped(base))\"/>"
        for entity in entities { xml += entryElement(entity, root: false, now: now) }
        return xml + "</feed>"
    }

    private static func entryElement(_ properties: [String: Any], root: Bool, now: Date) -> String {
        let uri = (properties["__metadata"] as? [String: Any])?["uri"] as? String ?? ""
        var xml = root ? "<entry xmlns=\"\(atomNamespace)\" xmlns:m=\"\(metadataNamespace)\" xmlns:d=\"\(dataNamespace)\">" : "<entry>"
        xml += "<id>\(escaped(uri))</id><title type=\"text\"/><updated>\(timestamp(now))</updated><author><name/></author>"
        xml += "<link rel=\"edit\" title=\"Connection\" href=\"\(escaped(uri))\"/>"
        xml += "<category term=\"applications.Connection\" scheme=\"http://schemas.microsoft.com/ado/2007/08/dataservices/scheme\"/>"
        xml += "<content type=\"application/xml\"><m:properties>"
        for name in properties.keys.sorted() where name != "__metadata" {
            xml += property(name, properties[name]!)
        }
        return xml + "</m:properties></content></entry>"
    }

    private static func property(_ name: String, _ value: Any) -> String {
        switch value {
        case let flag as Bool:
            return "<d:\(name) m:type=\"Edm.Boolean\">\(flag)</d:\(name)>"
        case let number as Int:
            return "<d:\(name) m:type=\"Edm.Int32\">\(number)</d:\(name)>"
        case let text as String where text.hasPrefix("/Date(") && text.hasSuffix(")/"):
            let milliseconds = Int64(text.dropFirst(6).dropLast(2)) ?? 0
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            return "<d:\(name) m:type=\"Edm.DateTime\">\(dateTime(date))</d:\(name)>"
        case let text as String:
            return "<d:\(name)>\(escaped(text))</d:\(name)>"
        default:
            return "<d:\(name) m:null=\"true\"/>"
        }
    }

    /// Device-supplied text for the feed: escaped, characters XML cannot carry replaced.
    static func escaped(_ text: String) -> String {
        XMLText.escaped(text, unrepresentable: .replace) ?? ""
    }

    private static func timestamp(_ date: Date) -> String { date.formatted(.iso8601) }

    /// `2026-11-25T10:00:00` (OData v2's `Edm.DateTime`, UTC: ISO 8601 without the zone).
    private static func dateTime(_ date: Date) -> String { String(timestamp(date).dropLast()) }

    static func response(_ xml: String, status: HTTPResponse.Status) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/atom+xml;charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: xml)))
    }
}
