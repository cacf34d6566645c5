import AdminAPI
package import Administration
package import AsyncHTTPClient
package import BackendSessions
import Callers
import ConfigurationFiles
import DeviceAPI
import DeviceAuthentication
package import DeviceProxy
package import Forwarding
import Foundation
package import Hummingbird
package import Logging
package import MidtierCore
import MidtierHTTP
package import MidtierMetrics
package import MidtierStore
import NIOCore
package import NIOSSL
package import PrincipalPropagation
import PushAPI
package import PushNotifications
package import Registrations
package import RequestTracing
import SAMLSigning
package import ServiceLifecycle
package import TokenExchange
import UnixSignals
import WebPages

/// Why the server cannot start; printed as is.
package struct StartupError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// One Midtier instance: its configuration runtime, state, token cache and HTTP client, and the
/// two applications built from them (devices on `listen`, admins on `adminListen`).
package final class MidtierServer: Sendable {
    package let runtime: RuntimeHolder
    package let tokens: TokenCache
    /// Users' certificates for `PrincipalPropagation` destinations; dropped with the user's
    /// tokens (a companion of `tokens`).
    package let userCertificates: UserCertificateCache<NIOSSLContext?>
    package let registrations: RegistrationService
    /// The store behind its memory cache (``openStore(_:memory:logger:clock:)``); the registrations'
    /// store. What else it offers (push, a change feed) it declares.
    let memory: CachedStateStore
    /// The keep-alive connections that proxied calls go over.
    package let upstreams: UpstreamConnectionPool
    /// Push notifications (docs/push.md): the apps' APNs and FCM clients, and the signal that
    /// wakes the delivery worker when a notification is accepted here.
    package let pushClients: PushClients
    package let pushWakeUp = PushWakeUp()
    /// This instance in the push deliveries' leases: the host and the device port, the same
    /// after a restart, and held by one live process at a time (it owns the port).
    package let pushInstance: String
    /// This run's lease owner: the instance and a new id (docs/push.md, "Delivery").
    package let pushLeaseOwner: String
    /// The HTTP client of the cold calls: token exchanges and JWKS fetches.
    package let httpClient: HTTPClient
    package let metrics = MidtierMetrics()
    /// The back ends' session cookies, per registration and destination.
    package let sessions: BackendSessions
    /// Failed device sign-ins, and admin tokens, per address and user name; and the queue in
    /// front of bcrypt. They outlive reloads (docs/identity.md).
    let deviceSignIns: SignInThrottle
    let adminSignIns = SignInThrottle()
    let verifications: VerificationLimiter
    /// Where `reload` reads from; nil when the configuration was built in memory (tests).
    let configurationDirectory: String?
    /// Traces of device requests (docs/operations.md, "Traces"); off unless `tracing` is configured.
    let tracer: RequestTracer
    let logger: Logger

    package init(
        configuration: MidtierConfiguration, configurationDirectory: String? = nil, store: CachedStateStore, logger: Logger,
        tokenCache: TokenCache? = nil, tracer: RequestTracer = .off,
        clock: WallClock = .system
    ) throws(StartupError) {
        let httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.httpClientConfiguration)
        let deviceSignIns = SignInThrottle()
        let verifications = VerificationLimiter()
        self.tracer = tracer
        self.deviceSignIns = deviceSignIns
        self.verifications = verifications
        let upstreams = UpstreamConnectionPool()
        self.upstreams = upstreams
        do {
            runtime = RuntimeHolder(
                try Self.makeRuntime(
                    configuration, httpClient: httpClient, upstreams: upstreams, throttle: deviceSignIns,
                    limiter: verifications, logger: logger))
        } catch {
            // Not `syncShutdown`: this may run on an event loop, where blocking is not allowed.
            Task { try? await httpClient.shutdown() }
            throw error
        }
        self.httpClient = httpClient
        let userCertificates = UserCertificateCache<NIOSSLContext?>()
        self.userCertificates = userCertificates
        self.tokens = tokenCache ?? TokenCache(companions: [userCertificates])
        self.memory = store
        let sessions = BackendSessions(store: store, keys: configuration.server.backendSessionKeys, logger: logger, wallClock: clock)
        self.sessions = sessions
        let runtime = self.runtime
        self.registrations = RegistrationService(
            store: store, clock: clock,
            maximumPerUser: { runtime.current.configuration.server.maxRegistrationsPerUser },
            sessionsEnded: { sessions.ended(registration: $0) })
        self.configurationDirectory = configurationDirectory
        self.logger = logger
        self.pushInstance = "\(Self.hostName()):\(configuration.server.listen.port)"
        self.pushLeaseOwner = "\(pushInstance)/\(UUID().uuidString.lowercased())"
        self.pushClients = PushClients(logger: logger)
    }

    /// The realms other than `users.json`'s that the apps in force sign users into: identity
    /// providers' issuers and `backend:<destination>` (docs/identity.md).
    static func signInRealms(_ configuration: MidtierConfiguration) -> [String] {
        var realms: [String] = []
        for app in configuration.apps.values
        where !app.authentication.realm.isEmpty
            && !realms.contains(where: { UserIdentity.sameBytes($0, app.authentication.realm) })
        {
            realms.append(app.authentication.realm)
        }
        return realms
    }

    /// The store's push side; nil for a store that has none (some test stores).
    var pushStore: (any PushStore)? { memory.pushStore }

    static func makeRuntime(
        _ configuration: MidtierConfiguration, httpClient: HTTPClient, upstreams: UpstreamConnectionPool,
        throttle: SignInThrottle, limiter: VerificationLimiter, logger: Logger
    ) throws(StartupError) -> Runtime {
        do {
            return try Runtime(
                configuration: configuration, httpClient: httpClient, upstreams: upstreams, throttle: throttle, limiter: limiter,
                logger: logger)
        } catch {
            throw StartupError("signing material does not load: \(error.message)")
        }
    }

    /// Opens the store a configuration names, behind the memory cache the request path reads.
    package static func openStore(
        _ location: StoreLocation, memory: MemoryCacheSettings = MemoryCacheSettings(), logger: Logger, clock: WallClock = .system
    ) async throws(StartupError) -> CachedStateStore {
        switch location {
        case .sqlite(let path):
            // One instance owns an SQLite store: its own writes keep the memory cache exact.
            do { return CachedStateStore(base: try SQLiteStore(path: path, clock: clock), capacity: memory) } catch {
                throw StartupError(error.description)
            }
        case .postgres(let postgres):
            // Shared by several instances: another instance's changes reach memory through the
            // store's change feed (`storeChanges()`, docs/operations.md).
            do {
                return CachedStateStore(base: try await PostgresStore(postgres, logger: logger, clock: clock), capacity: memory)
            } catch {
                throw StartupError(error.description)
            }
        }
    }

    /// Loads the configuration directory again and swaps it in whole; on any problem the old
    /// configuration stays in force. Addresses and the store are read at startup only.
    /// Cached tokens are dropped, since destinations or user mappings may have changed.
    package func reload(by actor: AuditActor) async -> ReloadOutcome {
        let outcome: ReloadOutcome
        if let configurationDirectory {
            do {
                let configuration = try loadConfiguration(configurationDirectory)
                let runtime = try Self.makeRuntime(
                    configuration, httpClient: httpClient, upstreams: upstreams, throttle: deviceSignIns,
                    limiter: verifications, logger: logger)
                self.runtime.replace(with: runtime)
                tokens.removeAll()
                outcome = .reloaded(apps: configuration.apps.count, destinations: configuration.destinations.count, users: configuration.users.count)
            } catch let errors as ConfigurationErrors {
                outcome = .rejected(errors.problems.map(\.description))
            } catch {
                outcome = .rejected(["\(configurationDirectory): \(error)"])
            }
        } else {
            outcome = .rejected(["this server was not started from a configuration directory"])
        }
        let detail: String
        switch outcome {
        case .reloaded: detail = "reloaded"
        case .rejected(let problems): detail = "rejected: \(problems.count) problem(s); the old configuration stays"
        }
        logger.notice("configuration reload", metadata: ["by": "\(actor.name)", "outcome": "\(detail)"])
        try? await registrations.store.appendAudit(
            AuditEntry(
                at: registrations.clock.now(), actor: actor.name, action: "config.reload",
                target: configurationDirectory ?? "", detail: detail, source: actor.source))
        return outcome
    }

    /// The device-facing application on `listen` (or `address`, for tests).
    package func makeApplication(
        address: BindAddress? = nil,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let settings = runtime.current.configuration.server
        let router = Router(context: MidtierRequestContext.self)
        router.middlewares.add(ODataErrorMiddleware(logger: logger))
        HealthRoutes(store: registrations.store).add(to: router)
        let runtime = self.runtime
        let signIn = CurrentSignIn { runtime.current.signIn }
        let callers = Callers(registrations: registrations, logger: logger)
        DeviceAPIRoutes(signIn: signIn, callers: callers, logger: logger).add(to: router)
        if let pushStore {
            PushSenderRoutes(
                signIn: signIn, registrations: registrations, store: pushStore, wakeUp: pushWakeUp, logger: logger
            ).add(to: router)
        }
        SelfServicePageRoutes(
            registrations: registrations, signIn: PageSignIns(signIn: signIn),
            secure: { runtime.current.configuration.server.publicURL.hasPrefix("https:") },
            logger: logger
        ).add(to: router)
        let forwarder = Forwarder(upstreams: upstreams, maxRequestBodyBytes: settings.maxRequestBodyBytes)
        let proxy = ProxyHandler(
            runtime: runtime, callers: callers, tokens: tokens, certificates: userCertificates, forwarder: forwarder,
            sessions: sessions, metrics: metrics, logger: logger)
        let responder = MidtierResponder(ownRoutes: router.buildResponder(), proxy: proxy, tracer: tracer)
        return Application(
            responder: responder,
            // Slow and idle clients (docs/operations.md): behind trusted proxies every client
            // comes through them, so their connections are not counted per address.
            server: .device(
                settings: {
                    let server = runtime.current.configuration.server
                    return .init(limits: server.connectionLimits, uncounted: server.trustedProxies)
                }, edge: responder, logger: logger),
            configuration: .init(address: address ?? .hostname(settings.listen.host, port: settings.listen.port), serverName: nil),
            onServerRunning: onServerRunning,
            logger: logger
        )
    }

    /// The admin application on `adminListen` (or `address`, for tests).
    package func makeAdminApplication(
        address: BindAddress? = nil,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let settings = runtime.current.configuration.server
        let runtime = self.runtime
        let router = Router(context: MidtierRequestContext.self)
        router.middlewares.add(ODataErrorMiddleware(logger: logger))
        router.middlewares.add(
            AdminHostCheck(adminHost: {
                runtime.current.configuration.server.adminURL.flatMap { URL(string: $0)?.host }
            }))
        HealthRoutes(store: registrations.store).add(to: router)
        let metrics = self.metrics
        router.get("/metrics") { _, _ in
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        }
        let administration = Administration(
            registrations: registrations, tokens: tokens,
            destinations: { Array(runtime.current.configuration.destinations.values) },
            knownUser: { user in user.isLocal && runtime.current.signIn.basicAuthenticator.user(exactly: user.id) != nil },
            localUserIDs: { runtime.current.configuration.users.values.map(\.id) },
            realms: { Self.signInRealms(runtime.current.configuration) },
            reload: { actor in await self.reload(by: actor) },
            logger: logger, store: pushStore, wakeUp: pushWakeUp, apps: { runtime.current.configuration.apps })
        let authenticator = AdminAuthenticator(
            hashes: { runtime.current.configuration.server.adminTokenHashes },
            throttle: adminSignIns, limiter: verifications)
        AdminRoutes(administration: administration, authenticator: authenticator).add(to: router)
        let store = registrations.store
        let storeKind = if case .postgres = settings.store { "PostgreSQL" } else { "SQLite" }
        let facts = ConsoleFacts(
            realms: { Self.signInRealms(runtime.current.configuration) },
            apps: { Array(runtime.current.configuration.apps.keys) },
            localUserIDs: { runtime.current.configuration.users.values.map(\.id) },
            configuration: {
                let configuration = runtime.current.configuration
                return (configuration.apps.count, configuration.destinations.count, configuration.users.count)
            },
            storeKind: storeKind,
            storeReachable: { await store.ping() },
            exchanges: { metrics.exchangeTotals() },
            secure: { runtime.current.configuration.server.adminURL?.hasPrefix("https:") ?? false },
            onboarding: { id in
                let configuration = runtime.current.configuration
                return configuration.apps[id]?.discoveryDocument(publicURL: configuration.server.publicURL)
            })
        ConsoleRoutes(administration: administration, authenticator: authenticator, facts: facts, logger: logger).add(to: router)
        return Application(
            // No trustedProxies here: the admin listener is not behind the devices' load
            // balancer, and believing X-Forwarded-For from a local proxy would let any local
            // process pick its address for the admin-token throttle and the audit trail.
            responder: router.buildResponder(),
            server: .guardedHTTP1(settings: { .init(limits: runtime.current.configuration.server.connectionLimits) }, logger: logger),
            configuration: .init(address: address ?? .hostname(settings.adminListen.host, port: settings.adminListen.port), serverName: nil),
            onServerRunning: onServerRunning,
            logger: logger
        )
    }

    /// A service that applies the changes other instances make to a shared store until
    /// shutdown: memory forgets what changed, and a block or purge drops the user's tokens.
    /// Does nothing for a store no other instance shares.
    package func storeChanges() -> some Service { StoreChangeApplier(server: self) }

    /// Applies one event of the change feed to memory.
    func apply(_ event: PostgresChangeFeed.Event, to cache: CachedStateStore) {
        switch event {
        case .changes(let changes):
            for change in changes {
                switch change {
                case .registration(let id):
                    cache.forget(registration: id)
                    sessions.ended(registration: id)
                case .created(let id):
                    cache.forget(missOf: id)
                case .device(let id):
                    cache.forget(registration: id)
                case .block(let user):
                    cache.forget(blockOf: user)
                    tokens.remove(user: user)
                case .tokens(let user):
                    tokens.remove(user: user)
                case .session(let registration, let destination):
                    sessions.changed(registration: registration, destination: destination)
                }
            }
        case .everything:
            cache.forgetAll()
            tokens.removeAll()
            sessions.forgetAll()
        }
    }

    /// A service that writes the registrations' last contacts to the store every `interval`,
    /// and once more at shutdown. A service group stops its services in reverse order: list
    /// this one before the applications.
    package func contactWriter(every interval: Duration = .seconds(2)) -> some Service {
        ContactWriter(contacts: registrations.contacts, interval: interval, logger: logger)
    }

    /// A service that deletes client log and usage uploads older than `clientUploads.retentionDays`
    /// (docs/device-api.md, "Client logs and usage"): at start, then every `interval`.
    package func clientUploadSweeper(every interval: Duration = .seconds(300)) -> some Service {
        ClientUploadSweeper(server: self, interval: interval)
    }

    /// Deletes the client uploads received more than `clientUploads.retentionDays` ago (by the
    /// server's clock); how many, or nil when the store failed (logged; tried again later).
    @discardableResult
    package func purgeExpiredClientUploads() async -> Int? {
        let days = Int64(runtime.current.configuration.server.clientUploads.retentionDays)
        let cutoff = registrations.clock.now() - days * 86_400_000
        do {
            let purged = try await registrations.store.purgeClientUploads(receivedBefore: cutoff)
            if purged > 0 { logger.info("client uploads past their retention deleted", metadata: ["uploads": "\(purged)"]) }
            return purged
        } catch {
            logger.warning("client uploads past their retention not deleted; tried again later", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// A service that sends accepted push notifications (docs/push.md, "Delivery") until
    /// shutdown, and deletes those older than `retentionDays` every hour.
    package func pushDeliverer(retentionDays: Int = 30) -> some Service {
        PushDeliveryService(
            worker: pushStore.map { store in
                let runtime = self.runtime
                return PushDeliveryWorker(
                    store: store, apps: { runtime.current.configuration.apps },
                    clients: pushClients, wakeUp: pushWakeUp, metrics: metrics, logger: logger, owner: pushLeaseOwner,
                    clock: registrations.clock)
            }, retentionDays: retentionDays, logger: logger)
    }

    /// Once this instance holds its listening port (so no other live process has its name):
    /// the deliveries its earlier run was sending when it stopped without a drain (a crash, a
    /// kill) are due again at once, not when their leases run out (docs/push.md, "Delivery").
    package func releaseEarlierPushLeases() async {
        guard let pushStore else { return }
        do {
            let released = try await pushStore.releasePushLeases(ofInstance: pushInstance, keeping: pushLeaseOwner)
            guard released > 0 else { return }
            logger.notice(
                "push deliveries an earlier run of this instance left unfinished are due again", metadata: ["deliveries": "\(released)"])
            pushWakeUp.nudge()
        } catch {
            logger.warning("push deliveries of an earlier run wait out their leases", metadata: ["error": "\(error)"])
        }
    }

    /// The host's name (`gethostname`; a container's or pod's own), without a DNS lookup.
    static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name.replacingOccurrences(of: "/", with: "_")
    }

    /// A service that reloads the configuration on `SIGHUP` until shutdown.
    package func reloadOnHangup() -> some Service { HangupReloader(server: self) }

    /// Closes the connections to back ends; call once the applications have stopped.
    package func shutdown() async {
        await upstreams.shutdown()
        try? await httpClient.shutdown()
    }

    /// The cold calls' client: pooled, no redirects followed, no decompression, no tracing spans
    /// (Midtier bootstraps no tracer).
    static var httpClientConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.tracing.tracer = nil
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        configuration.timeout = .init(connect: .seconds(10))
        return configuration
    }
}

/// Runs the shared store's change feed (`MidtierServer.storeChanges()`).
struct StoreChangeApplier: Service {
    let server: MidtierServer

    func run() async throws {
        let cache = server.memory
        guard let feed = cache.changeFeed() else {
            try? await gracefulShutdown()
            return
        }
        await cancelWhenGracefulShutdown {
            await feed.run { event in server.apply(event, to: cache) }
        }
    }
}

/// Flushes the last contacts (`MidtierServer.contactWriter()`).
package struct ContactWriter: Service {
    let contacts: ContactRecorder
    let interval: Duration
    let logger: Logger

    package init(contacts: ContactRecorder, interval: Duration, logger: Logger) {
        (self.contacts, self.interval, self.logger) = (contacts, interval, logger)
    }

    package func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                try await Task.sleep(for: interval)
                // A shutdown cancels the wait, never a write under way: that write ends, and
                // the last flush below writes the rest before the store closes.
                await Task { await flush() }.value
            }
        }
        // What the last calls noted (list this service before the applications, so that it
        // stops after them); in a task of its own, so that a cancelled group still writes it.
        await Task { await flush() }.value
    }

    private func flush() async {
        do {
            try await contacts.flush()
        } catch {
            logger.warning(
                "last contacts not written; they wait for the next try",
                metadata: ["registrations": "\(contacts.waiting)", "error": "\(error)"])
        }
    }
}

/// Deletes uploads past their retention (`MidtierServer.clientUploadSweeper()`).
struct ClientUploadSweeper: Service {
    let server: MidtierServer
    let interval: Duration

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                await server.purgeExpiredClientUploads()
                try await Task.sleep(for: interval)
            }
        }
    }
}

/// Runs the push delivery worker (`MidtierServer.pushDeliverer()`), and the hourly purge.
struct PushDeliveryService: Service {
    let worker: PushDeliveryWorker?
    let retentionDays: Int
    let logger: Logger

    func run() async throws {
        guard let worker else { return }
        await withTaskGroup(of: Void.self) { group in
            // At shutdown the worker takes no more deliveries, and those being sent finish and
            // have their outcomes written before it returns (docs/operations.md, "Running"):
            // cancelling them would lose outcomes, and send them again after a restart.
            group.addTask {
                await withGracefulShutdownHandler {
                    await worker.run()
                } onGracefulShutdown: {
                    worker.stop()
                }
            }
            group.addTask {
                try? await cancelWhenGracefulShutdown {
                    while !Task.isCancelled {
                        let cutoff = worker.clock.now() - Int64(retentionDays) * 86_400_000
                        do {
                            let purged = try await worker.store.purgePushNotifications(before: cutoff)
                            if purged > 0 { logger.info("push notifications past their retention deleted", metadata: ["notifications": "\(purged)"]) }
                        } catch {
                            logger.warning("push notifications past their retention not deleted; tried again later", metadata: ["error": "\(error)"])
                        }
                        try await Task.sleep(for: .seconds(3600))
                    }
                }
            }
            await group.waitForAll()
        }
        await worker.clients.shutdown()
    }
}

/// Reloads on every `SIGHUP`.
struct HangupReloader: Service {
    let server: MidtierServer

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            _ = await server.reload(by: AuditActor(name: "system", source: "SIGHUP"))
        }
    }
}

/// `GET /healthz` (the process answers) and `GET /readyz` (configuration loaded and store
/// reachable: ready for traffic).
struct HealthRoutes: Sendable {
    let store: any StateStore

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
