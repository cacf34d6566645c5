import CoreMetrics
package import Prometheus
import Synchronization

/// Midtier's metrics (docs/admin.md, "Metrics"), in Prometheus' text format at `GET /metrics` on
/// the admin listener. Labels are destination names and status codes only — never a user, a
/// path or anything a device can vary freely, so a client cannot grow the label set or learn
/// who called.
package struct MidtierMetrics: Sendable {
    package let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    /// The per-request metrics by label values, made once each (making one goes through the
    /// registry's lock and builds its label strings: measurable on every proxied call).
    private let made: MadeMetrics

    /// Each server owns its registry (no process-wide bootstrap), so several servers in one
    /// process — tests — keep separate counts.
    package init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2),
            .seconds(5), .seconds(10), .seconds(30),
        ]
        self.factory = factory
        made = MadeMetrics(factory: factory)
    }

    /// A proxied request answered with `status` (to its head) after `duration`.
    /// `destination` must be a configured destination name, or nil for anything else.
    package func recordRequest(destination: String?, status: Int, duration: Duration) {
        let name = destination ?? "unknown"
        let factory = self.factory
        let (counter, timer) = made.requests.withLock { made in
            let counter =
                made.counters[RequestLabels(destination: name, status: status)]
                ?? {
                    let counter = Counter(
                        label: "midtier_requests_total", dimensions: [("destination", name), ("status", String(status))], factory: factory)
                    made.counters[RequestLabels(destination: name, status: status)] = counter
                    return counter
                }()
            let timer =
                made.timers[name]
                ?? {
                    let timer = Timer(label: "midtier_request_duration_seconds", dimensions: [("destination", name)], factory: factory)
                    made.timers[name] = timer
                    return timer
                }()
            return (counter, timer)
        }
        counter.increment()
        timer.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// How a token lookup went: `hit` (cached), `miss` (started an exchange), `wait` (joined
    /// one in flight).
    package enum CacheResult: String, Sendable { case hit, miss, wait }

    package func recordTokenLookup(_ result: CacheResult) {
        let factory = self.factory
        made.lookups.withLock { counters in
            counters[result]
                ?? {
                    let counter = Counter(label: "midtier_token_cache_total", dimensions: [("result", result.rawValue)], factory: factory)
                    counters[result] = counter
                    return counter
                }()
        }.increment()
    }

    /// One exchange at a token service.
    package func recordExchange(destination: String, succeeded: Bool) {
        Counter(label: "midtier_token_exchanges_total", dimensions: [("destination", destination)], factory: factory).increment()
        if !succeeded {
            Counter(label: "midtier_token_exchange_failures_total", dimensions: [("destination", destination)], factory: factory).increment()
        }
        made.exchanges.withLock { totals in
            totals[destination, default: ExchangeTotals()].exchanges += 1
            if !succeeded { totals[destination, default: ExchangeTotals()].failures += 1 }
        }
    }

    /// Token exchanges and their failures since the start, by destination name: the same
    /// counts as `midtier_token_exchanges_total` and `…_failures_total`, for the web console.
    package func exchangeTotals() -> [String: ExchangeTotals] {
        made.exchanges.withLock { $0 }
    }

    // MARK: Push notifications (docs/push.md, "Metrics")

    /// What became of a push delivery; the label values are these names only.
    package enum PushOutcome: String, Sendable, CaseIterable {
        case delivered, retried, tokenGone = "token_gone", refused, exhausted, skipped
    }

    /// One push delivery attempt's outcome, through `provider` (`apns`, `fcm`, or `none` when
    /// skipped before one was chosen); for a delivery, the time from acceptance to delivery.
    /// The metrics are made once per label set (as the request metrics are).
    package func recordPush(_ outcome: PushOutcome, provider: String, sinceAccepted: Duration? = nil) {
        let factory = self.factory
        let (counter, timer) = made.push.withLock { made in
            let key = "\(outcome.rawValue) \(provider)"
            let counter =
                made.counters[key]
                ?? {
                    let counter = Counter(
                        label: "midtier_push_deliveries_total", dimensions: [("outcome", outcome.rawValue), ("provider", provider)], factory: factory)
                    made.counters[key] = counter
                    return counter
                }()
            guard sinceAccepted != nil else { return (counter, nil as CoreMetrics.Timer?) }
            let timer =
                made.timers[provider]
                ?? {
                    let timer = Timer(label: "midtier_push_delivery_seconds", dimensions: [("provider", provider)], factory: factory)
                    made.timers[provider] = timer
                    return timer
                }()
            return (counter, timer)
        }
        counter.increment()
        if let sinceAccepted, let timer {
            timer.recordNanoseconds(max(0, sinceAccepted.components.seconds * 1_000_000_000 + sinceAccepted.components.attoseconds / 1_000_000_000))
        }
    }

    /// Deliveries waiting to be sent.
    package func recordPushQueueDepth(_ depth: Int) {
        made.pushQueueDepth.record(depth)
    }

    /// The text exposition format.
    package func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}

/// Label values of `midtier_requests_total`, compared by their exact bytes.
struct RequestLabels: Hashable {
    let destination: String
    let status: Int

    static func == (a: Self, b: Self) -> Bool { a.status == b.status && a.destination.utf8.elementsEqual(b.destination.utf8) }
    func hash(into hasher: inout Hasher) {
        // Equal bytes are canonically equal too, so the canonical hash is consistent with `==`.
        hasher.combine(status)
        hasher.combine(destination)
    }
}

/// Token exchanges at one destination's token service, and how many failed.
package struct ExchangeTotals: Sendable, Equatable {
    package var exchanges = 0
    package var failures = 0
}

final class MadeMetrics: Sendable {
    struct Requests {
        var counters: [RequestLabels: CoreMetrics.Counter] = [:]
        var timers: [String: CoreMetrics.Timer] = [:]
    }

    let requests = Mutex(Requests())
    let lookups = Mutex<[MidtierMetrics.CacheResult: CoreMetrics.Counter]>([:])
    let exchanges = Mutex<[String: ExchangeTotals]>([:])
    /// Push metrics by label set (outcome and provider; provider), made once each.
    struct Push {
        var counters: [String: CoreMetrics.Counter] = [:]
        var timers: [String: CoreMetrics.Timer] = [:]
    }
    let push = Mutex(Push())
    let pushQueueDepth: CoreMetrics.Gauge

    init(factory: PrometheusMetricsFactory) {
        pushQueueDepth = Gauge(label: "midtier_push_queue_depth", factory: factory)
    }
}
