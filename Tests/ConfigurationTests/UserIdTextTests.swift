import ConfigurationFiles
import Foundation
import MidtierCore
import Testing

/// A `users.json` id never has a control character (docs/identity.md, "Stored text"): the
/// same rule as every other stored user id, tab and C1 characters included.
@Suite struct UserIdTextTests {
    @Test(arguments: [#"a\u0000b"#, #"a\tb"#, #"a\u007fb"#, #"a\u0085b"#, #"\u001balice"#, #"alice\n"#])
    func aUserIdWithAControlCharacterIsRefused(_ id: String) {
        let fixture = Fixture()
        fixture.set("users.json", "users", #"[{"id":"\#(id)","passwordHash":"\#(Values.aliceHash)"}]"#)
        let problems = fixture.problems()
        #expect(
            problems.contains { $0.key == "users[0].id" && $0.message.contains("control characters") },
            "\(id): \(problems.map(\.description))")
    }

    @Test func printableIdsOfAnyScriptAreKept() throws {
        let fixture = Fixture()
        fixture.set("users.json", "users", #"[{"id":"José Ünal","passwordHash":"\#(Values.aliceHash)"}]"#)
        #expect(fixture.problems().isEmpty, "\(fixture.problems().map(\.description))")
    }
}
