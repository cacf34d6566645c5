import MidtierCore
import Testing

/// `subjectPattern` (docs/forwarding.md, "Subject pattern").
@Suite struct SubjectPatternTests {
    @Test func readsCloudConnectorStylePatterns() throws {
        let pattern = try SubjectPattern("CN=${name}, OU=Mobile ,O=Example\\, Inc.,C=DE")
        #expect(pattern.attributes.map(\.type) == [.commonName, .organizationalUnit, .organization, .country])
        #expect(pattern.attributes[0].parts == [.variable("name")])
        #expect(pattern.attributes[2].parts == [.text("Example, Inc.")])
        #expect(pattern.variables == ["name"])
    }

    @Test func fillsValuesWithoutReadingThemAsNames() throws {
        let pattern = try SubjectPattern("CN=${name},EMAIL=${mail},O=Example")
        let filled = try pattern.fill { ["name": "eve,O=Admins", "mail": "eve@example.com"][$0] }
        // The comma and `O=` stay inside the common name: a value never adds an attribute.
        #expect(filled.count == 3)
        #expect(filled[0].type == .commonName && filled[0].value == "eve,O=Admins")
        #expect(filled[1].type == .email && filled[1].value == "eve@example.com")
    }

    @Test(arguments: [
        ("", "empty"), ("CN", "TYPE=value"), ("XX=foo", "XX is not an attribute type"), ("CN=", "empty value"),
        ("CN=${}", "not a variable name"), ("CN=${na me}", "not a variable name"), ("CN=${name", "closing }"),
        ("C=${country}", "fixed two-letter"), ("C=DEU", "two-letter"), ("CN=a\\", "lone backslash"),
    ])
    func refusesWhatIsNotAPattern(pattern: String, expected: String) {
        #expect {
            try SubjectPattern(pattern)
        } throws: { error in
            (error as? SubjectPatternError)?.message.contains(expected) == true
        }
    }

    @Test func namesTheMissingVariable() throws {
        let pattern = try SubjectPattern("CN=${name},EMAIL=${mail}")
        #expect(throws: SubjectPatternError("the user has no value for ${mail}")) {
            try pattern.fill { $0 == "name" ? "alice" : nil }
        }
        #expect(throws: SubjectPatternError("the user has no value for ${mail}")) {
            try pattern.fill { $0 == "name" ? "alice" : "" }
        }
    }

    @Test func refusesControlCharactersAndOverlongValues() throws {
        let pattern = try SubjectPattern("CN=${name}")
        #expect(throws: SubjectPatternError.self) { try pattern.fill { _ in "alice\nbob" } }
        // C1 controls, a right-to-left override, a zero-width joiner: none reaches a subject.
        for hidden in ["\u{85}", "\u{9B}", "\u{202E}", "\u{200D}", "\u{2066}", "\u{FEFF}"] {
            #expect(throws: SubjectPatternError.self) { try pattern.fill { _ in "ali" + hidden + "ce" } }
        }
        #expect(throws: SubjectPatternError.self) { try pattern.fill { _ in String(repeating: "a", count: 257) } }
        #expect(try pattern.fill { _ in String(repeating: "a", count: 256) }.count == 1)
    }

    @Test func boundsTheNumberOfAttributes() {
        let many = (0...SubjectPattern.maximumAttributes).map { "OU=u\($0)" }.joined(separator: ",")
        #expect(throws: SubjectPatternError.self) { try SubjectPattern(many) }
    }
}
