import Foundation
import MidtierConfiguration
import Testing
@testable import DeviceAuthentication

@Suite struct BasicAuthenticatorTests {
    static let users = ["alice": LocalUser(id: "alice", passwordHash: SecretHashing.hash("right", cost: 4), attributes: ["sfUserId": "100001"])]

    func header(_ user: String, _ password: String) -> String { "Basic " + Data("\(user):\(password)".utf8).base64EncodedString() }

    @Test func acceptsTheRightPasswordOnly() async throws {
        let authenticator = BasicAuthenticator(users: Self.users, cacheSeconds: 300)
        #expect(try await authenticator.authenticate(authorization: header("alice", "right")).get().attributes["sfUserId"] == "100001")
        #expect(await authenticator.authenticate(authorization: header("alice", "wrong")) == .failure(.invalidCredentials))
        #expect(await authenticator.authenticate(authorization: header("mallory", "right")) == .failure(.invalidCredentials))
        // The remembered credential is for that password only.
        #expect(await authenticator.authenticate(authorization: header("alice", "wrong")) == .failure(.invalidCredentials))
        #expect(await authenticator.authenticate(authorization: header("alice", "right:")) == .failure(.invalidCredentials))
    }

    @Test func malformedHeadersAreClearFailures() async {
        let authenticator = BasicAuthenticator(users: Self.users, cacheSeconds: 300)
        #expect(await authenticator.authenticate(authorization: nil) == .failure(.missingCredentials))
        for bad in ["Bearer abc", "Basic", "Basic !!!", "Basic " + Data("nocolon".utf8).base64EncodedString(),
                    "Basic " + Data(":pw".utf8).base64EncodedString(), "Basic " + String(repeating: "A", count: 10000)] {
            guard case .failure(.malformedCredentials) = await authenticator.authenticate(authorization: bad) else {
                Issue.record("\(bad.prefix(40)) was not refused as malformed")
                continue
            }
        }
    }

    @Test func aPasswordWithAColonWorks() async throws {
        let users = ["bob": LocalUser(id: "bob", passwordHash: SecretHashing.hash("a:b:c", cost: 4))]
        let authenticator = BasicAuthenticator(users: users, cacheSeconds: 0)
        #expect(try await authenticator.authenticate(authorization: header("bob", "a:b:c")).get().id == "bob")
    }
}
