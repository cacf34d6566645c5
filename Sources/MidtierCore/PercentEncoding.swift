import Foundation

extension String {
    /// The string with every byte percent-encoded except RFC 3986's unreserved characters
    /// (`A–Z a–z 0–9 - . _ ~`) and those in `keeping`: for query values, form fields and links.
    /// Foundation's encoder; Midtier has no other.
    package func percentEncoded(keeping: String = "") -> String {
        let allowed = keeping.isEmpty ? CharacterSet.unreservedInURLs : CharacterSet.unreservedInURLs.union(CharacterSet(charactersIn: keeping))
        // Never nil for valid Unicode text, which every String is.
        return addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

extension CharacterSet {
    /// RFC 3986 unreserved: letters, digits, `-._~`.
    static let unreservedInURLs = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
