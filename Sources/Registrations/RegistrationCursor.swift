/// A registrations page's `next`: `r1.` and the id of the last registration on the page
/// (docs/admin-api.yaml, `RegistrationCursor`). Clients treat it as opaque; it names a place in
/// the order of ids' bytes, so any well-formed one is a valid place to read on from, whether or
/// not its registration still exists. Registration ids are 1 to 128 URL-safe characters
/// (`RegistrationService.isAcceptableID`), so the id is carried as it is.
package enum RegistrationCursor {
    static let version = "r1."

    package static func encode(after id: String) -> String { version + id }

    /// The id `text` carries, or nil for anything that is not a cursor Midtier makes.
    package static func decode(_ text: String) -> String? {
        guard text.utf8.starts(with: version.utf8) else { return nil }
        let id = String(decoding: text.utf8.dropFirst(version.utf8.count), as: UTF8.self)
        return RegistrationService.isAcceptableID(id) ? id : nil
    }
}

extension RegistrationCursor {
    /// The page size `text` asks for: a whole number from 1 to `maximum`, digits only, without
    /// a leading zero; `default` when not given; nil for anything else, empty included.
    package static func limit(_ text: String?, default: Int, maximum: Int) -> Int? {
        guard let text else { return `default` }
        let digits = String(maximum).utf8.count
        guard (1...digits).contains(text.utf8.count), text.utf8.first != UInt8(ascii: "0"),
            text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let parsed = Int(text), (1...maximum).contains(parsed)
        else { return nil }
        return parsed
    }
}
