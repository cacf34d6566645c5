package import Logging
package import Tracing

/// The trace of the device request being answered (docs/operations.md, "Traces"): a
/// task-local, set for as long as the request is answered when tracing is on, and nil
/// otherwise — then every function here only runs what it is given.
///
/// Spans carry names, routes, configured app and destination names, status codes, byte counts
/// and back-end addresses; never a user id, a credential, a cookie, a header value, a query or
/// an error's text.
/// (A class: the task-local is read at every step of the request path, and a reference is
/// cheaper to hand out than a copy of the ids and spans.)
package final class RequestTrace: Sendable {
    @TaskLocal package static var current: RequestTrace?

    /// The spans of a sampled request.
    @usableFromInline
    struct Recording: Sendable {
        let tracer: any Tracer
        /// The device request's span.
        let request: any Span
        /// The span that children start under: the request's, or a child's while it runs.
        let span: any Span
    }

    /// Nil for a request that is not sampled: it has ids, and no spans.
    @usableFromInline let recording: Recording?
    /// The request's trace id, 32 lowercase hex digits.
    package let traceID: String
    /// `00-<trace id>-<the request span's id>-<flags>`: the W3C `traceresponse` header the
    /// device is answered with, and for a request not sampled the `traceparent` of its calls.
    package let traceresponse: String
    /// The `tracestate` its calls carry on (the device's).
    let tracestate: String?

    init(recording: Recording?, traceID: String, traceresponse: String, tracestate: String?) {
        self.recording = recording
        self.traceID = traceID
        self.traceresponse = traceresponse
        self.tracestate = tracestate
    }

    /// What a child span stands for.
    package enum Kind: Sendable {
        /// Work inside Midtier.
        case `internal`
        /// A call out of Midtier (the back end, the token service).
        case client
    }

    /// Runs `body` in a child span `name` of the current span; without a trace, just runs it.
    /// A span whose body throws ends with the error status, without the error's text.
    /// (Inlined: with tracing off a call is the body's call and one task-local read, with no
    /// frame of its own — frames deepen the task's stack, which costs allocations.)
    @inlinable
    package static func span<T, Failure: Error>(
        _ name: String, kind: Kind = .internal,
        _ body: (TraceSpan) async throws(Failure) -> T
    ) async throws(Failure) -> T {
        guard let trace = current, let recording = trace.recording else { return try await body(TraceSpan(nil)) }
        return try await traced(trace, recording, name, kind: kind, body)
    }

    @usableFromInline
    static func traced<T, Failure: Error>(
        _ trace: RequestTrace, _ recording: Recording, _ name: String, kind: Kind,
        _ body: (TraceSpan) async throws(Failure) -> T
    ) async throws(Failure) -> T {
        let child = recording.tracer.startSpan(name, context: recording.span.context, ofKind: kind == .client ? .client : .internal)
        defer { child.end() }
        let inner = RequestTrace(
            recording: Recording(tracer: recording.tracer, request: recording.request, span: child),
            traceID: trace.traceID, traceresponse: trace.traceresponse, tracestate: trace.tracestate)
        let result: Result<T, Failure> = await $current.withValue(inner) {
            do throws(Failure) {
                return .success(try await body(TraceSpan(child)))
            } catch {
                return .failure(error)
            }
        }
        if case .failure = result { child.setStatus(SpanStatus(code: .error)) }
        return try result.get()
    }

    /// The current span: where an attribute set from code below the request path lands (the
    /// credential check marks whether a remembered credential answered). Does nothing without a trace.
    package static var currentSpan: TraceSpan { TraceSpan(current?.recording?.span) }

    /// The device request's own span (its app and destination are known only on the way).
    package static var requestSpan: TraceSpan { TraceSpan(current?.recording?.request) }

    /// `traceparent` (and `tracestate`, when there is one) for a call Midtier makes now, naming
    /// the current span as its parent; empty without a trace.
    package static func propagationHeaders() -> [(name: String, value: String)] {
        guard let trace = current else { return [] }
        guard let recording = trace.recording else {
            // Not sampled: the calls name the request (its span id, unrecorded) as their parent.
            var fields = [(name: "traceparent", value: trace.traceresponse)]
            if let state = trace.tracestate { fields.append((name: "tracestate", value: state)) }
            return fields
        }
        var carrier = PropagationHeaders()
        recording.tracer.inject(recording.span.context, into: &carrier, using: PropagationHeaders.Injector())
        return carrier.fields
    }

    /// Log lines written while a request is answered carry its `trace_id`.
    package static let loggingMetadata = Logger.MetadataProvider {
        guard let trace = current else { return [:] }
        return ["trace_id": .string(trace.traceID)]
    }
}

/// A span to set attributes on, or nothing (tracing off): callers need not ask which.
package struct TraceSpan: Sendable {
    @usableFromInline let span: (any Span)?

    @usableFromInline init(_ span: (any Span)?) { self.span = span }

    package func set(_ key: String, _ value: String) {
        span?.attributes[key] = value
    }

    package func set(_ key: String, _ value: Int) {
        span?.attributes[key] = value
    }

    /// The span ends with the error status (a failure that is not an exception: a refusal, a
    /// status of 500 or more).
    package func fail() {
        span?.setStatus(SpanStatus(code: .error))
    }
}
