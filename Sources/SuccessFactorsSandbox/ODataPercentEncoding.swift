import Foundation

/// Percent-decoding of request paths and query strings, and percent-encoding for the URIs the
/// service writes (`__metadata.uri`, `__deferred`, `__next`).
enum ODataPercentEncoding {
    /// Decodes `%XX` escapes (and, in query strings, `+` as a space, as browsers and curl's
    /// `--data-urlencode` send it). nil when an escape is malformed or the bytes are not UTF-8.
    static func decode(_ text: String, plusAsSpace: Bool) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+") where plusAsSpace:
                bytes.append(UInt8(ascii: " "))
            default:
                bytes.append(byte)
            }
        }
        return String(bytes: bytes, encoding: .utf8)
    }

    /// Encodes everything except unreserved characters and the few delimiters OData URIs use
    /// literally (`$ ' ( ) , : / * = @ !`). `&`, `+`, `#`, `%`, space and non-ASCII are escaped.
    static func encode(_ text: String, keepingSlash: Bool = true) -> String {
        var output = ""
        for byte in text.utf8 {
            if isKept(byte) || (keepingSlash && byte == UInt8(ascii: "/")) {
                output.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                output += "%" + String(hexDigits[Int(byte >> 4)]) + String(hexDigits[Int(byte & 0x0F)])
            }
        }
        return output
    }

    private static let hexDigits = Array("0123456789ABCDEF")

    private static func isKept(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "-._~$'(),:*=@!".utf8.contains(byte)
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
