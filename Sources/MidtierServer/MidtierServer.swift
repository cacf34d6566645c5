import AsyncHTTPClient
import Forwarding
import Foundation
import Hummingbird
import Logging
import MidtierConfiguration
import NIOCore
import Registrations
import SAMLSigning
import TokenExchange

/// Why the server cannot start; printed as is.
public struct StartupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One Midtier instance: its configuration runtime, state, token cache and HTTP client, and the
/// device-facing application built from them.
public final class MidtierServer: Sendable {
    public let runtime: RuntimeHolder
    public let tokens: TokenCache
    public let registrations: RegistrationService
    public let httpClient: HTTPClient
    let logger: Logger

    public init(configuration: MidtierConfiguration, store: any RegistrationStore, logger: Logger,
                tokenCache: TokenCache = TokenCache()) throws(StartupError) {
        for (id, app) in configuration.apps {
            if case .jwt = app.authentication {
                throw StartupError("app \(id): JWT authentication is not supported by this Midtier build yet; use basic")
            }
        }
        let httpClient = Forwarder.makeHTTPClient()
        do {
            runtime = RuntimeHolder(try Runtime(configuration: configuration, httpClient: httpClient))
        } catch {
            try? httpClient.syncShutdown()
            throw StartupError("signing material does not load: \(error.message)")
        }
        self.httpClient = httpClient
        self.tokens = tokenCache
        self.registrations = RegistrationService(store: store)
        self.logger = logger
    }

    /// Opens the store a configuration names.
    public static func openStore(_ location: StoreLocation) throws(StartupError) -> any RegistrationStore {
        switch location {
        case .sqlite(let path):
            do { return try SQLiteStore(path: path) } catch { throw StartupError(error.description) }
        case .postgres:
            throw StartupError("store: PostgreSQL is not supported by this Midtier build yet; use sqlite:PATH")
        }
    }

    /// The device-facing application on `listen` (or `address`, for tests).
    public func makeApplication(
        address: BindAddress? = nil,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let settings = runtime.current.configuration.server
        let router = Router(context: MidtierRequestContext.self)
        HealthRoutes(store: registrations.store).add(to: router)
        RegistrationRoutes(runtime: runtime, registrations: registrations, logger: logger).add(to: router)
        let forwarder = Forwarder(httpClient: httpClient, maxRequestBodyBytes: settings.maxRequestBodyBytes)
        let proxy = ProxyHandler(runtime: runtime, registrations: registrations, tokens: tokens, forwarder: forwarder, logger: logger)
        let responder = MidtierResponder(ownRoutes: router.buildResponder(), proxy: proxy, logger: logger)
        return Application(
            responder: responder,
            configuration: .init(address: address ?? .hostname(settings.listen.host, port: settings.listen.port), serverName: nil),
            onServerRunning: onServerRunning,
            logger: logger
        )
    }

    /// Closes the HTTP client's connections; call once the application has stopped.
    public func shutdown() async {
        try? await httpClient.shutdown()
    }
}

/// `GET /healthz` (the process answers) and `GET /readyz` (configuration loaded and store
/// reachable: ready for traffic).
struct HealthRoutes: Sendable {
    let store: any RegistrationStore

    func add(to router: Router<MidtierRequestContext>) {
        router.get("/healthz") { _, _ in Self.json(.ok, #"{"status":"ok"}"#) }
        router.get("/readyz") { _, _ in
            await store.ping()
                ? Self.json(.ok, #"{"status":"ready"}"#)
                : Self.json(.serviceUnavailable, #"{"status":"not ready","reason":"the store does not answer"}"#)
        }
    }

    static func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
