package import Instrumentation

/// The two W3C trace context headers, as a carrier of their own: a propagator's message about
/// a malformed `traceparent` then shows these values only, never the request's other headers
/// (its credentials and cookies).
package struct PropagationHeaders: Sendable, CustomStringConvertible {
    package var traceparent: String?
    package var tracestate: String?
    /// What an `inject` wrote, in order.
    var fields: [(name: String, value: String)] = []

    package init(traceparent: String? = nil, tracestate: String? = nil) {
        self.traceparent = traceparent
        self.tracestate = tracestate
    }

    package var description: String { "traceparent: \(traceparent ?? "none"), tracestate: \(tracestate ?? "none")" }

    struct Extractor: Instrumentation.Extractor {
        func extract(key: String, from carrier: PropagationHeaders) -> String? {
            switch key.lowercased() {
            case "traceparent": carrier.traceparent
            case "tracestate": carrier.tracestate
            default: nil
            }
        }
    }

    struct Injector: Instrumentation.Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout PropagationHeaders) {
            carrier.fields.append((key, value))
            switch key.lowercased() {
            case "traceparent": carrier.traceparent = value
            case "tracestate": carrier.tracestate = value
            default: break
            }
        }
    }
}
