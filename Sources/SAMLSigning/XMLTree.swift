import CLibXML2
import Foundation

/// A parsed XML document owned by this object (freed in `deinit`).
///
/// Parsing is for untrusted input: no network access, no entity expansion, no DTD loading, and
/// any document with a `DOCTYPE` is refused outright (SAML has no use for one, and it is how
/// entity attacks start). Not `Sendable`: use it on one task and let it go.
final class XMLTree {
    let document: xmlDocPtr

    init(parsing bytes: [UInt8]) throws(SigningError) {
        guard !bytes.isEmpty else { throw SigningError(.invalidXML, "the XML document is empty") }
        guard bytes.count <= 1 << 20 else { throw SigningError(.invalidXML, "the XML document is larger than 1 MiB") }
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue)
        xmlResetLastError()
        let parsed = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { xmlReadMemory($0.baseAddress, Int32($0.count), "input.xml", nil, options) }
        }
        guard let parsed else {
            throw SigningError(.invalidXML, "the XML is not well-formed: \(XMLTree.lastParserError())")
        }
        guard parsed.pointee.intSubset == nil, parsed.pointee.extSubset == nil else {
            xmlFreeDoc(parsed)
            throw SigningError(.invalidXML, "the XML has a DOCTYPE, which is not allowed")
        }
        guard xmlDocGetRootElement(parsed) != nil else {
            xmlFreeDoc(parsed)
            throw SigningError(.invalidXML, "the XML has no root element")
        }
        self.document = parsed
    }

    deinit { xmlFreeDoc(document) }

    var root: XMLElement { XMLElement(node: xmlDocGetRootElement(document)!) }

    private static func lastParserError() -> String {
        guard let error = xmlGetLastError(), let message = error.pointee.message else { return "unknown parser error" }
        let text = String(cString: message).trimmingWhitespace()
        return "line \(error.pointee.line): \(text)"
    }

    /// Exclusive XML canonicalization 1.0 (without comments) of the subtree at `subtree`,
    /// leaving out the subtree at `excluded` (the enveloped-signature transform).
    func exclusiveCanonicalForm(of subtree: XMLElement, excluding excluded: XMLElement? = nil) throws(SigningError) -> [UInt8] {
        guard let output = xmlAllocOutputBuffer(nil) else { throw SigningError(.invalidXML, "cannot allocate a c14n buffer") }
        var selection = C14NSelection(subtree: subtree.node, excluded: excluded?.node)
        let status = withUnsafeMutablePointer(to: &selection) { selectionPointer in
            xmlC14NExecute(document, c14nIsVisible, selectionPointer, Int32(XML_C14N_EXCLUSIVE_1_0.rawValue), nil, 0, output)
        }
        defer { xmlOutputBufferClose(output) }
        guard status >= 0, let content = xmlOutputBufferGetContent(output) else {
            throw SigningError(.invalidXML, "exclusive canonicalization failed")
        }
        return Array(UnsafeBufferPointer(start: content, count: Int(xmlOutputBufferGetSize(output))))
    }
}

/// Which nodes the canonicalization sees: those under `subtree` and not under `excluded`.
private struct C14NSelection {
    var subtree: xmlNodePtr
    var excluded: xmlNodePtr?
}

/// Byte offset of `type` in `xmlNode`; `xmlNs` keeps its `type` at the same offset, which is
/// the only field read from a node that may be a namespace node.
private let nodeTypeOffset = MemoryLayout<xmlNode>.offset(of: \xmlNode.type)!

private func c14nIsVisible(_ userData: UnsafeMutableRawPointer?, _ node: xmlNodePtr?, _ parent: xmlNodePtr?) -> Int32 {
    guard let userData, let node else { return 0 }
    let selection = userData.assumingMemoryBound(to: C14NSelection.self).pointee
    let type = UnsafeRawPointer(node).load(fromByteOffset: nodeTypeOffset, as: xmlElementType.self)
    // Namespace nodes are `xmlNs*` in disguise: judge them by the element that holds them.
    var current: xmlNodePtr? = type == XML_NAMESPACE_DECL ? parent : node
    while let here = current {
        if here == selection.excluded { return 0 }
        if here == selection.subtree { return 1 }
        current = here.pointee.parent
    }
    return 0
}

/// A read-only view of one element of an ``XMLTree``; valid while the tree lives.
struct XMLElement {
    let node: xmlNodePtr

    var localName: String { node.pointee.name.map { String(cString: $0) } ?? "" }
    var namespaceURI: String? { node.pointee.ns?.pointee.href.map { String(cString: $0) } }

    func isElement(_ localName: String, in namespace: String) -> Bool {
        self.localName == localName && namespaceURI == namespace
    }

    /// Child elements, in document order.
    var children: [XMLElement] {
        var result: [XMLElement] = []
        var child = node.pointee.children
        while let current = child {
            if current.pointee.type == XML_ELEMENT_NODE { result.append(XMLElement(node: current)) }
            child = current.pointee.next
        }
        return result
    }

    func children(named localName: String, in namespace: String) -> [XMLElement] {
        children.filter { $0.isElement(localName, in: namespace) }
    }

    /// The single child element with this name; nil when there is none; an error when there
    /// are several (ambiguity is how signature-wrapping attacks begin).
    func onlyChild(named localName: String, in namespace: String) throws(SigningError) -> XMLElement? {
        let matches = children(named: localName, in: namespace)
        guard matches.count <= 1 else { throw SigningError(.invalidSignature, "more than one \(localName) element") }
        return matches.first
    }

    func requiredChild(named localName: String, in namespace: String) throws(SigningError) -> XMLElement {
        guard let child = try onlyChild(named: localName, in: namespace) else {
            throw SigningError(.invalidSignature, "the \(self.localName) element has no \(localName)")
        }
        return child
    }

    /// An `xs:dateTime` attribute: nil when absent; an error when present but not a time, so
    /// that a malformed limit never silently skips the check it stands for.
    func time(_ name: String) throws(SigningError) -> Date? {
        guard let text = attribute(name) else { return nil }
        guard let date = XMLTime.parse(text) else {
            throw SigningError(.invalidSignature, "the \(localName) element's \(name) is not a date and time with a zone")
        }
        return date
    }

    /// An attribute without a namespace.
    func attribute(_ name: String) -> String? {
        guard let value = xmlGetNoNsProp(node, name) else { return nil }
        defer { midtier_xmlFree(value) }
        return String(cString: value)
    }

    /// The concatenated text content of this element and its descendants.
    var text: String {
        guard let value = xmlNodeGetContent(node) else { return "" }
        defer { midtier_xmlFree(value) }
        return String(cString: value)
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}
