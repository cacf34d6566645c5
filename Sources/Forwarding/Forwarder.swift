package import HTTPTypes
package import Logging
import MidtierCore
package import NIOCore
import NIOHTTP1
package import NIOSSL

/// Why a call was not forwarded, or how the back end failed. Each maps to one status
/// (docs/device-api.md, "Refusals").
package enum ForwardingError: Error, Sendable, Equatable {
    /// 400: the request must not be forwarded (path tricks, framing problems).
    case badRequest(String)
    /// 413: the body is larger than `maxRequestBodyBytes`.
    case bodyTooLarge(limit: Int)
    /// 502: the back end could not be reached or broke the connection.
    case unreachable(String)
    /// 504: the back end did not answer within the destination's `timeout`.
    case timedOut(milliseconds: Int)
}

/// Who is calling and how to present Midtier to the back end, per call.
package struct ForwardingContext: Sendable {
    /// The device's address, for `X-Forwarded-For`.
    package var clientAddress: String?
    /// `publicURL`'s scheme and authority, for `X-Forwarded-Proto`/`-Host`.
    package var publicScheme: String
    package var publicHost: String
    /// The `Authorization` value Midtier sends (Bearer or Basic), or nil for none.
    package var authorization: String?
    /// The back end's own cookies for this registration (from `BackendSessions`).
    package var backendCookies: String?
    /// `traceparent` and `tracestate` naming Midtier's span of this call, which replace the
    /// device's (none with tracing off: then the device's pass as they came).
    package var propagation: [(name: String, value: String)] = []
    /// Headers Midtier adds for the destination's authentication (`SSL_CLIENT_CERT` of
    /// `PrincipalPropagation`); the device's of these names never pass (``HeaderPolicy``).
    package var credentialHeaders: [(name: String, value: String)] = []
    /// One user's TLS context (`PrincipalPropagation` over mutual TLS), in place of the
    /// destination's.
    package var clientTLS: NIOSSLContext?

    package init(clientAddress: String?, publicScheme: String, publicHost: String, authorization: String?, backendCookies: String? = nil) {
        self.clientAddress = clientAddress
        self.publicScheme = publicScheme
        self.publicHost = publicHost
        self.authorization = authorization
        self.backendCookies = backendCookies
    }
}

/// Sends a device's call on to a destination and streams the answer back (docs/forwarding.md).
///
/// Headers are rebuilt by ``HeaderPolicy``: hop-by-hop, identity and Midtier's own headers and
/// the device's cookies (but those its destination lists) never reach the back end;
/// `Set-Cookie` never reaches the device. Bodies stream both
/// ways without being collected (small answers are read whole). Redirects are passed to the
/// device, never followed here. Calls go over ``UpstreamConnectionPool``'s keep-alive
/// connections, on the event loop of the device's request.
package struct Forwarder: Sendable {
    package let upstreams: UpstreamConnectionPool
    package let maxRequestBodyBytes: Int

    package init(upstreams: UpstreamConnectionPool, maxRequestBodyBytes: Int) {
        self.upstreams = upstreams
        self.maxRequestBodyBytes = maxRequestBodyBytes
    }

    /// Methods that carry a body by their nature: sent with `Content-Length: 0` when the device
    /// sent none, so that no back end waits for one.
    static let bodyMethods: Set<HTTPRequest.Method> = [.post, .put, .patch, HTTPRequest.Method("MERGE")!]

    /// Sends the device's request (`head` and `body`) to `destination` (the device's path after
    /// the destination name is `remainder`, already checked by `ProxyPath.problem(in:)`) and
    /// returns the answer's head, its body still to be read (or, small, read whole).
    package func forward<Body: AsyncSequence & Sendable>(
        _ head: HTTPRequest,
        body: Body,
        to destination: UpstreamDestination,
        remainder: Substring,
        context: ForwardingContext,
        logger: Logger
    ) async throws(ForwardingError) -> UpstreamResponse where Body.Element == ByteBuffer {
        let fields = head.headerFields
        guard let origin = destination.origin(presenting: context.clientTLS) else {
            throw .unreachable(destination.trustProblem ?? "the URL of destination \(destination.name) cannot be called")
        }
        var headers = requestHeaders(of: fields, destination: destination, context: context)
        headers.replaceOrAdd(name: "Host", value: origin.authority)

        let contentLengths = fields[values: .contentLength]
        let declaredLength: Int?
        if contentLengths.isEmpty {
            declaredLength = nil
        } else {
            guard Set(contentLengths).count == 1, let length = Int(contentLengths[0]), length >= 0 else {
                throw .badRequest("conflicting or invalid Content-Length")
            }
            declaredLength = length
        }
        if let declaredLength, declaredLength > maxRequestBodyBytes { throw .bodyTooLarge(limit: maxRequestBodyBytes) }
        let chunked = fields[.transferEncoding] != nil
        let hasBody = (declaredLength ?? 0) > 0 || (declaredLength == nil && chunked)
        if let declaredLength, declaredLength > 0 {
            headers.add(name: "Content-Length", value: String(declaredLength))
        } else if hasBody {
            headers.add(name: "Transfer-Encoding", value: "chunked")
        } else if declaredLength != nil || Self.bodyMethods.contains(head.method) {
            headers.add(name: "Content-Length", value: "0")
        }

        let timeout = destination.configuration.timeoutMilliseconds
        let upstreamHead = HTTPRequestHead(
            version: .http1_1, method: HTTPMethod(rawValue: head.method.rawValue),
            uri: destination.target(remainder: remainder, query: Self.query(of: head)), headers: headers)
        let call = upstreams.start(upstreamHead, to: origin, hasBody: hasBody, deadline: .now() + .milliseconds(Int64(timeout)))
        let answer: UpstreamAnswer
        do {
            if hasBody { try await send(body, on: call.connected) }
            answer = try await call.answer.get()
        } catch UpstreamFailure.timedOut {
            throw .timedOut(milliseconds: timeout)
        } catch is BodyTooLarge {
            throw .bodyTooLarge(limit: maxRequestBodyBytes)
        } catch is RequestBodyBroken {
            throw .badRequest("the request body is malformed or was cut off")
        } catch {
            logger.warning("back end unreachable", metadata: ["destination": "\(destination.name)", "error": "\(String(describing: error))"])
            throw .unreachable("the back end of destination \(destination.name) is unreachable")
        }
        let tables = destination.answerTables.tables(for: context.authorization)
        return UpstreamResponse(
            head: answer.head, body: answer.body, headers: responseHeaders(answer.head.headers, redacting: tables.redaction),
            tables: tables)
    }

    /// Streams the device's body to the back end, part by part as the connection takes them.
    /// A device body that breaks or grows past the limit closes the back-end connection and
    /// is thrown; a connection that fails is left for the answer to report (the back end may
    /// have answered early, or the call timed out).
    private func send<Body: AsyncSequence & Sendable>(
        _ body: Body, on connected: EventLoopFuture<any Channel>
    ) async throws where Body.Element == ByteBuffer {
        let channel = try await connected.get()
        do {
            for try await chunk in LimitedBody(base: body, limit: maxRequestBodyBytes) {
                try await channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(chunk))).get()
            }
            try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        } catch let error as BodyTooLarge {
            channel.close(promise: nil)
            throw error
        } catch let error as RequestBodyBroken {
            channel.close(promise: nil)
            throw error
        } catch {
            // The answer says what happened.
        }
    }

    /// The query of a request target as sent: what follows the first `?`, up to a `#` (as
    /// Hummingbird's `URI.query` reads it); nil without one.
    static func query(of head: HTTPRequest) -> String? {
        guard let path = head.path, let mark = path.firstIndex(of: "?") else { return nil }
        return String(path[path.index(after: mark)...].prefix { $0 != "#" })
    }

    /// Whether a request with these header fields has no body, so it can be sent twice (after
    /// a token renewal).
    package static func isReplayable(_ fields: HTTPFields) -> Bool {
        fields[.transferEncoding] == nil && fields[values: .contentLength].allSatisfy { $0 == "0" }
    }

    func requestHeaders(of fields: HTTPFields, destination: UpstreamDestination, context: ForwardingContext) -> HTTPHeaders {
        let connectionTokens = HeaderPolicy.connectionTokens(fields[values: .connection])
        var headers = HTTPHeaders()
        headers.reserveCapacity(fields.count + destination.fixedHeaders.count + 6)
        for field in fields
        where HeaderPolicy.forwardsRequestHeader(lowercased: field.name.canonicalName, connectionTokens: connectionTokens) {
            headers.add(name: field.name.rawName, value: field.value)
        }
        // HTTP/1.1 allows one Cookie header: the back end's session cookies that Midtier keeps,
        // then those of the device's own cookies the destination lists (none by default).
        var cookies: [String] = []
        if let kept = context.backendCookies { cookies.append(kept) }
        cookies += HeaderPolicy.deviceCookies(of: fields, listed: destination.configuration.forwardDeviceCookies, kept: context.backendCookies)
        if !cookies.isEmpty { headers.add(name: "Cookie", value: cookies.joined(separator: "; ")) }
        // Bodies come back uncompressed so that their URLs can be rewritten.
        headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        for (name, value) in destination.fixedHeaders {
            headers.replaceOrAdd(name: name, value: value)
        }
        if let authorization = context.authorization {
            headers.replaceOrAdd(name: "Authorization", value: authorization)
        }
        for (name, value) in context.credentialHeaders { headers.replaceOrAdd(name: name, value: value) }
        if !context.propagation.isEmpty {
            headers.remove(name: "traceparent")
            headers.remove(name: "tracestate")
            for (name, value) in context.propagation { headers.add(name: name, value: value) }
        }
        if let address = context.clientAddress { headers.add(name: "X-Forwarded-For", value: address) }
        headers.add(name: "X-Forwarded-Host", value: context.publicHost)
        headers.add(name: "X-Forwarded-Proto", value: context.publicScheme)
        return headers
    }

    func responseHeaders(_ upstream: HTTPHeaders, redacting redaction: CredentialRedaction) -> HTTPFields {
        let connectionTokens =
            upstream.contains(name: "connection")
            ? HeaderPolicy.connectionTokens(upstream[canonicalForm: "connection"].map(String.init)) : []
        var fields = HTTPFields()
        fields.reserveCapacity(upstream.count)
        for (name, value) in upstream {
            guard let fieldName = HTTPField.Name(name),
                HeaderPolicy.forwardsResponseHeader(lowercased: fieldName.canonicalName, connectionTokens: connectionTokens)
            else { continue }
            fields.append(HTTPField(name: fieldName, value: redaction.redact(value) ?? value))
        }
        return fields
    }
}

/// The body of an answer for the device: read whole (small answers), or streamed from the back
/// end as it comes.
package enum AnswerBody: Sendable {
    case whole(ByteBuffer)
    case stream(any AsyncSequence<ByteBuffer, any Error> & Sendable)
}

/// A back end's answer whose body has not been read yet (or, small, was read whole).
package struct UpstreamResponse: Sendable {
    let head: HTTPResponseHead
    let body: UpstreamAnswer.Body
    /// The headers that may reach the device.
    package let headers: HTTPFields
    /// The credential Midtier sent (kept out of what the device sees) and the destination's URL
    /// rewriting.
    let tables: AnswerTables

    /// The credential Midtier sent, kept out of what the device sees.
    package var redaction: CredentialRedaction { tables.redaction }

    package var status: Int { Int(head.status.code) }

    /// The body's size when it was read whole (small answers); nil while it streams.
    package var wholeBodyBytes: Int? {
        if case .whole(let buffer) = body { return buffer.readableBytes }
        return nil
    }

    /// The back end's `Set-Cookie` values (kept by Midtier, never sent to the device).
    package var setCookies: [String] { head.headers["Set-Cookie"] }

    package var contentType: String? { head.headers.first(name: "Content-Type") }

    /// The answer for the device, its body streamed from the back end (small ones read whole):
    /// `Location`/`Content-Location` and textual bodies have the back end's URLs rewritten; the
    /// credential Midtier added is redacted from every body, read whole or streamed (one pass
    /// does both). A streamed body that is rewritten goes out chunked; one
    /// that is only redacted keeps its `Content-Length` (`CredentialRedaction.keepingLength`).
    /// A streamed body the back end does not finish in time is cut off (the answer has begun:
    /// the device sees the connection close before the end of the body).
    package func deviceAnswer() -> (head: HTTPResponse, body: AnswerBody) {
        let status = HTTPResponse.Status(code: Int(head.status.code), reasonPhrase: head.status.reasonPhrase)
        var headers = headers
        let rewrite = URLRewriter.isRewritable(contentType: contentType) && Self.isIdentity(head.headers.first(name: "Content-Encoding"))
        for name in [HTTPField.Name.location, HTTPField.Name.contentLocation] {
            if let value = headers[name] { headers[name] = tables.rewriter.rewrite(value) }
        }
        let replacements = rewrite ? tables.redactingAndRewriting : redaction.replacements
        switch body {
        case .whole(var buffer):
            if !replacements.isEmpty {
                var carry: ByteBuffer?
                let replaced = replacements.replace(buffer, carry: &carry, final: true)
                if replaced.readableBytes != buffer.readableBytes { headers[.contentLength] = String(replaced.readableBytes) }
                buffer = replaced
            }
            return (HTTPResponse(status: status, headerFields: headers), .whole(buffer))
        case .stream(let body):
            guard !replacements.isEmpty else { return (HTTPResponse(status: status, headerFields: headers), .stream(body)) }
            if !rewrite, headers[.contentLength] != nil {
                return (HTTPResponse(status: status, headerFields: headers), .stream(redaction.keepingLength.replacing(body)))
            }
            headers[.contentLength] = nil
            return (HTTPResponse(status: status, headerFields: headers), .stream(replacements.replacing(body)))
        }
    }

    /// No `Content-Encoding`, or `identity`: a body whose bytes are its text.
    static func isIdentity(_ encoding: String?) -> Bool {
        guard let encoding else { return true }
        return encoding.lowercased() == "identity"
    }

    /// The whole body, up to `limit` bytes (for `$metadata` patching).
    package func collect(upTo limit: Int) async throws -> [UInt8] {
        switch body {
        case .whole(let buffer):
            guard buffer.readableBytes <= limit else { throw BodyTooLarge() }
            return Array(buffer.readableBytesView)
        case .stream(let body):
            var collected = ByteBuffer()
            for try await var chunk in body {
                guard collected.readableBytes + chunk.readableBytes <= limit else { throw BodyTooLarge() }
                collected.writeBuffer(&chunk)
            }
            return Array(collected.readableBytesView)
        }
    }
}

/// Thrown into the upload when a streamed body passes the limit.
struct BodyTooLarge: Error {}

/// Thrown into the upload when the device's body cannot be read (bad chunked framing, a
/// connection cut mid-body): the device's fault, answered 400, not the back end's.
struct RequestBodyBroken: Error {}

/// A request body that fails once more than `limit` bytes have passed.
struct LimitedBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let limit: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let limit: Int
        var seen = 0

        mutating func next() async throws -> ByteBuffer? {
            let next: ByteBuffer?
            do {
                next = try await base.next()
            } catch {
                throw RequestBodyBroken()
            }
            guard let buffer = next else { return nil }
            seen += buffer.readableBytes
            if seen > limit { throw BodyTooLarge() }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), limit: limit) }
}
