import ArgumentParser
import DeviceAuthentication
import Forwarding
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MidtierCore
import MidtierServer
import MidtierStore
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import SAMLSigning
import TokenExchange

/// `midtier-bench`: measurements for `Benchmarks/run.sh` that need the inside of Midtier's
/// modules (signing rate, token cache memory, the floors under the hot path) and the users
/// file of the load tests. A benchmark tool, not part of the product (docs/benchmarks.md).
@main
struct MidtierBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "midtier-bench",
        abstract: "Measurements used by Benchmarks/run.sh.",
        subcommands: [
            Assertions.self, TokenCacheMemory.self, TokenCacheRemoval.self, TokenCacheInsertion.self, MakeUsers.self, Floors.self, MakeStore.self,
            RegistrationCacheMemory.self,
        ]
    )

    /// As `midtier serve`: Swift concurrency on NIO's event loops (see `Midtier.main`).
    static func main() async {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        await Self.main(nil)
    }

    /// Assertions built and signed per second on one core (one task, sequentially).
    struct Assertions: AsyncParsableCommand {
        @Option var key: String
        @Option var certificate: String
        @Option var seconds: Double = 5

        func run() async throws {
            guard let keyPEM = FileManager.default.contents(atPath: key), let certificatePEM = FileManager.default.contents(atPath: certificate)
            else {
                throw ValidationError("cannot read \(key) or \(certificate)")
            }
            let signer = try AssertionSigner(keyPEM: Array(keyPEM), passphrase: nil, certificatePEM: Array(certificatePEM))
            let clock = ContinuousClock()
            let start = clock.now
            var count = 0
            while clock.now - start < .seconds(seconds) {
                let assertion = SAMLAssertion(
                    issueInstant: Date(), issuer: "bench-key", nameID: "user\(count)",
                    recipient: "https://api.example.com/oauth/token", apiKey: "bench-key")
                _ = try signer.sign(assertion)
                count += 1
            }
            let elapsed = clock.now - start
            let perSecond = Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            print(String(format: "%.1f", perSecond))
        }
    }

    /// The floors under the hot path: the same small answer from a bare Hummingbird
    /// application and from a bare SwiftNIO HTTP/1 server (no proxying, no checks), so that
    /// `make bench` can say how much of a proxied call's cost is the server framework's.
    struct Floors: AsyncParsableCommand {
        @Option(name: .customLong("hummingbird-port")) var hummingbirdPort: Int
        @Option(name: .customLong("nio-port")) var nioPort: Int
        /// With `--upstream`: a bare NIO server on this port that forwards every call to the
        /// upstream through Midtier's own connection pool, and nothing else (no checks, no
        /// rewriting): what a proxied call could cost with the device side in NIO handlers.
        @Option(name: .customLong("proxy-port")) var proxyPort: Int?
        /// With `--upstream`: the same bare proxy written as Midtier's request path is — each
        /// call in a Swift task started on the connection's event loop, with Hummingbird's
        /// `Request` and `Response` values on NIO's HTTP types codec — and still no checks:
        /// what the stack Midtier is written in costs per proxied call before any of its work.
        @Option(name: .customLong("task-proxy-port")) var taskProxyPort: Int?
        @Option var upstream: String?

        static let body = #"{"d":{"results":[{"externalCode":"PRR-100001","amount":"1"}]}}"#

        func run() async throws {
            let nio = try await MidtierBench.serve(on: nioPort) { try $0.addHandler(FixedAnswer()) }
            var proxy: (any Channel)?
            if let proxyPort, let upstream, let origin = UpstreamOrigin(url: upstream) {
                let pool = UpstreamConnectionPool()
                proxy = try await MidtierBench.serve(on: proxyPort) { try $0.addHandler(BareProxy(pool: pool, origin: origin)) }
            }
            var taskProxy: (any Channel)?
            if let taskProxyPort, let upstream, let origin = UpstreamOrigin(url: upstream) {
                let pool = UpstreamConnectionPool()
                taskProxy = try await MidtierBench.serve(on: taskProxyPort) { pipeline in
                    try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                    try pipeline.addHandler(TaskProxy(pool: pool, origin: origin))
                }
            }
            let router = Router()
            router.get("**") { _, _ in
                Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: Self.body)))
            }
            let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: hummingbirdPort)))
            try await app.runService()
            try await nio.close()
            try await proxy?.close()
            try await taskProxy?.close()
        }
    }

    /// A bare NIO HTTP/1 server on loopback `port`: NIO's server codec, then `handlers`.
    static func serve(
        on port: Int, _ handlers: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void
    ) async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try handlers(channel.pipeline.syncOperations)
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
    }

    /// ``BareProxy`` in the shape of Midtier's request path: the call runs in a task started on
    /// the event loop after its reads (as `ProxyChannelHandler` starts it), the request is a
    /// Hummingbird `Request` and the answer a `Response`, written back from the task.
    final class TaskProxy: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias OutboundOut = HTTPResponsePart
        let pool: UpstreamConnectionPool
        let origin: UpstreamOrigin
        var head: HTTPRequest?

        init(pool: UpstreamConnectionPool, origin: UpstreamOrigin) {
            self.pool = pool
            self.origin = origin
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let request): head = request
            case .body: break
            case .end:
                guard let head else { return }
                let request = Request(head: head, body: RequestBody(buffer: ByteBuffer()))
                let loop = context.eventLoop
                let bound = NIOLoopBound((self, context), eventLoop: loop)
                let pool = self.pool
                let origin = self.origin
                loop.execute {
                    Task.immediate {
                        var headers = HTTPHeaders()
                        headers.add(name: "Host", value: origin.authority)
                        let upstreamHead = HTTPRequestHead(
                            version: .http1_1, method: HTTPMethod(rawValue: request.method.rawValue),
                            uri: request.uri.description, headers: headers)
                        let response: Response
                        do {
                            let answer = try await pool.start(upstreamHead, to: origin, hasBody: false, deadline: .now() + .seconds(30)).answer.get()
                            guard case .whole(let body) = answer.body else { throw ChannelError.ioOnClosedChannel }
                            response = Response(
                                status: .init(code: Int(answer.head.status.code)),
                                headers: [
                                    .contentType: answer.head.headers.first(name: "Content-Type") ?? "application/octet-stream",
                                    .contentLength: String(body.readableBytes),
                                ],
                                body: .init(byteBuffer: body))
                        } catch {
                            response = Response(status: .badGateway, headers: [.contentLength: "0"])
                        }
                        let writer = Writer(bound: bound)
                        try? await writer.run { handler, context in context.write(handler.wrapOutboundOut(.head(response.head)), promise: nil) }
                        try? await response.body.write(writer)
                    }
                }
            }
        }
    }

    /// Forwards each request to one upstream over `UpstreamConnectionPool`, answers read whole.
    final class BareProxy: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let pool: UpstreamConnectionPool
        let origin: UpstreamOrigin
        var head: HTTPRequestHead?

        init(pool: UpstreamConnectionPool, origin: UpstreamOrigin) {
            self.pool = pool
            self.origin = origin
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let request): head = request
            case .body: break
            case .end:
                guard let request = head else { return }
                var headers = HTTPHeaders()
                headers.add(name: "Host", value: origin.authority)
                let upstreamHead = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.uri, headers: headers)
                let answer = pool.start(upstreamHead, to: origin, hasBody: false, deadline: .now() + .seconds(30)).answer
                answer.hop(to: context.eventLoop).assumeIsolated().whenComplete { result in
                    guard case .success(let answer) = result, case .whole(let body) = answer.body else {
                        context.close(promise: nil)
                        return
                    }
                    var headers = HTTPHeaders()
                    headers.add(name: "Content-Type", value: answer.head.headers.first(name: "Content-Type") ?? "application/octet-stream")
                    headers.add(name: "Content-Length", value: String(body.readableBytes))
                    context.write(
                        self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: answer.head.status, headers: headers))), promise: nil)
                    context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
                    context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
                }
            }
        }
    }

    /// Writes a `Response` body to the connection from the task, on the connection's loop.
    struct Writer: ResponseBodyWriter {
        let bound: NIOLoopBound<(TaskProxy, ChannelHandlerContext)>

        func run(_ work: @escaping @Sendable (TaskProxy, ChannelHandlerContext) -> Void) async throws {
            let bound = self.bound
            if bound.eventLoop.inEventLoop {
                work(bound.value.0, bound.value.1)
            } else {
                try await bound.eventLoop.submit { work(bound.value.0, bound.value.1) }.get()
            }
        }

        mutating func write(_ buffer: ByteBuffer) async throws {
            try await run { handler, context in context.write(handler.wrapOutboundOut(.body(buffer)), promise: nil) }
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
            try await run { handler, context in context.writeAndFlush(handler.wrapOutboundOut(.end(trailingHeaders)), promise: nil) }
        }
    }

    /// Answers every request with `Floors.body`.
    final class FixedAnswer: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let body = ByteBuffer(string: Floors.body)

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Content-Length", value: String(body.readableBytes))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    /// Resident memory (KiB) before and after caching `tokens` users' tokens.
    struct TokenCacheMemory: AsyncParsableCommand {
        @Option var tokens: Int = 100_000
        @Option(name: .customLong("token-length")) var tokenLength: Int = 256

        func run() async throws {
            let before = residentKiB()
            let cache = TokenCache(capacity: tokens + 1)
            let filler = String(repeating: "x", count: max(0, tokenLength - 12))
            for index in 0..<tokens {
                let value = String(format: "%012d", index) + filler
                _ = try await cache.token(for: TokenCacheKey(destination: "sf", user: .local("user-\(index)"), nameID: "user-\(index)")) { _, _ in
                    AccessToken(value: value, lifetimeSeconds: 3600)
                }
            }
            let after = residentKiB()
            print("\(before) \(after) \(cache.count)")
        }
    }

    /// What dropping one user's tokens costs (a block, made here or heard of through the change
    /// feed): fills a cache with `tokens` users' tokens (one destination each), then drops
    /// `removals` of those users one by one and prints the microseconds per drop, the median and
    /// the largest. The drop looks only at that user's keys (the cache's index of each user's
    /// keys; make bench-instances, block storm; docs/benchmarks.md).
    struct TokenCacheRemoval: AsyncParsableCommand {
        @Option var tokens: Int = 10_000
        @Option var removals: Int = 1_000

        func run() async throws {
            let cache = TokenCache(capacity: tokens + 1)
            for index in 0..<tokens {
                _ = try await cache.token(for: TokenCacheKey(destination: "sf", user: .local("user\(index)"), nameID: "user\(index)")) { _, _ in
                    AccessToken(value: "token-\(index)", lifetimeSeconds: 3600)
                }
            }
            let clock = ContinuousClock()
            var micros: [Double] = []
            for index in stride(from: 0, to: tokens, by: max(1, tokens / max(1, removals))).prefix(removals) {
                let started = clock.now
                let removed = cache.remove(user: .local("user\(index)"))
                let elapsed = clock.now - started
                guard removed == 1 else { throw ValidationError("user\(index) had \(removed) tokens") }
                micros.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
            }
            micros.sort()
            print(
                String(format: "%d tokens: %d drops, median %.1f us, max %.1f us", tokens, micros.count, micros[micros.count / 2], micros.last ?? 0))
        }
    }

    /// What a new key costs when the cache is full (a user not seen for a while calls): fills a
    /// cache of capacity `tokens` with as many users' tokens, then asks for `insertions` new
    /// users' tokens one by one — each an insertion into the full cache that makes room — and
    /// prints the microseconds per call: the mean (what making room costs over many
    /// insertions), the median, the 99th percentile and the largest.
    struct TokenCacheInsertion: AsyncParsableCommand {
        @Option var tokens: Int = 200_000
        @Option var insertions: Int = 50_000

        func run() async throws {
            let cache = TokenCache(capacity: tokens)
            for index in 0..<tokens {
                _ = try await cache.token(for: TokenCacheKey(destination: "sf", user: .local("user\(index)"), nameID: "user\(index)")) { _, _ in
                    AccessToken(value: "token-\(index)", lifetimeSeconds: 3600)
                }
            }
            let clock = ContinuousClock()
            var micros: [Double] = []
            micros.reserveCapacity(insertions)
            for index in tokens..<(tokens + insertions) {
                let key = TokenCacheKey(destination: "sf", user: .local("user\(index)"), nameID: "user\(index)")
                let started = clock.now
                _ = try await cache.token(for: key) { _, _ in AccessToken(value: "token-\(index)", lifetimeSeconds: 3600) }
                let elapsed = clock.now - started
                micros.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
            }
            micros.sort()
            let mean = micros.reduce(0, +) / Double(micros.count)
            print(
                String(
                    format: "%d tokens: %d insertions, %d kept, mean %.1f us, median %.1f us, p99 %.1f us, max %.1f us", tokens, micros.count,
                    cache.count, mean, micros[micros.count / 2], micros[micros.count * 99 / 100], micros.last ?? 0))
        }
    }

    /// A users.json with `count` users (bcrypt at `cost`, for load tests only).
    struct MakeUsers: AsyncParsableCommand {
        @Option var count: Int = 1000
        @Option var cost: UInt8 = 4
        @Option var password: String = "bench-password"

        func run() async throws {
            let hash = SecretHashing.hash(password, cost: cost)
            let users = (0..<count).map { index in
                ["id": "user\(index)", "passwordHash": hash, "attributes": ["sfUserId": "\(100001 + index % 3)"]] as [String: Any]
            }
            let data = try JSONSerialization.data(withJSONObject: ["users": users], options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        }
    }
}

/// VmRSS of this process in KiB.
func residentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}
