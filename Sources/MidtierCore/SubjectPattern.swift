// The subject of a user's certificate for `PrincipalPropagation` (docs/forwarding.md,
// "Subject pattern"), written as SAP Cloud Connector's subject patterns are:
// `CN=${name},OU=Mobile,O=Example,C=DE`.

/// A parsed `subjectPattern`: relative distinguished names in the order written (most
/// significant last, as LDAP strings are written), each an attribute type and a value of text
/// and `${variable}` parts. The user's values are put into the certificate as they are, never
/// parsed as a name again, so no value can add or change an attribute.
package struct SubjectPattern: Sendable, Equatable, CustomStringConvertible {
    /// The attribute types a pattern may use, by the names Cloud Connector shows.
    package enum AttributeType: String, Sendable, CaseIterable {
        case commonName = "CN"
        case email = "EMAIL"
        case locality = "L"
        case organization = "O"
        case organizationalUnit = "OU"
        case state = "ST"
        case country = "C"
        case domainComponent = "DC"
        case userID = "UID"
    }

    /// One part of a value: literal text, or a variable the user's attributes fill in.
    package enum Part: Sendable, Equatable {
        case text(String)
        case variable(String)
    }

    package struct Attribute: Sendable, Equatable {
        package var type: AttributeType
        package var parts: [Part]
    }

    /// As written, left to right.
    package let attributes: [Attribute]
    /// The pattern as configured.
    package let description: String

    /// The most attributes a pattern may have, and the longest value (RFC 5280's upper bound
    /// for a common name is 64; values are bounded after filling in).
    package static let maximumAttributes = 16
    package static let maximumValueLength = 256

    /// The default, Cloud Connector's: the user's principal name as the common name. (`try!`
    /// on this fixed literal only, which `SubjectPatternTests` parses; no input reaches it.)
    package static let standard = try! SubjectPattern("CN=${name}")

    /// Parses a pattern; the error names what is wrong. `\,` and `\\` write a comma or a
    /// backslash into a value; `$` not followed by `{` is text.
    package init(_ pattern: String) throws(SubjectPatternError) {
        guard !pattern.trimmingSpaces.isEmpty else { throw SubjectPatternError("the pattern is empty") }
        var attributes: [Attribute] = []
        for piece in Self.split(pattern) {
            let trimmed = piece.trimmingSpaces
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw SubjectPatternError("\"\(trimmed)\" is not TYPE=value")
            }
            let typeName = String(trimmed[..<equals]).trimmingSpaces.uppercased()
            let type = typeName == "E" || typeName == "EMAILADDRESS" ? .email : AttributeType(rawValue: typeName)
            guard let type else {
                throw SubjectPatternError(
                    "\(typeName.isEmpty ? "an empty type" : typeName) is not an attribute type Midtier writes (CN, EMAIL, L, O, OU, ST, C, DC, UID)")
            }
            let parts = try Self.parts(String(trimmed[trimmed.index(after: equals)...]).trimmingSpaces)
            guard !parts.isEmpty else { throw SubjectPatternError("\(typeName) has an empty value") }
            if type == .country, parts.contains(where: { if case .variable = $0 { true } else { false } }) {
                throw SubjectPatternError("C must be a fixed two-letter country code")
            }
            if type == .country, case .text(let code) = parts[0], code.count != 2 || !code.allSatisfy({ $0.isASCII && $0.isLetter }) {
                throw SubjectPatternError("C must be a two-letter country code")
            }
            attributes.append(Attribute(type: type, parts: parts))
        }
        guard !attributes.isEmpty else { throw SubjectPatternError("the pattern is empty") }
        guard attributes.count <= Self.maximumAttributes else {
            throw SubjectPatternError("the pattern has more than \(Self.maximumAttributes) attributes")
        }
        self.attributes = attributes
        self.description = pattern
    }

    /// The variables the pattern uses, each once, in order.
    package var variables: [String] {
        var seen: [String] = []
        for attribute in attributes {
            for case .variable(let name) in attribute.parts where !seen.contains(name) { seen.append(name) }
        }
        return seen
    }

    /// The attributes with every variable filled in by `value`; the error names a variable the
    /// user has no value for, or a value that is empty or too long.
    package func fill(_ value: (String) -> String?) throws(SubjectPatternError) -> [(type: AttributeType, value: String)] {
        var filled: [(type: AttributeType, value: String)] = []
        for attribute in attributes {
            var text = ""
            for part in attribute.parts {
                switch part {
                case .text(let literal): text += literal
                case .variable(let name):
                    guard let found = value(name), !found.isEmpty else {
                        throw SubjectPatternError("the user has no value for ${\(name)}")
                    }
                    text += found
                }
            }
            guard text.utf8.count <= Self.maximumValueLength else {
                throw SubjectPatternError("the \(attribute.type.rawValue) would be longer than \(Self.maximumValueLength) bytes")
            }
            // Control characters (C0, DEL, C1) and invisible format characters (bidirectional
            // overrides, zero-width ones) would make a subject read as another in a log or in
            // the back end's certificate rules.
            guard
                !text.unicodeScalars.contains(where: {
                    $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.properties.generalCategory == .format
                })
            else {
                throw SubjectPatternError("the \(attribute.type.rawValue) would contain a control or invisible formatting character")
            }
            filled.append((attribute.type, text))
        }
        return filled
    }

    /// Splits at commas that are not escaped with `\`.
    private static func split(_ pattern: String) -> [String] {
        var pieces: [String] = []
        var current = ""
        var escaped = false
        for character in pattern {
            if escaped {
                current.append("\\")
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "," {
                pieces.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        if escaped { current.append("\\") }
        pieces.append(current)
        return pieces
    }

    /// A value's text and `${variable}` parts; `\x` is the character x.
    private static func parts(_ value: String) throws(SubjectPatternError) -> [Part] {
        var parts: [Part] = []
        var text = ""
        var index = value.startIndex
        while index < value.endIndex {
            let character = value[index]
            if character == "\\" {
                let next = value.index(after: index)
                guard next < value.endIndex else { throw SubjectPatternError("a value ends in a lone backslash") }
                text.append(value[next])
                index = value.index(after: next)
            } else if character == "$", value[value.index(after: index)...].hasPrefix("{") {
                let start = value.index(index, offsetBy: 2)
                guard let close = value[start...].firstIndex(of: "}") else {
                    throw SubjectPatternError("${ without a closing }")
                }
                let name = String(value[start..<close])
                guard !name.isEmpty, name.utf8.count <= 64,
                    name.unicodeScalars.allSatisfy({
                        $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "_.-".unicodeScalars.contains($0))
                    })
                else {
                    throw SubjectPatternError("${\(name)} is not a variable name (letters, digits, _ . -)")
                }
                if !text.isEmpty { parts.append(.text(text)); text = "" }
                parts.append(.variable(name))
                index = value.index(after: close)
            } else {
                text.append(character)
                index = value.index(after: index)
            }
        }
        if !text.isEmpty { parts.append(.text(text)) }
        return parts
    }
}

/// Why a subject pattern or its filling-in failed; the message names the part.
package struct SubjectPatternError: Error, Sendable, Equatable, CustomStringConvertible {
    package let message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
