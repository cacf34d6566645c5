package import Logging
package import MidtierCore
import OTel
package import ServiceLifecycle
package import Tracing

/// Starts the traces of device requests (docs/operations.md, "Traces"), or nothing: with
/// tracing off (``off``) a request costs one check of an optional.
package struct RequestTracer: Sendable {
    let tracer: (any Tracer)?

    /// No traces.
    package static let off = RequestTracer(tracer: nil)

    /// Traces with `tracer` (tests give an in-memory one).
    package init(tracer: (any Tracer)?) { self.tracer = tracer }

    package var isOn: Bool { tracer != nil }

    /// Exports to the OTLP/HTTP collector `settings` names (protobuf), sampling by trace id:
    /// a device's `traceparent` is continued, but its sampled flag does not decide. The
    /// service exports in batches and flushes at shutdown; run it in the service group, listed
    /// before the listeners so that it stops after them. The standard `OTEL_*` environment
    /// variables, which every OpenTelemetry SDK reads, override these settings.
    package static func otlp(_ settings: TracingSettings, logger: Logger) throws -> (tracer: RequestTracer, service: any Service) {
        var configuration = OTel.Configuration.default
        configuration.serviceName = settings.serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.propagators = [.traceContext]
        configuration.diagnosticLogger = .custom(logger)
        configuration.traces.exporter = .otlp
        // A ratio of 0 keeps trace ids (unlike the constant "off" sampler, which drops them).
        configuration.traces.sampler = .traceIDRatio(ratio: min(1, max(0, settings.samplingRatio)))!
        configuration.traces.batchSpanProcessor.maxQueueSize = settings.maxQueuedSpans
        configuration.traces.batchSpanProcessor.maxExportBatchSize = min(512, settings.maxQueuedSpans)
        configuration.traces.otlpExporter.endpoint = settings.endpoint
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        return (RequestTracer(tracer: backend.factory), backend.service)
    }

    /// Starts the trace of a device request: a server span `name`, the child of the device's
    /// W3C trace context when it sent one. Nil when tracing is off. End it with
    /// ``RequestTrace/finish(status:)``.
    package func start(_ name: String, method: String, route: String, propagation: PropagationHeaders) -> RequestTrace? {
        guard let tracer else { return nil }
        var parent = ServiceContext.topLevel
        if propagation.traceparent != nil { tracer.extract(propagation, into: &parent, using: PropagationHeaders.Extractor()) }
        let span = tracer.startSpan(name, context: parent, ofKind: .server)
        span.attributes["http.request.method"] = method
        span.attributes["http.route"] = route
        var carrier = PropagationHeaders()
        tracer.inject(span.context, into: &carrier, using: PropagationHeaders.Injector())
        let traceresponse = carrier.traceparent ?? ""
        let traceID = traceresponse.split(separator: "-").dropFirst().first.map(String.init) ?? ""
        return RequestTrace(tracer: tracer, request: span, span: span, traceID: traceID, traceresponse: traceresponse)
    }
}

extension RequestTrace {
    /// Runs `body` with this trace as ``current``.
    package func run<T>(_ body: () async -> T) async -> T {
        await Self.$current.withValue(self, operation: body)
    }

    /// Ends the device request's span with the answer's status.
    package func finish(status: Int) {
        request.attributes["http.response.status_code"] = status
        if status >= 500 { request.setStatus(SpanStatus(code: .error)) }
        request.end()
    }
}
