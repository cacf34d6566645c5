import CLibXML2

/// The properties of an OData v2 Atom `entry` a client sends (the registration API's
/// documented body; docs/device-api.md, "Registration in Atom"), read with the parser SAML
/// uses (``XMLTree``): no network, no entity expansion, no DTD, a `DOCTYPE` refused outright.
package enum ODataAtomEntry {
    package static let atomNamespace = "http://www.w3.org/2005/Atom"
    package static let metadataNamespace = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
    package static let dataNamespace = "http://schemas.microsoft.com/ado/2007/08/dataservices"

    /// One `d:` property: its text, or nil when it says `m:null="true"`.
    package struct Property: Sendable, Equatable {
        package let name: String
        package let value: String?

        package init(name: String, value: String?) {
            self.name = name
            self.value = value
        }
    }

    /// Why a body is not an entry Midtier can read; `message` names what is wrong.
    package struct Problem: Error, Sendable, Equatable {
        package let message: String
    }

    /// An entry as Midtier reads it: its own properties, and the entries of the feeds it carries
    /// inline (`<link rel="…/related/{navigation}"><m:inline><feed><entry>…`), by navigation
    /// property, as SAP's registration takes a device's capabilities (docs/push.md).
    package struct Entry: Sendable, Equatable {
        package var properties: [Property]
        /// The properties of each inline entry, by the link's navigation property, in order.
        package var inline: [(navigation: String, entries: [[Property]])]

        package static func == (a: Entry, b: Entry) -> Bool {
            a.properties == b.properties && a.inline.elementsEqual(b.inline) { $0.navigation == $1.navigation && $0.entries == $1.entries }
        }
    }

    /// The link relation an inline feed's navigation property is named under.
    package static let relatedPrefix = "http://schemas.microsoft.com/ado/2007/08/dataservices/related/"
    /// At most this many inline entries in one entry: a device has a few capabilities.
    package static let maximumInlineEntries = 64

    /// The `d:*` children of the entry's `m:properties` (under `content`, or directly under
    /// `entry` as OData v2's media link entries have it), in document order. The rest of the
    /// entry (`title`, `updated`, `author`, `category`, links) is not read: SAP's own example
    /// carries an invalid `updated` date.
    package static func properties(of bytes: [UInt8]) -> Result<[Property], Problem> {
        entry(of: bytes).map(\.properties)
    }

    /// The entry's properties (``properties(of:)``) and its inline feeds' entries, one level
    /// deep: an inline entry's own links are not read.
    package static func entry(of bytes: [UInt8]) -> Result<Entry, Problem> {
        let tree: XMLTree
        do {
            tree = try XMLTree(parsing: bytes)
        } catch {
            return .failure(Problem(message: "the Atom entry: \(error.message)"))
        }
        return withExtendedLifetime(tree) { () -> Result<Entry, Problem> in
            let entry = tree.root
            guard entry.isElement("entry", in: atomNamespace) else {
                return .failure(Problem(message: "the root element is \(entry.localName), not an Atom entry (\(atomNamespace))"))
            }
            let properties: [Property]
            switch Self.properties(in: entry, required: true) {
            case .success(let found): properties = found
            case .failure(let problem): return .failure(problem)
            }
            var inline: [(navigation: String, entries: [[Property]])] = []
            var count = 0
            for link in entry.children(named: "link", in: atomNamespace) {
                guard let rel = link.attribute("rel"), rel.hasPrefix(relatedPrefix) else { continue }
                let navigation = String(rel.dropFirst(relatedPrefix.count))
                var entries: [[Property]] = []
                for holder in link.children(named: "inline", in: metadataNamespace) {
                    for feed in holder.children(named: "feed", in: atomNamespace) {
                        for inner in feed.children(named: "entry", in: atomNamespace) {
                            count += 1
                            guard count <= maximumInlineEntries else {
                                return .failure(Problem(message: "the Atom entry carries more than \(maximumInlineEntries) inline entries"))
                            }
                            switch Self.properties(in: inner, required: false) {
                            case .success(let found): entries.append(found)
                            case .failure(let problem): return .failure(Problem(message: "inline \(navigation): \(problem.message)"))
                            }
                        }
                    }
                }
                inline.append((navigation, entries))
            }
            return .success(Entry(properties: properties, inline: inline))
        }
    }

    /// The `d:*` children of `entry`'s one `m:properties`; none when it has none and they are
    /// not `required`.
    private static func properties(in entry: XMLElement, required: Bool) -> Result<[Property], Problem> {
        var holders = entry.children(named: "properties", in: metadataNamespace)
        for content in entry.children(named: "content", in: atomNamespace) {
            holders += content.children(named: "properties", in: metadataNamespace)
        }
        guard !holders.isEmpty else {
            if !required { return .success([]) }
            return .failure(Problem(message: "the Atom entry has no m:properties (in its content), the element that carries the fields"))
        }
        guard holders.count == 1 else { return .failure(Problem(message: "the Atom entry has more than one m:properties")) }
        var result: [Property] = []
        var seen: Set<String> = []
        for property in holders[0].children {
            let name = property.localName
            guard property.namespaceURI == dataNamespace else {
                return .failure(Problem(message: "m:properties holds \(name), which is not in the OData data namespace (\(dataNamespace))"))
            }
            guard seen.insert(name).inserted else { return .failure(Problem(message: "d:\(name) is given more than once")) }
            guard property.children.isEmpty else {
                return .failure(Problem(message: "d:\(name) holds elements; Connection properties are simple values"))
            }
            switch property.namespacedAttribute("null", in: metadataNamespace) {
            case "true"?:
                result.append(Property(name: name, value: nil))
            case nil, "false"?:
                result.append(Property(name: name, value: property.text))
            case let other?:
                return .failure(Problem(message: "d:\(name) has m:null=\"\(other)\"; it must be true or false"))
            }
        }
        return .success(result)
    }
}

extension XMLElement {
    /// An attribute in a namespace (`m:null`).
    func namespacedAttribute(_ name: String, in namespace: String) -> String? {
        guard let value = xmlGetNsProp(node, name, namespace) else { return nil }
        defer { midtier_xmlFree(value) }
        return String(cString: value)
    }
}
