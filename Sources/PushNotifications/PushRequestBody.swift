import AsyncHTTPClient
import NIOCore

/// A push request's body, handed over only once the request's head is on its connection —
/// after any wait for a connection, an access token or a re-send — and only if `stillWanted`
/// says so then (docs/push.md, "Delivery"): a lock, block, delete or token change made while
/// the request waited wins, and the notification never leaves (an APNs request is then a head
/// without a body, reset; an FCM request's token is in its body). Each send of the request
/// asks again.
struct PushRequestBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let bytes: ByteBuffer
    let stillWanted: @Sendable () async -> Bool

    struct AsyncIterator: AsyncIteratorProtocol {
        var bytes: ByteBuffer?
        let stillWanted: @Sendable () async -> Bool

        mutating func next() async throws -> ByteBuffer? {
            guard let bytes else { return nil }
            self.bytes = nil
            guard await stillWanted() else { throw PushSendWithdrawn() }
            return bytes
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bytes: bytes, stillWanted: stillWanted) }

    /// The body for AsyncHTTPClient, of known length.
    var body: HTTPClientRequest.Body { .stream(self, length: .known(Int64(bytes.readableBytes))) }
}

/// A request whose delivery was no longer wanted when its body was to go.
struct PushSendWithdrawn: Error {}
