package import Hummingbird

extension Request {
    /// Reads the whole body of a request to Midtier's own routes (registration, self-service,
    /// admin), at most `limit` bytes: 413 past the limit, 400 when the body cannot be read — a
    /// broken chunked framing (a chunk size that is not hexadecimal, negative or too large, a
    /// chunk longer than its size line) or a connection cut mid-body —, as on the proxy path.
    package mutating func collectBody(upTo limit: Int, describedAs what: String) async throws(Refusal) -> ByteBuffer {
        var collected = ByteBuffer()
        var iterator = body.makeAsyncIterator()
        while true {
            let next: ByteBuffer?
            do {
                next = try await iterator.next()
            } catch {
                throw .badRequest("the \(what) is malformed or was cut off (broken chunked framing or an early end)")
            }
            guard var chunk = next else { break }
            guard collected.readableBytes + chunk.readableBytes <= limit else {
                throw Refusal(.contentTooLarge, code: "PAYLOAD_TOO_LARGE", "the \(what) is larger than \(limit) bytes")
            }
            collected.writeBuffer(&chunk)
        }
        body = .init(buffer: collected)
        return collected
    }
}
