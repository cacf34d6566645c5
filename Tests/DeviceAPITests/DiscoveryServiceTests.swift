import Foundation
import MidtierCore
import MidtierTestSupport
import NIOHTTP1
import Testing

/// SAP's Discovery Service path (docs/device-api.md, "Discovery Service"), as the SDK's
/// `DiscoveryServiceConfigurationProvider` calls it with a custom host: the app's discovery
/// document, the same as `GET /config/v1/{appId}`, for `AppConfigID` with or without SAP's
/// `:{version}`; anything malformed is a 400 naming what is wrong.
@Suite(.timeLimit(.minutes(10))) struct DiscoveryServiceTests {
    static func path(_ call: String) -> String {
        "/config-api.svc/ApplicationConfigurations/" + (call.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? call)
    }

    @Test func servesTheAppsDiscoveryDocument() async throws {
        try await TestEnvironment.withMidtier(.sqlite) { env in
            let direct = try await env.call(.GET, "/config/v1/demo")
            #expect(direct.status == 200, "\(direct.text)")
            for id in ["demo", "demo:1.0"] {
                let reply = try await env.call(.GET, Self.path("getApplicationConfiguration(AppConfigID='\(id)',EmailAddress='alice@example.com')"))
                #expect(reply.status == 200 && reply.text == direct.text, "\(id): \(reply.status) \(reply.text)")
            }
            let swapped = try await env.call(.GET, Self.path("getApplicationConfiguration(EmailAddress='o''brien@example.com',AppConfigID='demo')"))
            #expect(swapped.status == 200 && swapped.text == direct.text, "\(swapped.status) \(swapped.text)")
            #expect((direct.json["host"] as? String) == "midtier.test", "\(direct.text)")
        }
    }

    @Test func anUnknownAppIsNotFound() async throws {
        try await TestEnvironment.withMidtier(.sqlite) { env in
            for id in ["nope", "nope:1.0", "DEMO"] {
                let reply = try await env.call(.GET, Self.path("getApplicationConfiguration(AppConfigID='\(id)',EmailAddress='a@b.c')"))
                #expect(reply.status == 404, "\(id): \(reply.status) \(reply.text)")
            }
            let function = try await env.call(.GET, Self.path("getSomethingElse(AppConfigID='demo')"))
            #expect(function.status == 404, "\(function.status) \(function.text)")
        }
    }

    @Test(arguments: [
        ("getApplicationConfiguration(AppConfigID='demo')", "EmailAddress is missing"),
        ("getApplicationConfiguration(EmailAddress='a@b.c')", "AppConfigID is missing"),
        ("getApplicationConfiguration(AppConfigID='demo',EmailAddress='nobody')", "EmailAddress is not an email address"),
        ("getApplicationConfiguration(AppConfigID='demo,EmailAddress='a@b.c')", "separated by"),
        ("getApplicationConfiguration(AppConfigID=demo,EmailAddress='a@b.c')", "AppConfigID must be a quoted string"),
        ("getApplicationConfiguration(AppConfigID='demo',EmailAddress='a@b.c", "unknown function"),
        ("getApplicationConfiguration(AppConfigID='demo',AppConfigID='demo',EmailAddress='a@b.c')", "AppConfigID is given twice"),
        ("getApplicationConfiguration(AppConfigID='demo',EmailAddress='a@b.c',Extra='x')", "unknown parameter Extra"),
        ("getApplicationConfiguration(AppConfigID='demo',EmailAddress='a\u{01}@b.c')", "EmailAddress contains control characters"),
        ("getApplicationConfiguration(AppConfigID='demo',EmailAddress='a@b.c',)", "a parameter is missing"),
        ("getApplicationConfiguration(AppConfigID='demo',EmailAddress='a@b.c'", "unknown function"),
    ])
    func malformedCallsSayWhatIsWrong(_ call: String, _ message: String) async throws {
        try await TestEnvironment.withMidtier(.sqlite) { env in
            let reply = try await env.call(.GET, Self.path(call))
            #expect((400...404).contains(reply.status) && reply.text.contains(message), "\(call): \(reply.status) \(reply.text)")
        }
    }
}
