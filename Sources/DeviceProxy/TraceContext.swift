import HTTPTypes
package import Hummingbird
package import RequestTracing

extension Request {
    /// The device's W3C trace context (`traceparent`, `tracestate`), which its trace continues
    /// (docs/operations.md, "Traces").
    package var propagationHeaders: PropagationHeaders {
        PropagationHeaders(traceparent: headers[.traceparent], tracestate: headers[.tracestate])
    }
}

extension HTTPField.Name {
    static let traceparent = Self("traceparent")!
    static let tracestate = Self("tracestate")!
    /// W3C Trace Context Level 2: `00-<trace id>-<span id>-<flags>` of Midtier's span for the
    /// request; the trace id is what a support ticket names.
    package static let traceresponse = Self("traceresponse")!
}
