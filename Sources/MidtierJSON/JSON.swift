/// A JSON value: what the strict reader reads (``StrictJSON``, ``JSONParser``), what the
/// configuration keeps as given, and what every JSON answer is written from
/// (``JSON/serialized()``). Numbers keep their text (so `15` stays `15`, and a number too large
/// for any type is a problem, not a crash); object members keep their order and their exact
/// keys, and are looked up by their bytes. (The strict reader refuses an object whose keys
/// differ only in Unicode normalization, as a key written twice.)
package indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSON])
    case object([JSONMember])

    /// "a string", "an object", … for messages.
    package var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// One member of a JSON object. (A struct rather than a labeled tuple: Swift 6.3 reports a
/// spurious "circular reference" for a recursive enum holding an array of labeled tuples.)
package struct JSONMember: Sendable, Equatable {
    package var key: String
    package var value: JSON

    package init(key: String, value: JSON) {
        self.key = key
        self.value = value
    }
}

/// The text of UTF-8 bytes, or nil if they are not valid UTF-8. (`String(validating:as:)`
/// needs macOS 15; the package supports macOS 14.)
package func utf8Text(_ bytes: [UInt8]) -> String? {
    let text = String(decoding: bytes, as: UTF8.self)
    return text.utf8.elementsEqual(bytes) ? text : nil
}

/// One step of a key path, kept unjoined while parsing so that long keys nested deeply cost
/// nothing unless a problem needs the path.
package enum PathComponent {
    case key(String)
    case index(Int)
}

/// `[.key("users"), .index(2), .key("id")]` = `users[2].id`.
package func keyPath(_ components: [PathComponent]) -> String {
    var path = ""
    for component in components {
        switch component {
        case .key(let key): path = keyPath(path, key)
        case .index(let index): path = keyPath(path, index: index)
        }
    }
    return path
}

/// Joins key paths: `authentication` + `jwks` = `authentication.jwks`.
/// A key longer than 100 characters is shortened (`abc…`), so that key paths stay readable
/// and bounded whatever the input.
package func keyPath(_ parent: String, _ key: String) -> String {
    let shown = key.count > 100 ? key.prefix(100) + "…" : key
    return parent.isEmpty ? shown : parent + "." + shown
}

/// Joins key paths for array elements: `users` + 2 = `users[2]`.
package func keyPath(_ parent: String, index: Int) -> String {
    "\(parent)[\(index)]"
}
