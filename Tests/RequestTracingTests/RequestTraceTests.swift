import InMemoryTracing
import Testing
import Tracing
import W3CTraceContext

@testable import RequestTracing

@Suite(.timeLimit(.minutes(10))) struct RequestTraceTests {
    struct Refused: Error, Equatable {}

    /// Tracing off: each helper only runs what it is given, and nothing is current.
    @Test func withoutATraceTheBodyJustRuns() async throws {
        #expect(RequestTracer.off.start("GET /x", method: "GET", route: "/x", propagation: PropagationHeaders()) == nil)
        let value = await RequestTrace.span("step") { span in
            span.set("key", "value")
            return 42
        }
        #expect(value == 42)
        await #expect(throws: Refused.self) {
            try await RequestTrace.span("step") { _ throws(Refused) in throw Refused() }
        }
        #expect(RequestTrace.propagationHeaders().isEmpty)
        #expect(RequestTrace.current == nil)
    }

    /// Children nest under the span that is current, a failed step ends with the error status
    /// but without the error's text, and the request's span ends with the answer's status.
    @Test func spansNestAndFailuresCarryNoText() async throws {
        let tracer = InMemoryTracer()
        let trace = try #require(
            RequestTracer(tracer: tracer).start(
                "GET /{destination}", method: "GET", route: "/{destination}/*",
                propagation: PropagationHeaders()))
        await trace.run {
            await RequestTrace.span("token") { span in
                span.set("midtier.token.cache", "miss")
                await RequestTrace.span("token exchange", kind: .client) { _ in
                    RequestTrace.currentSpan.set("inner", 1)
                }
            }
            RequestTrace.requestSpan.set("midtier.destination", "sf")
            _ = try? await RequestTrace.span("admission") { _ throws(Refused) in throw Refused() }
            #expect(RequestTrace.current != nil)
        }
        #expect(RequestTrace.current == nil)
        trace.finish(status: 503)

        let spans = tracer.finishedSpans
        func span(_ name: String) throws -> FinishedInMemorySpan { try #require(spans.first { $0.operationName == name }) }
        let request = try span("GET /{destination}")
        let token = try span("token")
        let exchange = try span("token exchange")
        let admission = try span("admission")
        #expect(token.spanContext.parentSpanID == request.spanContext.spanID)
        #expect(exchange.spanContext.parentSpanID == token.spanContext.spanID)
        #expect(admission.spanContext.parentSpanID == request.spanContext.spanID)
        #expect(exchange.kind == .client && token.kind == .internal && request.kind == .server)
        #expect(token.attributes["midtier.token.cache"]?.toSpanAttribute() == .string("miss"))
        #expect(exchange.attributes["inner"]?.toSpanAttribute() == .int64(1))
        #expect(request.attributes["midtier.destination"]?.toSpanAttribute() == .string("sf"))
        #expect(request.attributes["http.response.status_code"]?.toSpanAttribute() == .int64(503))
        #expect(admission.status?.code == .error && admission.status?.message == nil && admission.errors.isEmpty)
        #expect(request.status?.code == .error)
        #expect(token.status == nil)
    }

    /// A request that is not sampled has ids and no spans: it continues the device's trace id,
    /// answers a `traceresponse` with the sampled flag off, and its calls carry the same
    /// `traceparent` and the device's `tracestate`. A malformed `traceparent` starts a trace.
    @Test func aRequestNotSampledHasIdsAndNoSpans() async throws {
        let tracer = InMemoryTracer()
        let never = RequestTracer(tracer: tracer, samplingRatio: 0)
        let device = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let trace = try #require(
            never.start(
                "GET /{destination}", method: "GET", route: "/{destination}/*",
                propagation: PropagationHeaders(traceparent: device, tracestate: "vendor=opaque")))
        #expect(trace.traceID == "0af7651916cd43dd8448eb211c80319c")
        let parts = trace.traceresponse.split(separator: "-")
        #expect(parts.count == 4 && parts[1] == "0af7651916cd43dd8448eb211c80319c" && parts[2] != "b7ad6b7169203331" && parts[3] == "00")
        let headers = await trace.run {
            await RequestTrace.span("token") { span in span.set("midtier.token.cache", "hit") }
            return RequestTrace.propagationHeaders()
        }
        trace.finish(status: 200)
        #expect(headers.map(\.name) == ["traceparent", "tracestate"])
        #expect(headers.first?.value == trace.traceresponse && headers.last?.value == "vendor=opaque")
        #expect(tracer.finishedSpans.isEmpty && tracer.activeSpans.isEmpty)

        let fresh = try #require(never.start("GET /x", method: "GET", route: "/x", propagation: PropagationHeaders(traceparent: "00-zz-01")))
        #expect(fresh.traceID.count == 32 && fresh.traceID != "0af7651916cd43dd8448eb211c80319c")
    }

    /// Sampling is Midtier's draw: a device that picks trace ids the old rule sampled (low
    /// bytes zero) and sets the sampled flag gets about the configured share exported, not all
    /// (before, 300 such requests at 0.001 exported 210 KB). A trusted proxy's flag is followed.
    @Test func samplingIsMidtiersDrawNotTheCallers() {
        let tracer = InMemoryTracer()
        let rare = RequestTracer(tracer: tracer, samplingRatio: 0.001)
        let chosen = PropagationHeaders(traceparent: "00-0af7651916cd43dd0000000000000000-b7ad6b7169203331-01")
        func share(_ tracer: RequestTracer, of count: Int) -> Int {
            var sampled = 0
            for _ in 0..<count {
                guard let trace = tracer.start("GET /x", method: "GET", route: "/x", propagation: chosen) else { continue }
                #expect(trace.traceID == "0af7651916cd43dd0000000000000000", "the caller's trace id is continued")
                if trace.recording != nil { sampled += 1 }
                trace.finish(status: 200)
            }
            return sampled
        }
        let rareShare = share(rare, of: 1000)
        #expect(rareShare <= 10, "\(rareShare) of 1000 at 0.001")
        let halfShare = share(RequestTracer(tracer: InMemoryTracer(), samplingRatio: 0.5), of: 400)
        #expect((140...260).contains(halfShare), "\(halfShare) of 400 at 0.5")
        // Through a trusted proxy, its decision holds either way.
        let never = RequestTracer(tracer: InMemoryTracer(), samplingRatio: 0)
        #expect(never.start("GET /x", method: "GET", route: "/x", propagation: chosen, trustedCaller: true)?.recording != nil)
        let always = RequestTracer(tracer: InMemoryTracer(), samplingRatio: 1)
        let unsampled = PropagationHeaders(traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
        #expect(always.start("GET /x", method: "GET", route: "/x", propagation: unsampled, trustedCaller: true)?.recording == nil)
        #expect(always.start("GET /x", method: "GET", route: "/x", propagation: unsampled)?.recording != nil)
    }

    /// A propagator that reports a malformed `traceparent` sees only the two trace headers.
    @Test func theCarrierShowsOnlyTheTraceHeaders() {
        let carrier = PropagationHeaders(traceparent: "not-a-traceparent", tracestate: nil)
        #expect(carrier.description == "traceparent: not-a-traceparent, tracestate: none")
    }
}
