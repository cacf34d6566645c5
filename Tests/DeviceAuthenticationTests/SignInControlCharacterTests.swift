import Foundation
import MidtierCore
import Testing

@testable import DeviceAuthentication

/// A Basic sign-in refuses exactly what stored text refuses (docs/identity.md, "Stored text"):
/// one check, `StoredText.hasControlCharacters` — C0, DEL and C1, nothing printable.
@Suite(.timeLimit(.minutes(10))) struct SignInControlCharacterTests {
    @Test func aSignInRefusesWhatStoredTextRefuses() async throws {
        let users = ["alice": LocalUser(id: "alice", passwordHash: SecretHashing.hash("right", cost: 4))]
        let authenticator = BasicAuthenticator(users: users, cacheSeconds: 0)
        func basic(_ user: String, _ password: String) -> String { "Basic " + Data("\(user):\(password)".utf8).base64EncodedString() }
        for control in ["\u{0}", "\u{1b}", "\u{7f}", "\u{80}", "\u{85}", "\u{9f}"] {
            #expect(StoredText.hasControlCharacters("a\(control)b"))
            for (user, password) in [("ali\(control)ce", "right"), ("alice", "right\(control)")] {
                guard case .failure(.malformedCredentials) = await authenticator.authenticate(user: user, password: password, client: nil) else {
                    Issue.record("\(user.debugDescription) / a password with \(control.unicodeScalars.first!.value) was not refused by the form")
                    continue
                }
                guard case .failure(.malformedCredentials) = await authenticator.authenticate(authorization: basic(user, password)) else {
                    Issue.record(
                        "\(user.debugDescription) / a password with \(control.unicodeScalars.first!.value) was not refused in a Basic header")
                    continue
                }
            }
        }
        // Printable text past ASCII (a no-break space, U+00A0, just after C1) is not a control character.
        #expect(!StoredText.hasControlCharacters("alice\u{a0}"))
        #expect(await authenticator.authenticate(user: "alice\u{a0}", password: "right", client: nil) == .failure(.invalidCredentials))
        #expect(try await authenticator.authenticate(user: "alice", password: "right", client: nil).get().id == "alice")
    }
}
