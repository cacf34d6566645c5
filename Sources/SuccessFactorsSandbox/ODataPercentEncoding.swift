import Foundation

extension String {
    /// `application/x-www-form-urlencoded` decoding, for query strings and the token form: `+` is
    /// a space (as browsers and curl's `--data-urlencode` send it), then `%XX` escapes are decoded
    /// (Foundation's `removingPercentEncoding`). nil when an escape is malformed or the bytes are
    /// not UTF-8.
    var formDecoded: String? {
        replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}

extension CharacterSet {
    /// What the URIs the service writes (`__metadata.uri`, `__deferred`, `__next`) keep as it is
    /// in a path segment or key literal: unreserved characters and the delimiters OData URIs use
    /// literally (`$ ' ( ) , : * = @ !`). `/`, `&`, `+`, `#`, `%`, space and non-ASCII are escaped.
    static let odataPathSegment = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~$'(),:*=@!")

    /// The same, keeping `/` as well, for query option names and values in `__next`.
    static let odataQueryValue = odataPathSegment.union(CharacterSet(charactersIn: "/"))
}
