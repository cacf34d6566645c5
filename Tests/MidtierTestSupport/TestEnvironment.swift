package import AsyncHTTPClient
import DeviceAuthentication
import Foundation
import HTTPTypes
package import Hummingbird
import Logging
package import MidtierCore
package import MidtierServer
import MidtierStore
package import NIOCore
package import NIOHTTP1
import ServiceLifecycle
package import SuccessFactorsSandbox
import Synchronization

/// A back end that records every request that reaches it and answers with what it saw.
package final class EchoBackend: Sendable {
    package init() {}
    package struct Seen: Sendable {
        package var method: String
        package var path: String
        package var query: String?
        package var headers: [(String, String)]
        package func header(_ name: String) -> [String] { headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1) }
    }
    private let seen = Mutex<[Seen]>([])
    package var requests: [Seen] { seen.withLock { $0 } }
    package func reset() { seen.withLock { $0.removeAll() } }

    package func makeApplication(onServerRunning: @escaping @Sendable (any Channel) async -> Void) -> some ApplicationProtocol {
        let router = Router()
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete] {
            router.on("**", method: method) { request, _ -> Response in
                var request = request
                let body = try await request.collectBody(upTo: 1 << 20)
                let entry = Seen(
                    method: request.method.rawValue, path: request.uri.path, query: request.uri.query,
                    headers: request.headers.map { ($0.name.rawName, $0.value) })
                self.seen.withLock { $0.append(entry) }
                if request.uri.path.hasPrefix("/base/sap/") { return GatewayStandIn.respond(request) }
                if request.uri.path.hasPrefix("/base/atom") { return GatewayStandIn.atomFeed(request) }
                let object: [String: Any] = [
                    "path": entry.path, "query": entry.query ?? "", "bodyBytes": body.readableBytes,
                    "authorization": request.headers[.authorization] ?? "",
                ]
                let data = try JSONSerialization.data(withJSONObject: object)
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
            }
        }
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: onServerRunning, logger: Logger(label: "echo"))
    }
}

/// What a SAP Gateway service does with CSRF tokens and sessions, and an Atom feed with
/// absolute links — both answering with URLs built from the Host they were called with, as
/// real back ends do.
package enum GatewayStandIn {
    package static func respond(_ request: Request) -> Response {
        let base = "http://\(request.head.authority ?? "?")/base/sap/opu/odata/SRV"
        let session = request.headers[values: .cookie].joined(separator: "; ").split(separator: ";")
            .map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("SAP_SESSIONID=") }.map {
                String($0.dropFirst("SAP_SESSIONID=".count))
            }
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if request.method == .get {
            if request.headers[HTTPField.Name("X-CSRF-Token")!]?.lowercased() == "fetch" {
                let newSession = session ?? UUID().uuidString
                headers[HTTPField.Name("X-CSRF-Token")!] = "csrf-\(newSession)"
                if session == nil { headers[.setCookie] = "SAP_SESSIONID=\(newSession); path=/; HttpOnly" }
            }
            return Response(
                status: .ok, headers: headers,
                body: .init(
                    byteBuffer: ByteBuffer(
                        string:
                            #"{"d":{"results":[{"__metadata":{"uri":"\#(base)/Items('1')"},"Id":"1"}],"__next":"\#(base)/Items?$skiptoken=1"}}"#)))
        }
        guard let session, request.headers[HTTPField.Name("X-CSRF-Token")!] == "csrf-\(session)" else {
            headers[HTTPField.Name("X-CSRF-Token")!] = "Required"
            return Response(
                status: .forbidden, headers: headers, body: .init(byteBuffer: ByteBuffer(string: #"{"error":"CSRF token validation failed"}"#)))
        }
        headers[.location] = "\(base)/Items('7')"
        return Response(
            status: .created, headers: headers,
            body: .init(
                byteBuffer: ByteBuffer(
                    string:
                        #"{"d":{"__metadata":{"uri":"\#(base)/Items('7')","type":"SRV.Item"},"Id":"7","session":"\#(session)"}}"#)))
    }

    package static func atomFeed(_ request: Request) -> Response {
        let base = "http://\(request.head.authority ?? "?")/base/atom"
        let feed = """
            <?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom" xml:base="\(base)/">\
            <id>\(base)/Documents</id><link rel="self" href="\(base)/Documents"/>\
            <entry><id>\(base)/Documents('a')</id><link rel="edit" href="\(base)/Documents('a')"/>\
            <content type="application/pdf" src="\(base)/Documents('a')/$value"/></entry>\
            <link rel="next" href="\(base)/Documents?$skiptoken=2"/></feed>
            """
        return Response(status: .ok, headers: [.contentType: "application/atom+xml;type=feed"], body: .init(byteBuffer: ByteBuffer(string: feed)))
    }
}

/// Collects the port each application ends up on.
package final class PortBox: Sendable {
    package init() {}
    private let state = Mutex<(port: Int?, waiters: [CheckedContinuation<Int, Never>])>((nil, []))
    package func set(_ channel: any Channel) {
        let port = channel.localAddress?.port ?? 0
        let waiters = state.withLock { state in
            state.port = port
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: port) }
    }
    package var port: Int {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Int? = state.withLock { state in
                    if let port = state.port { return port }
                    state.waiters.append(continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}

/// Wall-clock milliseconds for Midtier, moved forward by tests (days offline, …).
package final class TestClock: Sendable {
    package init() {}
    private let offset = Mutex<Int64>(0)
    package var now: Int64 { Int64(Date().timeIntervalSince1970 * 1000) + offset.withLock { $0 } }
    package func advance(days: Int) { offset.withLock { $0 += Int64(days) * 86_400_000 } }
    /// This clock as Midtier's ``WallClock``.
    package var wallClock: WallClock { WallClock { self.now } }
}

/// The demo users of the tests: Midtier user id, password, SuccessFactors user id.
package struct TestUser: Sendable {
    package let id: String
    package let password: String
    package let sfUserId: String
    package init(id: String, password: String, sfUserId: String) {
        self.id = id
        self.password = password
        self.sfUserId = sfUserId
    }
    package static let alice = TestUser(id: "alice", password: "alice-pw", sfUserId: "100001")
    package static let bob = TestUser(id: "bob", password: "bob-pw", sfUserId: "100002")
    package var basic: String { "Basic " + Data("\(id):\(password)".utf8).base64EncodedString() }
}

/// A running sandbox, echo back end and Midtier, on loopback ports chosen by the OS.
package struct TestEnvironment: Sendable {
    package let directory: String
    package let midtierPort: Int
    package let adminPort: Int
    package let sandboxPort: Int
    package let echoPort: Int
    package let server: MidtierServer
    package let sandbox: SandboxServer
    package let echo: EchoBackend
    package let client: HTTPClient
    package let clock: TestClock

    package static let adminToken = "test-admin-token-0123456789"
    package var midtierURL: String { "http://127.0.0.1:\(midtierPort)" }
    package var sandboxURL: String { "http://127.0.0.1:\(sandboxPort)" }

    package static let clientKey = "test-api-key"
    package static let companyID = "TESTCO"

    /// Starts everything, runs `body`, stops everything. `adjust` may change the configuration
    /// before Midtier starts (ports of the sandbox and echo back end are known by then).
    package static func with(
        adjust: @Sendable (inout MidtierConfiguration, _ sandboxPort: Int, _ echoPort: Int) -> Void = { _, _, _ in },
        _ body: (TestEnvironment) async throws -> Void
    ) async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let keys = try TestKeyPair.make(in: directory)
        let logger = Logger(label: "test")

        let sandbox = SandboxServer(
            tokens: try SandboxTokenService(
                settings: .init(
                    certificatePEM: keys.certificatePEM, clientID: clientKey, companyID: companyID)))
        let echo = EchoBackend()
        let sandboxPort = PortBox(), echoPort = PortBox(), midtierPort = PortBox(), adminPort = PortBox()
        let backEnds = ServiceGroup(
            configuration: .init(
                services: [
                    .init(
                        service: sandbox.makeApplication(address: .hostname("127.0.0.1", port: 0), logger: logger, onServerRunning: sandboxPort.set)),
                    .init(service: echo.makeApplication(onServerRunning: echoPort.set)),
                ], logger: logger))
        let backEndTask = Task { try await backEnds.run() }
        let sfPort = await sandboxPort.port, ePort = await echoPort.port

        var configuration = MidtierConfiguration(
            server: ServerSettings(
                listen: ListenAddress(host: "127.0.0.1", port: 0), publicURL: "http://midtier.test:8080",
                store: .sqlite(path: "\(directory)/midtier.sqlite"),
                adminTokenHashes: [SecretHashing.hash("another-admin-token", cost: 4), SecretHashing.hash(adminToken, cost: 4)]),
            apps: ["demo": AppConfiguration(id: "demo", destinations: ["sf", "echo"])],
            destinations: [
                "sf": DestinationConfiguration(
                    name: "sf", url: "http://127.0.0.1:\(sfPort)",
                    authentication: .samlBearer(
                        SAMLBearerSettings(
                            tokenServiceURL: "http://127.0.0.1:\(sfPort)/oauth/token", clientKey: clientKey, companyId: companyID,
                            signingKeyPEM: keys.keyPEM, signingCertificatePEM: keys.certificatePEM)),
                    userIdSource: "sfUserId", timeoutMilliseconds: 5000),
                "echo": DestinationConfiguration(
                    name: "echo", url: "http://127.0.0.1:\(ePort)/base",
                    authentication: .samlBearer(
                        SAMLBearerSettings(
                            tokenServiceURL: "http://127.0.0.1:\(sfPort)/oauth/token", clientKey: clientKey, companyId: companyID,
                            signingKeyPEM: keys.keyPEM, signingCertificatePEM: keys.certificatePEM)),
                    userIdSource: "sfUserId", timeoutMilliseconds: 5000),
            ],
            users: Dictionary(
                uniqueKeysWithValues: [TestUser.alice, TestUser.bob].map {
                    ($0.id, LocalUser(id: $0.id, passwordHash: SecretHashing.hash($0.password, cost: 4), attributes: ["sfUserId": $0.sfUserId]))
                })
        )
        adjust(&configuration, sfPort, ePort)
        let clock = TestClock()
        let store = try await MidtierServer.openStore(
            configuration.server.store, memory: configuration.server.memoryCache, logger: logger, clock: clock.wallClock)
        let server = try MidtierServer(configuration: configuration, store: store, logger: logger, clock: clock.wallClock)
        let midtier = ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: server.contactWriter(every: .milliseconds(50))),
                    .init(service: server.makeApplication(address: .hostname("127.0.0.1", port: 0), onServerRunning: midtierPort.set)),
                    .init(service: server.makeAdminApplication(address: .hostname("127.0.0.1", port: 0), onServerRunning: adminPort.set)),
                ], logger: logger))
        let midtierTask = Task { try await midtier.run() }
        // Generous waits: on a loaded 2-core machine, 200 calls queued for the client's few
        // connections can wait longer than AsyncHTTPClient's default 10 s for one (no test
        // measures time).
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.timeout = HTTPClient.Configuration.Timeout(connect: .seconds(120), read: .seconds(120))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        let environment = TestEnvironment(
            directory: directory, midtierPort: await midtierPort.port, adminPort: await adminPort.port,
            sandboxPort: sfPort, echoPort: ePort, server: server, sandbox: sandbox, echo: echo,
            client: client, clock: clock)
        do {
            try await body(environment)
        } catch {
            await environment.stop(midtier: midtier, midtierTask: midtierTask, backEnds: backEnds, backEndTask: backEndTask)
            throw error
        }
        await environment.stop(midtier: midtier, midtierTask: midtierTask, backEnds: backEnds, backEndTask: backEndTask)
    }

    private func stop(midtier: ServiceGroup, midtierTask: Task<Void, any Error>, backEnds: ServiceGroup, backEndTask: Task<Void, any Error>) async {
        try? await client.shutdown()
        await midtier.triggerGracefulShutdown()
        _ = await midtierTask.result
        await server.shutdown()
        await backEnds.triggerGracefulShutdown()
        _ = await backEndTask.result
    }

    // MARK: Calls

    package struct Reply: Sendable {
        package let status: Int
        package let headers: [(String, String)]
        package let body: [UInt8]
        package init(status: Int, headers: [(String, String)], body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }
        package func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
        package var text: String { String(decoding: body, as: UTF8.self) }
        package var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]) ?? [:] }
        /// The OData error's message value.
        package var errorMessage: String? { ((json["error"] as? [String: Any])?["message"] as? [String: Any])?["value"] as? String }
    }

    /// A call to the admin listener with the admin token (or `token`, or none).
    package func admin(
        _ method: HTTPMethod = .GET, _ path: String, body: String? = nil, token: String? = TestEnvironment.adminToken
    ) async throws -> Reply {
        var headers: [(String, String)] = []
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        if body != nil { headers.append(("Content-Type", "application/json")) }
        return try await call(method, path, headers: headers, body: body, base: "http://127.0.0.1:\(adminPort)")
    }

    package func call(
        _ method: HTTPMethod = .GET, _ path: String, headers: [(String, String)] = [], body: String? = nil, base: String? = nil
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: (base ?? midtierURL) + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        // A guard against a hang, not a timing target: 200 calls at once on a loaded 2-core
        // machine took longer than 30 s (RegisterAndReadTests, 2026-11-29).
        let response = try await client.execute(request, timeout: .seconds(120))
        var buffer = try await response.body.collect(upTo: 16 << 20)
        return Reply(
            status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
            body: buffer.readBytes(length: buffer.readableBytes) ?? [])
    }

    /// Registers a device for `user`; returns the registration id.
    package func register(_ user: TestUser, requestedID: String? = nil) async throws -> String {
        var headers = [("Authorization", user.basic), ("Content-Type", "application/json")]
        if let requestedID { headers.append(("X-SMP-APPCID", requestedID)) }
        let reply = try await call(
            .POST, "/odata/applications/v1/demo/Connections", headers: headers,
            body: #"{"DeviceType":"iOS","DeviceModel":"iPhone15,2"}"#)
        guard reply.status == 201, let id = reply.header("X-SMP-APPCID") else {
            throw TestFailure("registration failed: \(reply.status) \(reply.text)")
        }
        return id
    }

    package func sandboxStats() async throws -> [String: Any] {
        let response = try await client.execute(HTTPClientRequest(url: sandboxURL + "/sandbox/stats"), timeout: .seconds(10))
        let buffer = try await response.body.collect(upTo: 1 << 20)
        return (try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView))) as? [String: Any] ?? [:]
    }

    /// curl with `--path-as-is`, so dot segments reach Midtier exactly as typed.
    /// Waits for curl on a thread of its own: curl calls the in-process server, whose tasks
    /// need the concurrency pool's threads (two on a 2-core machine), so a pool thread blocked
    /// on curl can deadlock the test run.
    /// (Also for requests AsyncHTTPClient cannot send: a head of tens of kilobytes that
    /// Midtier answers before the client has marked it sent stops the test process in its
    /// state machine.)
    package func curl(
        _ path: String, method: String = "GET", headers: [(String, String)], body: String? = nil
    ) async throws -> (status: Int, body: String) {
        var arguments = ["-s", "--path-as-is", "-o", "-", "-w", "\n%{http_code}", "-X", method]
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        if let body { arguments += ["--data-binary", body] }
        arguments.append(midtierURL + path)
        let result = try await runOffThePool("/usr/bin/curl", arguments)
        let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? -1, lines.dropLast().joined(separator: "\n"))
    }
}
