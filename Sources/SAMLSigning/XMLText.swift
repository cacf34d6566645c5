/// Text in XML documents Midtier writes (SAML assertions, Atom registration feeds): the one
/// escaper for attribute values and element content.
package enum XMLText {
    /// What to do with a character XML 1.0 cannot carry at all (controls other than tab, CR, LF;
    /// U+FFFE, U+FFFF).
    package enum Unrepresentable {
        /// Give up: the caller refuses the value (what a signed assertion needs).
        case refuse
        /// Write U+FFFD instead (what a listing of device-supplied values needs).
        case replace
    }

    package static func isRepresentable(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return value >= 0x20 ? value != 0xFFFE && value != 0xFFFF : scalar == "\t" || scalar == "\n" || scalar == "\r"
    }

    /// `value` with `& < > " '` escaped and tab, LF, CR as character references (so that they
    /// survive attribute-value normalization); nil when it holds an unrepresentable character
    /// and `unrepresentable` is `.refuse`.
    package static func escaped(_ value: String, unrepresentable: Unrepresentable) -> String? {
        var result = ""
        result.reserveCapacity(value.utf8.count)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            case "\t": result += "&#9;"
            case "\n": result += "&#10;"
            case "\r": result += "&#13;"
            default:
                if isRepresentable(scalar) {
                    result.unicodeScalars.append(scalar)
                } else if unrepresentable == .replace {
                    result.unicodeScalars.append("\u{FFFD}")
                } else {
                    return nil
                }
            }
        }
        return result
    }
}
