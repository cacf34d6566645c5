import CLibXML2
package import MidtierCore

/// Why a document could not be patched.
package struct MetadataPatchError: Error, Sendable, CustomStringConvertible {
    package var description: String
}

/// A patched property whose `Scale` has no `Precision` that fits it (none, or a smaller one),
/// judged on the patched document: strict clients (pyodata) refuse such a property.
package struct UnfittingScale: Sendable, Equatable, CustomStringConvertible {
    package var entityType: String
    package var property: String
    package var scale: Int
    /// The property's `Precision` after patching, if it has one.
    package var precision: Int?

    package var description: String {
        let reason = precision.map { "is larger than its Precision \($0)" } ?? "has no Precision"
        return "property \(property) of entity type \(entityType): Scale \(scale) \(reason)"
    }
}

/// Sets facets on properties of an OData `$metadata` (EDMX) document with libxml2
/// (docs/forwarding.md, "`$metadata` patches"), e.g. `Precision`/`Scale` on SuccessFactors'
/// `Edm.Decimal` amounts, which ship without them and which strict clients (pyodata) then
/// refuse or round.
///
/// Entity types are matched by their `Name` in any `Schema`, whatever the EDM namespace
/// version. The document is parsed as untrusted input: no network, no DTD, no entities.
package enum MetadataPatcher {
    package struct Result: Sendable {
        /// The patched document, UTF-8.
        package var document: [UInt8]
        /// Patches that matched no property (a typo, or a back end that changed).
        package var unmatched: [MetadataPatch]
        /// Patched properties whose `Scale` no `Precision` fits, in document order.
        package var unfittingScales: [UnfittingScale]
    }

    package static func apply(_ patches: [MetadataPatch], to document: [UInt8]) throws(MetadataPatchError) -> Result {
        guard document.count <= 64 << 20 else { throw MetadataPatchError(description: "the $metadata document is larger than 64 MiB") }
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue | XML_PARSE_HUGE.rawValue)
        let parsed = document.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { xmlReadMemory($0.baseAddress, Int32($0.count), "metadata.xml", nil, options) }
        }
        guard let parsed else { throw MetadataPatchError(description: "the $metadata document is not well-formed XML") }
        defer { xmlFreeDoc(parsed) }
        guard parsed.pointee.intSubset == nil else { throw MetadataPatchError(description: "the $metadata document has a DOCTYPE") }
        guard let root = xmlDocGetRootElement(parsed) else { throw MetadataPatchError(description: "the $metadata document is empty") }

        var matched = Array(repeating: false, count: patches.count)
        var patched: [(entityType: String, property: xmlNodePtr)] = []
        forEachElement(named: "EntityType", under: root) { entityType in
            guard let typeName = attribute(entityType, "Name") else { return }
            for (index, patch) in patches.enumerated() where patch.entityType == typeName {
                forEachChild(named: "Property", of: entityType) { property in
                    guard attribute(property, "Name") == patch.property else { return }
                    for (facet, value) in patch.set.sorted(by: { $0.key < $1.key }) {
                        xmlSetProp(property, facet, value)
                    }
                    matched[index] = true
                    if !patched.contains(where: { $0.property == property }) { patched.append((typeName, property)) }
                }
            }
        }
        let unfittingScales = patched.compactMap { unfittingScale(of: $0.property, in: $0.entityType) }

        var memory: UnsafeMutablePointer<xmlChar>?
        var size: Int32 = 0
        xmlDocDumpMemoryEnc(parsed, &memory, &size, "UTF-8")
        guard let memory, size > 0 else { throw MetadataPatchError(description: "the patched $metadata could not be serialized") }
        defer { midtier_xmlFree(memory) }
        let output = Array(UnsafeBufferPointer(start: memory, count: Int(size)))
        return Result(
            document: output, unmatched: zip(patches, matched).filter { !$0.1 }.map(\.0),
            unfittingScales: unfittingScales)
    }

    /// A numeric `Scale` needs a `Precision` at least as large; `variable` or `floating`
    /// (OData V4) and a non-numeric `Precision` are left to the client.
    private static func unfittingScale(of property: xmlNodePtr, in entityType: String) -> UnfittingScale? {
        guard let scale = attribute(property, "Scale").flatMap({ Int($0) }), let name = attribute(property, "Name") else { return nil }
        let precisionText = attribute(property, "Precision")
        let precision = precisionText.flatMap { Int($0) }
        if precisionText != nil, precision == nil { return nil }
        if let precision, scale <= precision { return nil }
        return UnfittingScale(entityType: entityType, property: name, scale: scale, precision: precision)
    }

    private static func localName(_ node: xmlNodePtr) -> String? {
        node.pointee.name.map { String(cString: $0) }
    }

    private static func attribute(_ node: xmlNodePtr, _ name: String) -> String? {
        guard let value = xmlGetNoNsProp(node, name) else { return nil }
        defer { midtier_xmlFree(value) }
        return String(cString: value)
    }

    private static func forEachChild(named name: String, of node: xmlNodePtr, _ body: (xmlNodePtr) -> Void) {
        var child = node.pointee.children
        while let current = child {
            if current.pointee.type == XML_ELEMENT_NODE, localName(current) == name { body(current) }
            child = current.pointee.next
        }
    }

    /// Depth-first, without recursion (a deep document cannot exhaust the stack).
    private static func forEachElement(named name: String, under root: xmlNodePtr, _ body: (xmlNodePtr) -> Void) {
        var stack: [xmlNodePtr] = [root]
        while let node = stack.popLast() {
            if node.pointee.type == XML_ELEMENT_NODE, localName(node) == name { body(node) }
            var child = node.pointee.children
            while let current = child {
                if current.pointee.type == XML_ELEMENT_NODE { stack.append(current) }
                child = current.pointee.next
            }
        }
    }
}
