import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierTestSupport
import NIOHTTP1
import Testing

/// The console offers each app's onboarding configuration as the `ConfigurationProvider.plist`
/// (and JSON) the SAP SDK's configuration providers read (docs/console.md, "Onboarding
/// configuration"): the same document as `/config/v1/{appId}`, behind the console's sign-in.
@Suite(.timeLimit(.minutes(10))) struct OnboardingDownloadTests {
    static func withJWTApp(_ body: (TestEnvironment) async throws -> Void) async throws {
        try await TestEnvironment.with(
            adjust: { configuration, _, _ in
                var app = configuration.apps["demo"]!
                app.id = "jwt-demo"
                app.authentication = .jwt(
                    JWTAuthentication(
                        issuer: "https://idp.example", audience: "midtier", jwks: .url("https://idp.example/jwks"),
                        oauth2: OAuth2Discovery(
                            authorizationEndpoint: "https://idp.example/auth", tokenEndpoint: "https://idp.example/token",
                            endUserUI: "https://idp.example/login",
                            clients: [.init(clientID: "payroll-ios", redirectURL: "com.example.payroll:/cb")])))
                configuration.apps["jwt-demo"] = app
                configuration.server.publicURL = "https://mobile.example.com"
            }, body)
    }

    static func withConsole(_ env: TestEnvironment, _ body: (HTTPClient, ConsoleSession) async throws -> Void) async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        do {
            let console = try await ConsoleSession.signIn(env, client)
            try await body(client, console)
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    static func propertyList(_ reply: TestEnvironment.Reply) throws -> [String: Any] {
        let object = try PropertyListSerialization.propertyList(from: Data(reply.body), format: nil)
        return try #require(object as? [String: Any], "\(reply.text)")
    }

    @Test func aBasicAppsPlistCarriesWhereMidtierIs() async throws {
        try await Self.withJWTApp { env in
            try await Self.withConsole(env) { client, console in
                let reply = try await console.call(client, .GET, "/console/apps/demo/ConfigurationProvider.plist")
                #expect(reply.status == 200, "\(reply.status) \(reply.text.prefix(300))")
                #expect(reply.header("Content-Disposition") == #"attachment; filename="ConfigurationProvider.plist""#)
                #expect(reply.header("Content-Type")?.hasPrefix("application/x-plist") == true)
                let plist = try Self.propertyList(reply)
                #expect(plist["host"] as? String == "mobile.example.com")
                #expect(plist["port"] as? Int == 443)
                #expect(plist["protocol"] as? String == "https")
                #expect(plist["appID"] as? String == "demo")
                let auth = (plist["auth"] as? [[String: Any]])?.first
                #expect(auth?["type"] as? String == "basic")
            }
        }
    }

    @Test func anOAuth2AppsPlistCarriesItsIdentityProvider() async throws {
        try await Self.withJWTApp { env in
            try await Self.withConsole(env) { client, console in
                let reply = try await console.call(client, .GET, "/console/apps/jwt-demo/ConfigurationProvider.plist")
                #expect(reply.status == 200, "\(reply.status) \(reply.text.prefix(300))")
                let plist = try Self.propertyList(reply)
                #expect(plist["appID"] as? String == "jwt-demo")
                let auth = try #require((plist["auth"] as? [[String: Any]])?.first, "\(reply.text)")
                #expect(auth["type"] as? String == "oauth2")
                let config = try #require(auth["config"] as? [String: Any], "\(reply.text)")
                #expect(config["oauth2.authorizationEndpoint"] as? String == "https://idp.example/auth")
                #expect(config["oauth2.tokenEndpoint"] as? String == "https://idp.example/token")
                #expect(config["oauth2.clientID"] as? String == "payroll-ios")
                let clients = config["oauth2.clients"] as? [[String: Any]]
                #expect(clients?.first?["redirectURL"] as? String == "com.example.payroll:/cb")

                // The JSON form is the same document, as `/config/v1/{appId}` sends it.
                let json = try await console.call(client, .GET, "/console/apps/jwt-demo/ConfigurationProvider.json")
                #expect(json.status == 200)
                #expect(json.header("Content-Disposition") == #"attachment; filename="ConfigurationProvider.json""#)
                let served = try await env.call(.GET, "/config/v1/jwt-demo")
                #expect(NSDictionary(dictionary: json.json).isEqual(to: served.json), "\(json.text) vs \(served.text)")
                #expect(NSDictionary(dictionary: plist).isEqual(to: served.json), "\(plist) vs \(served.text)")

                // The overview links both downloads.
                let overview = try await console.call(client, .GET, "/console/")
                #expect(overview.text.contains("/console/apps/jwt-demo/ConfigurationProvider.plist"), "\(overview.text)")
            }
        }
    }

    @Test func anUnknownAppIsNotFoundAndNoSessionMeansSignIn() async throws {
        try await Self.withJWTApp { env in
            try await Self.withConsole(env) { client, console in
                let unknown = try await console.call(client, .GET, "/console/apps/nope/ConfigurationProvider.plist")
                #expect(unknown.status == 404)
                #expect(unknown.text.contains("Not found") && unknown.text.contains("nope"), "\(unknown.text.prefix(500))")
                let anonymous = ConsoleSession(base: console.base, cookie: "")
                let refused = try await anonymous.call(client, .GET, "/console/apps/demo/ConfigurationProvider.plist")
                #expect(refused.status == 303)
                #expect(refused.header("Location") == "/console/sign-in")
                #expect(!refused.text.contains("mobile.example.com"))
            }
        }
    }
}
