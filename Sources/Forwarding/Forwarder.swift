import AsyncHTTPClient
import HTTPTypes
import Hummingbird
import Logging
import MidtierConfiguration
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// Why a call was not forwarded, or how the back end failed. Each maps to one status (SPEC §4, §6).
public enum ForwardingError: Error, Sendable, Equatable {
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
public struct ForwardingContext: Sendable {
    /// The device's address, for `X-Forwarded-For`.
    public var clientAddress: String?
    /// `publicURL`'s scheme and authority, for `X-Forwarded-Proto`/`-Host`.
    public var publicScheme: String
    public var publicHost: String
    /// The `Authorization` value Midtier sends (Bearer or Basic), or nil for none.
    public var authorization: String?
    /// The back end's own cookies for this registration (from `BackendSessions`).
    public var backendCookies: String?

    public init(clientAddress: String?, publicScheme: String, publicHost: String, authorization: String?, backendCookies: String? = nil) {
        self.clientAddress = clientAddress
        self.publicScheme = publicScheme
        self.publicHost = publicHost
        self.authorization = authorization
        self.backendCookies = backendCookies
    }
}

/// Sends a device's call on to a destination and streams the answer back (SPEC §6).
///
/// Headers are rebuilt by `HeaderPolicy`: hop-by-hop, identity and Midtier's own headers and
/// cookies never reach the back end; `Set-Cookie` never reaches the device. Bodies stream both
/// ways without being collected. Redirects are passed to the device, never followed here.
public struct Forwarder: Sendable {
    public let clients: LoopLocalHTTPClients
    public let maxRequestBodyBytes: Int
    /// Cookie names Midtier itself sets on devices (removed from forwarded `Cookie` headers).
    public static let ownCookies: Set<String> = ["x-smp-appcid"]

    public init(clients: LoopLocalHTTPClients, maxRequestBodyBytes: Int) {
        self.clients = clients
        self.maxRequestBodyBytes = maxRequestBodyBytes
    }

    /// How Midtier's HTTP clients are configured: pooled (up to 64 connections per back end and
    /// event loop), no redirects followed, no decompression (bodies pass as they are), no
    /// tracing spans (Midtier bootstraps no tracer; building a span's attributes cost about 3 %
    /// of a proxied call's CPU, docs/benchmarks.md).
    public static func clientConfiguration() -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.tracing.tracer = nil
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        configuration.timeout = .init(connect: .seconds(10))
        return configuration
    }

    /// The back-end URL for `remainder` (already checked by `ProxyPath.problem(in:)`) and the
    /// device's raw query, plus the destination's `URL.queries.*`.
    public static func upstreamURL(destination: DestinationConfiguration, remainder: Substring, query: String?) -> String {
        var url = destination.url + remainder
        var queryParts: [String] = []
        if let query, !query.isEmpty { queryParts.append(query) }
        for (name, value) in destination.extraQueries {
            queryParts.append(QueryEncoding.escape(name) + "=" + QueryEncoding.escape(value))
        }
        if !queryParts.isEmpty { url += "?" + queryParts.joined(separator: "&") }
        return url
    }

    public func forward(
        _ request: Request,
        to destination: DestinationConfiguration,
        url: String,
        context: ForwardingContext,
        logger: Logger
    ) async throws(ForwardingError) -> UpstreamResponse {
        var outbound = HTTPClientRequest(url: url)
        outbound.method = HTTPMethod(rawValue: request.method.rawValue)
        outbound.headers = requestHeaders(of: request, destination: destination, context: context)

        let contentLengths = request.headers[values: .contentLength]
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
        let chunked = request.headers[.transferEncoding] != nil
        if let declaredLength, declaredLength > 0 {
            outbound.body = .stream(LimitedBody(base: request.body, limit: maxRequestBodyBytes), length: .known(Int64(declaredLength)))
        } else if chunked {
            outbound.body = .stream(LimitedBody(base: request.body, limit: maxRequestBodyBytes), length: .unknown)
        }

        let response: HTTPClientResponse
        let deadline = ContinuousClock.now + .milliseconds(destination.timeoutMilliseconds)
        do {
            response = try await clients.current.execute(outbound, timeout: .milliseconds(Int64(destination.timeoutMilliseconds)))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            throw .timedOut(milliseconds: destination.timeoutMilliseconds)
        } catch is BodyTooLarge {
            throw .bodyTooLarge(limit: maxRequestBodyBytes)
        } catch is RequestBodyBroken {
            throw .badRequest("the request body is malformed or was cut off")
        } catch {
            logger.warning("back end unreachable", metadata: ["destination": "\(destination.name)", "error": "\(String(describing: error))"])
            throw .unreachable("the back end of destination \(destination.name) is unreachable")
        }
        let redaction = CredentialRedaction(authorization: context.authorization)
        return UpstreamResponse(response: response, headers: responseHeaders(response.headers, redacting: redaction), deadline: deadline,
                                redaction: redaction)
    }

    /// Whether `request` has no body, so it can be sent twice (after a token renewal).
    public static func isReplayable(_ request: Request) -> Bool {
        request.headers[.transferEncoding] == nil && request.headers[values: .contentLength].allSatisfy { $0 == "0" }
    }

    func requestHeaders(of request: Request, destination: DestinationConfiguration, context: ForwardingContext) -> HTTPHeaders {
        let connectionTokens = HeaderPolicy.connectionTokens(request.headers[values: .connection])
        var headers = HTTPHeaders()
        for field in request.headers {
            let name = field.name.rawName
            if HeaderPolicy.forwardsRequestHeader(name, connectionTokens: connectionTokens) {
                headers.add(name: name, value: field.value)
            }
        }
        // HTTP/1.1 allows one Cookie header: the back end's session cookies that Midtier keeps,
        // then the device's own cookies less Midtier's and less any of the same name.
        var cookies: [String] = []
        var jarNames: Set<String> = []
        if let kept = context.backendCookies {
            cookies.append(kept)
            jarNames = Set(kept.split(separator: ";").map { $0.prefix { $0 != "=" }.trimmingCharacters(in: " ").lowercased() })
        }
        cookies += request.headers[values: .cookie].compactMap { HeaderPolicy.cookieHeader($0, removing: Self.ownCookies.union(jarNames)) }
        if !cookies.isEmpty { headers.add(name: "Cookie", value: cookies.joined(separator: "; ")) }
        // Bodies come back uncompressed so that their URLs can be rewritten.
        headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
        for (name, value) in destination.extraHeaders {
            headers.replaceOrAdd(name: name, value: value)
        }
        if let authorization = context.authorization {
            headers.replaceOrAdd(name: "Authorization", value: authorization)
        }
        if let address = context.clientAddress { headers.add(name: "X-Forwarded-For", value: address) }
        headers.add(name: "X-Forwarded-Host", value: context.publicHost)
        headers.add(name: "X-Forwarded-Proto", value: context.publicScheme)
        return headers
    }

    func responseHeaders(_ upstream: HTTPHeaders, redacting redaction: CredentialRedaction) -> HTTPFields {
        let connectionTokens = HeaderPolicy.connectionTokens(upstream[canonicalForm: "connection"].map(String.init))
        var fields = HTTPFields()
        for (name, value) in upstream where HeaderPolicy.forwardsResponseHeader(name, connectionTokens: connectionTokens) {
            if let fieldName = HTTPField.Name(name) { fields.append(HTTPField(name: fieldName, value: redaction.redact(value) ?? value)) }
        }
        return fields
    }
}

/// A back end's answer whose body has not been read yet.
public struct UpstreamResponse: Sendable {
    let response: HTTPClientResponse
    /// The headers that may reach the device.
    public let headers: HTTPFields
    /// The destination's `timeout` from the start of the call: the whole answer must have
    /// arrived by then (a body read whole gives 504; a streamed one is cut off).
    let deadline: ContinuousClock.Instant
    /// The credential Midtier sent, kept out of what the device sees.
    public let redaction: CredentialRedaction

    public var status: Int { Int(response.status.code) }

    /// The back end's `Set-Cookie` values (kept by Midtier, never sent to the device).
    public var setCookies: [String] { response.headers["Set-Cookie"] }

    public var contentType: String? { response.headers.first(name: "Content-Type") }

    /// Bodies up to this size, announced by `Content-Length`, are read whole and sent in one
    /// write: cheaper than streaming them chunk by chunk, and no memory concern.
    public static let wholeBodyLimit = 64 * 1024

    /// The answer for the device, its body streamed from the back end (small ones read whole);
    /// with a `rewriter`, `Location`/`Content-Location` and textual bodies have the back end's
    /// URLs rewritten.
    public func deviceResponse(rewriter: URLRewriter? = nil) async throws -> Response {
        let status = HTTPResponse.Status(code: Int(response.status.code), reasonPhrase: response.status.reasonPhrase)
        var headers = headers
        let encoding = response.headers.first(name: "Content-Encoding")?.lowercased() ?? "identity"
        let rewrite = rewriter.flatMap { URLRewriter.isRewritable(contentType: contentType) && encoding == "identity" ? $0 : nil }
        if let rewriter {
            for name in [HTTPField.Name.location, HTTPField.Name.contentLocation] {
                if let value = headers[name] { headers[name] = rewriter.rewrite(value) }
            }
        }
        if let length = response.headers.first(name: "Content-Length").flatMap(Int.init), length <= Self.wholeBodyLimit {
            var buffer = try await collect(before: deadline)
            if let redacted = redaction.redact(buffer.readableBytesView) {
                buffer = ByteBuffer(bytes: redacted)
                headers[.contentLength] = String(redacted.count)
            }
            if let rewrite {
                var input = buffer.readBytes(length: buffer.readableBytes) ?? []
                var output: [UInt8] = []
                if rewrite.rewrite(&input, into: &output, final: true) {
                    buffer = ByteBuffer(bytes: output)
                    headers[.contentLength] = String(output.count)
                } else {
                    buffer = ByteBuffer(bytes: output)
                }
            }
            return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: buffer))
        }
        // Streamed: the answer has begun, so a back end still sending when its time is up can only
        // be cut off (the device sees the connection close before the end of the body).
        let body = DeadlineBody(base: response.body, deadline: deadline)
        guard let rewrite else { return Response(status: status, headers: headers, body: ResponseBody(asyncSequence: body)) }
        // The length changes with the rewriting: the body goes out chunked.
        headers[.contentLength] = nil
        return Response(status: status, headers: headers, body: ResponseBody(asyncSequence: rewrite.rewriting(body)))
    }

    /// The whole (small) body, or `UpstreamTimedOut` when it has not arrived by `deadline`.
    func collect(before deadline: ContinuousClock.Instant) async throws -> ByteBuffer {
        let body = response.body
        return try await withDeadline(deadline) { try await body.collect(upTo: Self.wholeBodyLimit) }
    }

    /// The whole body, up to `limit` bytes (for `$metadata` patching).
    public func collect(upTo limit: Int) async throws -> [UInt8] {
        var buffer = try await response.body.collect(upTo: limit)
        return buffer.readBytes(length: buffer.readableBytes) ?? []
    }

    /// Reads and drops the body (so the connection can be reused), e.g. before a retry.
    public func discard() async {
        _ = try? await response.body.collect(upTo: 1 << 20)
    }
}

/// The back end's answer did not arrive within the destination's `timeout`.
public struct UpstreamTimedOut: Error {}

/// `operation`'s result, or `UpstreamTimedOut` once `deadline` has passed.
///
/// The operation runs in a child task that a timer on the current event loop cancels at the
/// deadline (a `Task.sleep` race would cost a second task and a wake-up of a Dispatch thread on
/// every call). Cancelling the caller cancels the operation too.
func withDeadline<T: Sendable>(_ deadline: ContinuousClock.Instant, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    let worker = Task { try await operation() }
    let loop = MultiThreadedEventLoopGroup.currentEventLoop ?? MultiThreadedEventLoopGroup.singleton.any()
    let timedOut = Atomic(false)
    let remaining = (deadline - .now).components
    let nanoseconds = max(0, remaining.seconds * 1_000_000_000 + remaining.attoseconds / 1_000_000_000)
    let timer = loop.scheduleTask(in: .nanoseconds(nanoseconds)) {
        timedOut.store(true, ordering: .relaxed)
        worker.cancel()
    }
    defer { timer.cancel() }
    do {
        return try await withTaskCancellationHandler { try await worker.value } onCancel: { worker.cancel() }
    } catch {
        if timedOut.load(ordering: .relaxed) { throw UpstreamTimedOut() }
        throw error
    }
}

/// A streamed answer that ends with `UpstreamTimedOut` once the back end has used up the call's
/// time: only the time spent waiting for the back end's next chunk counts, from the head's
/// arrival on, so a device that reads slowly (and holds the stream back) is never cut off,
/// while a back end that trickles its answer is, at `deadline` in back-end time.
struct DeadlineBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let deadline: ContinuousClock.Instant

    /// The base iterator, handed to one reading task at a time: `next()` waits for that task
    /// (or, past the budget, ends the sequence and never touches the iterator again).
    final class Box: @unchecked Sendable {
        var iterator: Base.AsyncIterator
        init(_ iterator: Base.AsyncIterator) { self.iterator = iterator }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let box: Box
        /// The back-end time left.
        var budget: Duration
        var finished = false

        mutating func next() async throws -> ByteBuffer? {
            guard !finished else { return nil }
            let box = self.box
            let start = ContinuousClock.now
            do {
                let chunk = try await withDeadline(start + budget) { try await box.iterator.next() }
                budget -= ContinuousClock.now - start
                if chunk == nil { finished = true }
                return chunk
            } catch {
                finished = true
                throw error
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(box: Box(base.makeAsyncIterator()), budget: Swift.max(.zero, deadline - .now))
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

/// Query-component encoding for `URL.queries.*`.
enum QueryEncoding {
    static func escape(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "$"), UInt8(ascii: "'"),
                 UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: "@"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                result.unicodeScalars.append("%")
                result.unicodeScalars.append(hex[Int(byte >> 4)])
                result.unicodeScalars.append(hex[Int(byte & 0xF)])
            }
        }
        return result
    }
}
