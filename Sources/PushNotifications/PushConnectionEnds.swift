import AsyncHTTPClient
import NIOCore
import NIOHTTP2

/// A push service ends an HTTP/2 connection when it chooses (docs/push.md, "Connections"): a
/// GOAWAY, after which it answers the requests it took and refuses the others unprocessed, or a
/// plain close. A request its connection's end left without an answer is sent again at once —
/// the pool opens a new connection — within the same attempt, so that it is neither delayed by
/// the back-off nor counted as an attempt the service refused.
enum PushConnectionEnds {
    /// How often one request is sent at most when connections keep ending under it: enough for
    /// a service that ends each connection after a few requests while 64 are in flight, bounded
    /// so that one that ends every connection at once is not asked without end.
    static let sendsPerAttempt = 10

    /// Executes `request` with `client` as `execute(_:deadline:)` does, sending it again at once
    /// while its connection ended before an answer (`endedWithItsConnection`), at most
    /// `sendsPerAttempt` times and all before `deadline`. The last failure is thrown.
    static func execute(_ request: HTTPClientRequest, with client: HTTPClient, deadline: NIODeadline) async throws -> HTTPClientResponse {
        var sends = 0
        while true {
            sends += 1
            do {
                return try await client.execute(request, deadline: deadline)
            } catch {
                guard sends < sendsPerAttempt, !(error is PushSendWithdrawn), endedWithItsConnection(error), !Task.isCancelled,
                    NIODeadline.now() < deadline
                else { throw error }
            }
        }
    }

    /// Whether `error` says the request's connection ended (or was ending) before the service
    /// answered: refused by the service's GOAWAY or `RST_STREAM REFUSED_STREAM` (not processed),
    /// dropped with its connection (NIO closes such streams with `CANCEL`), put by the pool on a
    /// connection that was closing (`cancelled`, not sent), or the connection closed under it
    /// (the service may have taken it: sent again, it can arrive twice). A connect failure, a
    /// TLS failure or a deadline is none of these: the delivery backs off as usual.
    static func endedWithItsConnection(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError {
            return error == .remoteConnectionClosed || error == .cancelled
        }
        if let error = error as? NIOHTTP2Errors.StreamClosed {
            return error.errorCode == .refusedStream || error.errorCode == .cancel
        }
        if let error = error as? ChannelError {
            return error == .ioOnClosedChannel || error == .alreadyClosed || error == .outputClosed || error == .eof
        }
        return false
    }
}
