import Foundation
import MidtierTestSupport
import NIOHTTP1
import Testing

@Suite(.timeLimit(.minutes(10))) struct MetricsTests {
    @Test func metricsCountRequestsTokenLookupsAndExchangesWithoutNamingUsers() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            for _ in 0..<3 { _ = try await env.call(.GET, "/sf/odata/v2/User('100001')", headers: headers) }
            _ = try await env.call(.GET, "/random-\(UUID().uuidString)/x", headers: headers)
            let reply = try await env.call(.GET, "/metrics", base: "http://127.0.0.1:\(env.adminPort)")
            #expect(reply.status == 200)
            #expect(reply.header("Content-Type")?.hasPrefix("text/plain") == true)
            let text = reply.text
            #expect(text.contains(#"midtier_requests_total{destination="sf",status="200"} 3"#), "\(text)")
            #expect(text.contains(#"midtier_requests_total{destination="unknown",status="404"} 1"#))
            #expect(text.contains(#"midtier_token_cache_total{result="miss"} 1"#))
            #expect(text.contains(#"midtier_token_cache_total{result="hit"} 2"#))
            #expect(text.contains(#"midtier_token_exchanges_total{destination="sf"} 1"#))
            #expect(text.contains("midtier_request_duration_seconds_bucket"))
            for secret in ["alice", "100001", id, "random-"] {
                #expect(!text.contains(secret), "\(secret) appears in the metrics")
            }
            // Not on the device listener.
            #expect(try await env.call(.GET, "/metrics").status == 404)
        }
    }
}
