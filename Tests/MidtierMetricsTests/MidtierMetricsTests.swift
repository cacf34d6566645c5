import MidtierMetrics
import Testing

/// Midtier's metrics (docs/admin.md, "Metrics"): what each record adds to the exposition, and
/// that labels are destination names, status codes and fixed outcome names only.
@Suite struct MidtierMetricsTests {
    static func text(_ metrics: MidtierMetrics) -> String { String(decoding: metrics.exposition(), as: UTF8.self) }

    @Test func requestsAreCountedByDestinationAndStatus() {
        let metrics = MidtierMetrics()
        for _ in 0..<3 { metrics.recordRequest(destination: "sf", status: 200, duration: .milliseconds(3)) }
        metrics.recordRequest(destination: nil, status: 404, duration: .microseconds(80))
        let text = Self.text(metrics)
        #expect(text.contains(#"midtier_requests_total{destination="sf",status="200"} 3"#), "\(text)")
        #expect(text.contains(#"midtier_requests_total{destination="unknown",status="404"} 1"#), "\(text)")
        #expect(text.contains(#"midtier_request_duration_seconds_count{destination="sf"} 3"#), "\(text)")
    }

    @Test func tokenLookupsAndExchangesCountWithoutAUser() {
        let metrics = MidtierMetrics()
        metrics.recordTokenLookup(.miss)
        metrics.recordTokenLookup(.hit)
        metrics.recordTokenLookup(.hit)
        metrics.recordExchange(destination: "gw", succeeded: true)
        metrics.recordExchange(destination: "gw", succeeded: false)
        let text = Self.text(metrics)
        #expect(text.contains(#"midtier_token_cache_total{result="hit"} 2"#), "\(text)")
        #expect(text.contains(#"midtier_token_cache_total{result="miss"} 1"#), "\(text)")
        #expect(text.contains(#"midtier_token_exchanges_total{destination="gw"} 2"#), "\(text)")
        #expect(text.contains(#"midtier_token_exchange_failures_total{destination="gw"} 1"#), "\(text)")
        #expect(metrics.exchangeTotals()["gw"]?.exchanges == 2)
        #expect(metrics.exchangeTotals()["gw"]?.failures == 1)
    }

    @Test func eachServerCountsApart() {
        let first = MidtierMetrics(), second = MidtierMetrics()
        first.recordRequest(destination: "sf", status: 200, duration: .zero)
        #expect(!Self.text(second).contains("midtier_requests_total{"), "a second registry starts empty")
    }
}
