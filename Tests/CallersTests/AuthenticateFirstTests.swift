import Foundation
import GRDB
import MidtierTestSupport
import NIOHTTP1
import Testing

/// The registration id showed in the time of an unauthenticated answer: a known id was a
/// memory hit, an unknown one a store read (215 against 444 µs, medians). Now a caller is
/// signed in before anything is read about the id (docs/identity.md, "Unknown and known
/// registration ids look the same"). Shown without timing: with the store's registrations gone, a caller
/// without valid credentials still gets 401 — a lookup would have failed first (503).
@Suite(.timeLimit(.minutes(10))) struct AuthenticateFirstTests {
    @Test func nothingIsLookedUpForACallerWithoutValidCredentials() async throws {
        try await TestEnvironment.with { env in
            let known = try await env.register(.alice)
            let database = try DatabaseQueue(path: env.directory + "/midtier.sqlite")
            try await database.write { db in try db.execute(sql: "ALTER TABLE registration RENAME TO registration_gone") }
            let wrong = "Basic " + Data("alice:not-her-password".utf8).base64EncodedString()
            for id in ["never-seen-\(UUID().uuidString.lowercased())", known] {
                for credentials in [[], [("Authorization", wrong)]] {
                    let reply = try await env.call(.GET, "/echo/x", headers: [("X-SMP-APPCID", id)] + credentials)
                    #expect(
                        reply.status == 401,
                        "\(id == known ? "known" : "unknown") id, \(credentials.isEmpty ? "no" : "wrong") credentials: \(reply.status) \(reply.text)")
                }
            }
            // Signed in, the id is looked up, and the broken store shows.
            let signedIn = try await env.call(
                .GET, "/echo/x",
                headers: [
                    ("X-SMP-APPCID", "never-seen-\(UUID().uuidString.lowercased())"),
                    ("Authorization", TestUser.alice.basic),
                ])
            #expect(signedIn.status == 503, "\(signedIn.status) \(signedIn.text)")
            try await database.write { db in try db.execute(sql: "ALTER TABLE registration_gone RENAME TO registration") }
        }
    }
}
