package import Logging
package import MidtierCore
import OTel
package import ServiceLifecycle
import Synchronization
package import Tracing
import W3CTraceContext

/// Starts the traces of device requests (docs/operations.md, "Traces"), or nothing: with
/// tracing off (``off``) a request costs one check of an optional.
///
/// Sampling is decided here, by Midtier, before any span exists: a request that is not sampled
/// gets a trace id, a `traceresponse` and a `traceparent` for the calls it makes, and no span
/// at all (making and dropping a dozen spans per request cost more than half of a proxied
/// call's CPU, docs/benchmarks.md). The caller's trace id is continued, but its choice of
/// sampling counts only from a trusted proxy (docs/operations.md, "Traces"): a device that
/// picks its trace ids, or sets the sampled flag, cannot make Midtier export its requests.
package struct RequestTracer: Sendable {
    let tracer: (any Tracer)?
    package let isOn: Bool
    /// Requests whose trace id falls under this bound are sampled (`samplingRatio` of 2^64).
    let sampledBelow: UInt64
    let samplesAll: Bool

    /// No traces.
    package static let off = RequestTracer(tracer: nil, samplingRatio: 0)

    /// Traces with `tracer` (tests give an in-memory one), sampling `samplingRatio` (0 to 1) of
    /// the requests.
    package init(tracer: (any Tracer)?, samplingRatio: Double = 1) {
        self.tracer = tracer
        self.isOn = tracer != nil
        let ratio = min(1, max(0, samplingRatio.isNaN ? 0 : samplingRatio))
        self.samplesAll = ratio >= 1
        self.sampledBelow = ratio >= 1 ? .max : UInt64(ratio * 18_446_744_073_709_551_615.0)
    }

    /// Exports to the OTLP/HTTP collector `settings` names (protobuf). The service exports in
    /// batches and flushes at shutdown; run it in the service group, listed before the
    /// listeners so that it stops after them. The standard `OTEL_*` environment variables,
    /// which every OpenTelemetry SDK reads, override these settings.
    package static func otlp(_ settings: TracingSettings, logger: Logger) throws -> (tracer: RequestTracer, service: any Service) {
        var configuration = OTel.Configuration.default
        configuration.serviceName = settings.serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.propagators = [.traceContext]
        configuration.diagnosticLogger = .custom(logger)
        configuration.traces.exporter = .otlp
        // What reaches the tracer is sampled already (`start`).
        configuration.traces.sampler = .alwaysOn
        configuration.traces.batchSpanProcessor.maxQueueSize = settings.maxQueuedSpans
        configuration.traces.batchSpanProcessor.maxExportBatchSize = min(512, settings.maxQueuedSpans)
        configuration.traces.otlpExporter.endpoint = settings.endpoint
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        keptForTheProcess.withLock { $0.append(contentsOf: [backend.factory, backend.service] as [any Sendable]) }
        return (RequestTracer(tracer: backend.factory, samplingRatio: settings.samplingRatio), backend.service)
    }

    /// The OTLP backends made, never released. swift-otel's OTLP/HTTP exporter shuts its HTTP
    /// client down with `syncShutdown()` when it is released (a backstop after the service's
    /// own shutdown), and AsyncHTTPClient stops the process when that happens on an event
    /// loop — where, with Swift concurrency on NIO's event loops (`midtier serve`), every task
    /// runs, the one that ends `serve` too. The service shuts the client down at a graceful
    /// shutdown; the objects themselves end with the process (one backend per `serve`).
    private static let keptForTheProcess = Mutex<[any Sendable]>([])

    /// Starts the trace of a device request, continuing the device's W3C trace context when it
    /// sent a valid one: a server span `name` when the request is sampled, only ids when it is
    /// not. `trustedCaller`: the request came through a trusted proxy, whose sampled flag is
    /// followed; anyone else's is not (Midtier draws). Nil when tracing is off. End it with
    /// ``RequestTrace/finish(status:)``.
    package func start(
        _ name: String, method: String, route: String, propagation: PropagationHeaders,
        trustedCaller: Bool = false
    ) -> RequestTrace? {
        guard let tracer else { return nil }
        let incoming = propagation.traceparent.flatMap {
            try? TraceContext(traceParentHeaderValue: $0, traceStateHeaderValue: propagation.tracestate)
        }
        var random = TraceIDs()
        let traceID = incoming?.traceID ?? TraceID.random(using: &random)
        let sampled: Bool
        if trustedCaller, let incoming {
            sampled = incoming.flags.contains(.sampled)
        } else {
            sampled = isSampled(draw: random.next())
        }
        guard sampled else {
            let own = TraceContext(traceID: traceID, spanID: SpanID.random(using: &random), flags: [], state: incoming?.state ?? TraceState())
            let traceparent = own.traceParentHeaderValue
            // `00-<trace id>-…`: the id is the 32 characters after the version.
            let id = traceparent.utf8.dropFirst(3).prefix(32)
            return RequestTrace(
                recording: nil, traceID: String(Substring(id)), traceresponse: traceparent,
                tracestate: incoming?.state.isEmpty == false ? own.traceStateHeaderValue : nil)
        }
        var parent = ServiceContext.topLevel
        if incoming != nil { tracer.extract(propagation, into: &parent, using: PropagationHeaders.Extractor()) }
        let span = tracer.startSpan(name, context: parent, ofKind: .server)
        span.attributes["http.request.method"] = method
        span.attributes["http.route"] = route
        var carrier = PropagationHeaders()
        tracer.inject(span.context, into: &carrier, using: PropagationHeaders.Injector())
        let traceresponse = carrier.traceparent ?? ""
        let ownTraceID = traceresponse.split(separator: "-").dropFirst().first.map(String.init) ?? traceID.description
        return RequestTrace(
            recording: .init(tracer: tracer, request: span, span: span), traceID: ownTraceID, traceresponse: traceresponse,
            tracestate: carrier.tracestate)
    }

    /// Midtier's own draw against the ratio (never the caller's trace id, which it chooses).
    func isSampled(draw: UInt64) -> Bool {
        samplesAll || draw < sampledBelow
    }
}

/// Ids for traces and spans Midtier starts: unique and evenly spread (sampling reads the
/// trace id), not secret. Each is a counter shared by the process, from a random start,
/// through the SplitMix64 finalizer (a bijection, so no two draws give the same id). The
/// system's generator costs a system call per number, and OpenSSL's took 2 % of a proxied
/// call's CPU (docs/benchmarks.md).
struct TraceIDs: RandomNumberGenerator {
    private static let counter: Atomic<UInt64> = {
        var system = SystemRandomNumberGenerator()
        return Atomic(system.next())
    }()

    mutating func next() -> UInt64 {
        var z = Self.counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension RequestTrace {
    /// Runs `body` with this trace as ``current``.
    package func run<T>(_ body: () async -> T) async -> T {
        await Self.$current.withValue(self, operation: body)
    }

    /// Ends the device request's span with the answer's status (nothing to end when the
    /// request was not sampled).
    package func finish(status: Int) {
        guard let recording else { return }
        recording.request.attributes["http.response.status_code"] = status
        if status >= 500 { recording.request.setStatus(SpanStatus(code: .error)) }
        recording.request.end()
    }
}
