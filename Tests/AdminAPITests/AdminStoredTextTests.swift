import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import Testing

/// The admin API and the console name users, realms and registrations by text an admin types;
/// text with a control character names nothing Midtier can hold (docs/identity.md, "Stored
/// text"). A registration id no registration can have is a `404`; a user id, realm or filter
/// with a control character is a `400` naming the parameter — on SQLite and on PostgreSQL
/// (which cannot even be asked about a NUL, and answered 503 before).
@Suite(.timeLimit(.minutes(10))) struct AdminStoredTextTests {
    @Test(arguments: StoreKind.allCases) func theAdminAPIRefusesControlCharactersNamingTheParameter(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            // Registration ids: unknown.
            var unknown: [(HTTPMethod, String)] = [
                (.GET, "/admin/v1/registrations/a%00b"), (.DELETE, "/admin/v1/registrations/a%00b"),
                (.GET, "/admin/v1/registrations/a%0Ab"), (.GET, "/admin/v1/registrations/%C2%85"),
            ]
            for action in ["lock", "unlock", "wipe"] { unknown.append((.POST, "/admin/v1/registrations/a%00b/\(action)")) }
            for (method, path) in unknown {
                let reply = try await env.admin(method, path)
                #expect(reply.status == 404, "\(method) \(path): \(reply.status) \(reply.text)")
            }
            // User ids, realms and filters: 400 naming the parameter.
            let refused: [(HTTPMethod, String, String?, String)] = [
                (.GET, "/admin/v1/users/a%00b", nil, "userId"),
                (.GET, "/admin/v1/users/alice?realm=x%00y", nil, "realm"),
                (.GET, "/admin/v1/users/a%1Bb", nil, "userId"),
                (.PUT, "/admin/v1/users/a%00b/block", #"{"type":"all"}"#, "userId"),
                (.PUT, "/admin/v1/users/alice/block?realm=x%7Fy", #"{"type":"all"}"#, "realm"),
                (.DELETE, "/admin/v1/users/a%00b/block", nil, "userId"),
                (.DELETE, "/admin/v1/tokens/a%00b", nil, "userId"),
                (.DELETE, "/admin/v1/tokens/alice?realm=x%00y", nil, "realm"),
                (.GET, "/admin/v1/registrations?user=a%00b", nil, "user"),
                (.GET, "/admin/v1/registrations?user=alice&realm=x%00y", nil, "realm"),
                (.GET, "/admin/v1/registrations?app=de%00mo", nil, "app"),
            ]
            for (method, path, body, parameter) in refused {
                let reply = try await env.admin(method, path, body: body)
                #expect(reply.status == 400, "\(method) \(path): \(reply.status) \(reply.text)")
                #expect(reply.errorMessage == "\(parameter) contains control characters", "\(method) \(path): \(reply.text)")
            }
            // Control: the same calls with printable text still work.
            let id = try await env.register(.alice)
            #expect(try await env.admin(.GET, "/admin/v1/registrations/\(id)").status == 200)
            #expect(try await env.admin(.GET, "/admin/v1/users/alice").status == 200)
            #expect(try await env.admin(.GET, "/admin/v1/registrations?user=alice&app=demo").json["registrations"] as? [Any] != nil)
        }
    }

    @Test(arguments: StoreKind.allCases) func theConsoleAnswersItsProblemPage(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
            do {
                try await Self.checkConsole(env, client)
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
        }
    }

    static func checkConsole(_ env: TestEnvironment, _ client: HTTPClient) async throws {
        do {
            let console = try await Self.signIn(env, client)
            let id = try await env.register(.alice)
            let pages: [(String, Int)] = [
                ("/console/users?id=a%00b", 400), ("/console/users?id=alice&realm=x%00y", 400),
                ("/console/registrations?user=a%00b", 400), ("/console/registrations?user=alice&realm=x%00y", 400),
                ("/console/registrations?app=de%00mo", 400),
                ("/console/registrations/confirm?action=lock&id=a%00b", 404),
                ("/console/audit?user=a%00b", 400), ("/console/audit?user=alice&realm=x%00y", 400), ("/console/audit?registration=a%00b", 400),
            ]
            for (path, status) in pages {
                let reply = try await console.call(client, .GET, path)
                #expect(reply.status == status, "\(path): \(reply.status) \(reply.text.prefix(300))")
                #expect(reply.text.contains("<html") || reply.text.contains("<!DOCTYPE"), "\(path): the console's page")
            }
            let forms: [(String, String, Int)] = [
                ("/console/users/block", "id=a%2500b&realm=&type=all", 400), ("/console/users/unblock", "id=a%2500b&realm=", 400),
                ("/console/users/block", "id=alice&realm=x%2500y&type=all", 400),
                ("/console/registrations/lock", "id=a%00b", 404), ("/console/registrations/delete", "id=a%00b", 404),
            ]
            for (path, form, status) in forms {
                let reply = try await console.call(client, .POST, path, body: "csrf=\(console.csrf)&\(form)")
                #expect(reply.status == status, "\(path) \(form): \(reply.status) \(reply.text.prefix(300))")
            }
            // Control: printable filters still work.
            for path in [
                "/console/users?id=alice", "/console/registrations?user=alice", "/console/audit?registration=\(id)",
                "/console/registrations/confirm?action=lock&id=\(id)",
            ] {
                let reply = try await console.call(client, .GET, path)
                #expect(reply.status == 200, "\(path): \(reply.status)")
            }
        }
    }

    /// The console session helper the console tests share (`MidtierTestSupport`).
    typealias Console = ConsoleSession

    static func signIn(_ env: TestEnvironment, _ client: HTTPClient) async throws -> Console {
        try await ConsoleSession.signIn(env, client)
    }

    static func cookie(_ reply: TestEnvironment.Reply, _ name: String) -> String? {
        ConsoleSession.cookie(reply, name)
    }
}
