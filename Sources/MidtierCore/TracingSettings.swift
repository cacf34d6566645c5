/// `tracing` in `midtier.json` (docs/configuration.md, docs/operations.md "Traces"):
/// OpenTelemetry traces of device requests, exported over OTLP/HTTP. Absent: no traces.
package struct TracingSettings: Sendable, Equatable {
    /// `endpoint`: the collector's OTLP/HTTP traces URL, used as written (an OpenTelemetry
    /// Collector listens on `http://HOST:4318/v1/traces`).
    package var endpoint: String
    /// `samplingRatio`: the share of device requests whose spans are exported, 0 to 1. Default 1.
    /// Every request gets a trace id either way (its logs and `traceresponse` carry it).
    package var samplingRatio: Double
    /// `serviceName`: the `service.name` the spans are exported under. Default `midtier`.
    package var serviceName: String
    /// `maxQueuedSpans`: finished spans held for export; more, while the collector is slow or
    /// down, are dropped (memory stays bounded). Default 2048.
    package var maxQueuedSpans: Int

    package init(endpoint: String, samplingRatio: Double = 1, serviceName: String = "midtier", maxQueuedSpans: Int = 2048) {
        self.endpoint = endpoint
        self.samplingRatio = samplingRatio
        self.serviceName = serviceName
        self.maxQueuedSpans = maxQueuedSpans
    }
}
