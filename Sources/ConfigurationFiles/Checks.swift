import Foundation
import MidtierCore

// Checks of single values. Each returns the accepted value, or a message for the problem.
// Messages never repeat the value: it might be a secret pasted into the wrong key.

/// `host:port`, with an IPv6 host in brackets (`[::1]:9090`) and a port from 1 to 65535.
/// The host is a name or IPv4 address (letters, digits, `.`, `-`), or an IPv6 address.
func parseListenAddress(_ text: String) -> Result<ListenAddress, ValueProblem> {
    let format = ValueProblem("must be host:port (an IPv6 host in brackets, as in [::1]:9090) with a port from 1 to 65535")
    let host: Substring
    let port: Substring
    if text.hasPrefix("[") {
        guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
            return .failure(format)
        }
        host = text[text.index(after: text.startIndex)..<close]
        port = text[text.index(close, offsetBy: 2)...]
        let ipv6 = host.allSatisfy { $0.isASCII && ($0.isHexDigit || $0 == ":" || $0 == ".") }
        guard host.contains(":"), ipv6 else { return .failure(format) }
    } else {
        guard let colon = text.lastIndex(of: ":") else { return .failure(format) }
        host = text[..<colon]
        port = text[text.index(after: colon)...]
        if host.contains(":") {
            return .failure(ValueProblem("an IPv6 host must be written in brackets, as in [::1]:9090"))
        }
        guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) else {
            return .failure(format)
        }
    }
    guard !host.isEmpty,
        !port.isEmpty, port.count <= 5, port.allSatisfy({ $0.isASCII && $0.isNumber }),
        let number = Int(port), (1...65535).contains(number)
    else { return .failure(format) }
    return .success(ListenAddress(host: String(host), port: number))
}

/// Whether two listen addresses would compete for the same socket.
func listenAddressesClash(_ a: ListenAddress, _ b: ListenAddress) -> Bool {
    let wildcards: Set<String> = ["0.0.0.0", "::"]
    return a.port == b.port && (a.host == b.host || wildcards.contains(a.host) || wildcards.contains(b.host))
}

struct ValueProblem: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// An absolute `http` or `https` URL with a host, without user name or password (those
/// belong in `User`/`Password`, not in a URL that ends up in logs) and without a fragment.
/// With `allowQuery: false` a query is refused too and trailing slashes are removed, so
/// that a path can be appended.
func checkHTTPURL(_ text: String, allowQuery: Bool) -> Result<String, ValueProblem> {
    let absolute = ValueProblem("must be an absolute http or https URL")
    guard !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }),
        let components = URLComponents(string: text),
        let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
        let host = components.host, !host.isEmpty,
        text.lowercased().hasPrefix(scheme + "://")
    else { return .failure(absolute) }
    if components.user != nil || components.password != nil {
        return .failure(ValueProblem("must not contain a user name or password"))
    }
    if let port = components.port, !(1...65535).contains(port) {
        return .failure(ValueProblem("must have a port from 1 to 65535"))
    }
    if components.fragment != nil || text.contains("#") {
        return .failure(ValueProblem("must not contain a fragment (#…)"))
    }
    if allowQuery { return .success(text) }
    if components.query != nil || text.contains("?") {
        return .failure(ValueProblem("must not contain a query (?…); use URL.queries.<name> keys"))
    }
    var trimmed = Substring(text)
    while trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    return .success(String(trimmed))
}

/// A bcrypt hash as `midtier hash-secret` prints it: `$2a$`, `$2b$` or `$2y$`, a two-digit
/// cost from 04 to 31, `$`, and 53 characters of bcrypt's base64 alphabet (60 in all).
func isBcryptHash(_ text: String) -> Bool {
    let bytes = Array(text.utf8)
    guard bytes.count == 60,
        text.hasPrefix("$2a$") || text.hasPrefix("$2b$") || text.hasPrefix("$2y$"),
        bytes[6] == UInt8(ascii: "$"),
        let cost = Int(String(decoding: bytes[4..<6], as: UTF8.self)), (4...31).contains(cost)
    else { return false }
    return bytes[7...].allSatisfy { byte in
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "/")
    }
}

/// Whether every character is an ASCII letter, digit, or one of `extra`.
func isPlainName(_ text: String, extra: Set<Character>) -> Bool {
    !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || extra.contains($0)) }
}

/// A destination name (docs/configuration.md, "Destination names"): one plain path segment of
/// letters, digits, `.`, `_` and `-` (dots as in SAP's `com.sap.edm.sampleservice.v2`), not
/// starting with `.` (so never `.` or `..`), and not a segment of Midtier's own routes.
func checkDestinationName(_ name: String) -> ValueProblem? {
    guard isPlainName(name, extra: [".", "_", "-"]), !name.hasPrefix(".") else {
        return ValueProblem("must consist of letters, digits, '.', '_' and '-' only, and not start with '.'")
    }
    if ReservedPathSegments.isReserved(destinationName: name) {
        return ValueProblem("\"\(name)\" is reserved for Midtier's own routes; choose another name")
    }
    return nil
}

/// An HTTP header field name (RFC 9110 token).
func isHTTPToken(_ text: String) -> Bool {
    let symbols: Set<Character> = ["!", "#", "$", "%", "&", "'", "*", "+", "-", ".", "^", "_", "`", "|", "~"]
    return isPlainName(text, extra: symbols)
}

/// Whether a text contains control characters other than tab (CR and LF would split a
/// header; NUL is refused by every careful HTTP stack).
func containsControlCharacters(_ text: String) -> Bool {
    text.unicodeScalars.contains { ($0.value < 0x20 && $0.value != 0x09) || $0.value == 0x7F }
}
