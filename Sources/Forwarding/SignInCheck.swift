import MidtierCore
import NIOCore
import NIOHTTP1

extension Forwarder {
    /// The status a destination's back end answers to a GET of `path` (under its `URL`) with
    /// `authorization`: how a `backend` app checks a device's Basic credentials
    /// (docs/identity.md, "Signing in with the back end's own users"). It goes over the pooled
    /// connections, with the destination's TLS trust and timeout; the answer's body is read and
    /// dropped (a streamed one closes its connection).
    package func status(ofGetting path: String, at destination: UpstreamDestination, authorization: String) async throws(ForwardingError) -> Int {
        guard let origin = destination.origin else {
            throw .unreachable(destination.trustProblem ?? "the URL of destination \(destination.name) cannot be called")
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: origin.authority)
        headers.add(name: "Authorization", value: authorization)
        headers.add(name: "Accept", value: "application/json")
        for (name, value) in destination.fixedHeaders where name.lowercased() != "authorization" { headers.add(name: name, value: value) }
        let target = destination.target(remainder: Substring(path == "/" ? "" : path), query: nil)
        let timeout = destination.configuration.timeoutMilliseconds
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.isEmpty ? "/" : target, headers: headers)
        let call = upstreams.start(head, to: origin, hasBody: false, deadline: .now() + .milliseconds(Int64(timeout)))
        do {
            let answer = try await call.answer.get()
            if case .stream(let body) = answer.body {
                var read = 0
                for try await part in body {
                    read += part.readableBytes
                    if read > 1 << 20 { break }
                }
            }
            return Int(answer.head.status.code)
        } catch UpstreamFailure.timedOut {
            throw .timedOut(milliseconds: timeout)
        } catch {
            throw .unreachable("the back end of destination \(destination.name) is unreachable")
        }
    }
}
