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

    /// The `d:*` children of the entry's `m:properties` (under `content`, or directly under
    /// `entry` as OData v2's media link entries have it), in document order. The rest of the
    /// entry (`title`, `updated`, `author`, `category`, links) is not read: SAP's own example
    /// carries an invalid `updated` date.
    package static func properties(of bytes: [UInt8]) -> Result<[Property], Problem> {
        let tree: XMLTree
        do {
            tree = try XMLTree(parsing: bytes)
        } catch {
            return .failure(Problem(message: "the Atom entry: \(error.message)"))
        }
        return withExtendedLifetime(tree) { () -> Result<[Property], Problem> in
            let entry = tree.root
            guard entry.isElement("entry", in: atomNamespace) else {
                return .failure(Problem(message: "the root element is \(entry.localName), not an Atom entry (\(atomNamespace))"))
            }
            var holders = entry.children(named: "properties", in: metadataNamespace)
            for content in entry.children(named: "content", in: atomNamespace) {
                holders += content.children(named: "properties", in: metadataNamespace)
            }
            guard !holders.isEmpty else {
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
}

extension XMLElement {
    /// An attribute in a namespace (`m:null`).
    func namespacedAttribute(_ name: String, in namespace: String) -> String? {
        guard let value = xmlGetNsProp(node, name, namespace) else { return nil }
        defer { midtier_xmlFree(value) }
        return String(cString: value)
    }
}
