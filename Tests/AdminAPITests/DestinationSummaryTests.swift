import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierTestSupport
import NIOHTTP1
import Testing

/// `GET /admin/v1/destinations` and the console's destinations page show a destination's
/// `forwardDeviceCookies` (names only: they are not secrets), next to its added headers.
@Suite(.timeLimit(.minutes(10))) struct DestinationSummaryTests {
    @Test func theForwardedDeviceCookiesAreListed() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.destinations["echo"]!.forwardDeviceCookies = ["ROUTEID", "lb-affinity"]
        }) { env in
            let listed = try await env.admin(.GET, "/admin/v1/destinations")
            let destinations = try #require(listed.json["destinations"] as? [[String: Any]], "\(listed.status) \(listed.text)")
            let echo = try #require(destinations.first { $0["name"] as? String == "echo" }, "\(listed.text)")
            #expect(echo["forwardDeviceCookies"] as? [String] == ["ROUTEID", "lb-affinity"], "\(echo)")
            for other in destinations where other["name"] as? String != "echo" {
                #expect(other["forwardDeviceCookies"] as? [String] == [], "none listed: \(other)")
            }

            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
            do {
                let console = try await AdminStoredTextTests.signIn(env, client)
                let page = try await console.call(client, .GET, "/console/destinations")
                #expect(page.status == 200)
                #expect(page.text.contains("Device cookies") && page.text.contains("ROUTEID, lb-affinity"), "\(page.text)")
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
        }
    }
}
