import MidtierCore

/// The path of a proxied call, `/{destinationName}/{rest}` (docs/forwarding.md).
package struct ProxyPath: Sendable, Equatable {
    /// The first path segment, as sent.
    package var destination: Substring
    /// The raw rest of the path after the destination name: empty or starting with `/`.
    /// Forwarded as it came (percent-encodings kept), once `problem(in:)` found nothing.
    package var remainder: Substring

    /// Splits a raw request path; nil when it does not start with a non-empty first segment.
    package init?(rawPath: String) {
        let path = rawPath[...]
        guard path.first == "/" else { return nil }
        let afterSlash = path.dropFirst()
        let end = afterSlash.firstIndex(of: "/") ?? afterSlash.endIndex
        guard end > afterSlash.startIndex else { return nil }
        destination = afterSlash[..<end]
        remainder = afterSlash[end...]
    }

    /// Why the remainder must not be forwarded, or nil when it is safe.
    ///
    /// A back end may decode a path once or twice, or treat `;` parameters and backslashes
    /// as separators (Tomcat, IIS). So every segment is percent-decoded until it stops changing
    /// (at most three rounds), and refused when any round yields `.` or `..` (before a `;`), a
    /// slash or backslash, a control character, or bytes that are not UTF-8 (overlong forms of
    /// `.` and `/`). Nothing that could climb out of the destination's base path goes through.
    package static func problem(in remainder: Substring) -> String? {
        isPlain(remainder) ? nil : problemBySegments(in: remainder)
    }

    /// `problem(in:)` without the shortcut for plain paths.
    static func problemBySegments(in remainder: Substring) -> String? {
        for segment in remainder.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
            var bytes = Array(segment.utf8)
            if bytes.contains(UInt8(ascii: "\\")) { return "backslashes are not allowed in the path" }
            for _ in 0..<3 {
                if let problem = problem(inDecodedSegment: bytes) { return problem }
                guard bytes.contains(UInt8(ascii: "%")) else { break }
                guard let decoded = percentDecoded(bytes) else { return "the path has a malformed percent-encoding" }
                if decoded.contains(UInt8(ascii: "/")) { return "encoded slashes are not allowed in the path" }
                if decoded.contains(UInt8(ascii: "\\")) { return "encoded backslashes are not allowed in the path" }
                bytes = decoded
            }
            if let problem = problem(inDecodedSegment: bytes) { return problem }
        }
        return nil
    }

    /// Whether the remainder is printable ASCII without `%` or `\` and no segment is a dot
    /// segment: then no round of decoding can change it, and it is safe as it is (every
    /// ordinary OData path; checked in one pass without copying).
    private static func isPlain(_ remainder: Substring) -> Bool {
        var segmentLength = 0
        var dots = 0
        var inParameters = false
        func endsDotSegment() -> Bool { segmentLength > 0 && dots == segmentLength && dots <= 2 }
        for byte in remainder.utf8 {
            switch byte {
            case UInt8(ascii: "/"):
                if endsDotSegment() { return false }
                segmentLength = 0; dots = 0; inParameters = false
            case UInt8(ascii: "%"), UInt8(ascii: "\\"), 0..<0x21, 0x7F...:
                return false
            case UInt8(ascii: ";"):
                if endsDotSegment() { return false }
                inParameters = true
            default:
                if !inParameters {
                    segmentLength += 1
                    if byte == UInt8(ascii: ".") { dots += 1 }
                }
            }
        }
        return !endsDotSegment()
    }

    private static func problem(inDecodedSegment bytes: [UInt8]) -> String? {
        if bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return "control characters are not allowed in the path" }
        guard String(validating: bytes, as: UTF8.self) != nil else { return "the path is not valid UTF-8" }
        let beforeParameters = bytes.prefix { $0 != UInt8(ascii: ";") }
        if beforeParameters.elementsEqual(".".utf8) || beforeParameters.elementsEqual("..".utf8) {
            return "dot segments are not allowed in the path"
        }
        return nil
    }

    /// One round of percent-decoding; nil when a `%` is not followed by two hex digits.
    static func percentDecoded(_ bytes: [UInt8]) -> [UInt8]? {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = Hex.value(of: bytes[index + 1]), let low = Hex.value(of: bytes[index + 2]) else {
                    return nil
                }
                result.append(high << 4 | low)
                index += 3
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return result
    }
}
