import ArgumentParser
import ConfigurationFiles
import DeviceAuthentication
import Foundation
import Hummingbird
import Logging
import MetadataPatching
import MidtierCore
import MidtierServer
import RequestTracing
import ServiceLifecycle
import UnixSignals

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the server.")

    @Option(help: "The configuration directory.")
    var config = "config"

    func run() async throws {
        let configuration = try configurationOrExit(config, last: { "midtier: not starting: \($0) configuration problem(s)" })
        let level = Logger.Level(rawValue: configuration.server.logLevel) ?? .info
        // A request's log lines carry its trace id (docs/operations.md, "Traces").
        LoggingSystem.bootstrap(
            { label, provider in
                var handler = JSONLogHandler(label: label, level: level)
                handler.metadataProvider = provider
                return handler
            }, metadataProvider: RequestTrace.loggingMetadata)
        let logger = Logger(label: "midtier")
        for warning in ConfigurationLoader(directory: config).warnings(for: configuration) { logger.warning("\(warning)") }

        let server: MidtierServer
        // The exporter stops after the listeners (a service group stops its services in
        // reverse order), so the last requests' spans go out.
        var tracing: [ServiceGroupConfiguration.ServiceConfiguration] = []
        do {
            var tracer = RequestTracer.off
            if let settings = configuration.server.tracing {
                let exporter = try RequestTracer.otlp(settings, logger: Logger(label: "midtier.tracing"))
                tracer = exporter.tracer
                tracing.append(.init(service: exporter.service))
                logger.info("exporting traces", metadata: ["endpoint": "\(settings.endpoint)", "samplingRatio": "\(settings.samplingRatio)"])
            }
            // One clock for the store and the server (tests give both their own).
            let clock = WallClock.system
            let store = try await MidtierServer.openStore(
                configuration.server.store, memory: configuration.server.memoryCache, logger: logger, clock: clock)
            server = try MidtierServer(
                configuration: configuration, configurationDirectory: config, store: store, logger: logger, tracer: tracer, clock: clock)
        } catch {
            printError("midtier: not starting: \(error)")
            throw ExitCode.failure
        }
        // systemd's Type=notify (docs/operations.md, "Under systemd"): ready once both
        // listeners are bound; last, so that it hears of a shutdown first.
        // Then the push deliveries an earlier run left unfinished are due again at once.
        let readiness = ReadinessAnnouncer(listeners: 2, logger: logger, onReady: { await server.releaseEarlierPushLeases() })
        let services = ServiceGroup(
            configuration: .init(
                services: tracing + [
                    .init(service: server.contactWriter()),
                    .init(service: server.clientUploadSweeper()),
                    .init(service: server.pushDeliverer()),
                    .init(service: server.makeApplication(onServerRunning: { _ in readiness.listenerRunning() })),
                    .init(service: server.makeAdminApplication(onServerRunning: { _ in readiness.listenerRunning() })),
                    .init(service: server.reloadOnHangup()),
                    .init(service: server.storeChanges()),
                    .init(service: readiness),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            ))
        logger.info(
            "midtier starting",
            metadata: [
                "listen": "\(configuration.server.listen)", "adminListen": "\(configuration.server.adminListen)",
                "publicURL": "\(configuration.server.publicURL)",
                "apps": "\(configuration.apps.count)", "destinations": "\(configuration.destinations.count)",
            ])
        do {
            try await services.run()
        } catch {
            logger.error("midtier stopped with an error", metadata: ["error": "\(error)"])
            await server.shutdown()
            throw ExitCode.failure
        }
        await server.shutdown()
        logger.info("midtier stopped")
    }
}

struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate every configuration file; print each problem as 'file: key: what is wrong'."
    )

    @Option(help: "The configuration directory.")
    var config = "config"

    @Option(
        name: .customLong("metadata"), parsing: .singleValue,
        help: "DESTINATION=FILE: check the destination's metadataPatches against a saved $metadata document (repeatable).")
    var metadata: [String] = []

    func run() async throws {
        let configuration = try configurationOrExit(config, printing: { print($0) })
        var problems: [String] = []
        for pair in metadata {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { problems.append("--metadata \(pair): expected DESTINATION=FILE"); continue }
            let file = "\(config)/destinations/\(parts[0]).json"
            guard let destination = configuration.destinations[parts[0]] else {
                problems.append("--metadata \(pair): no destination named \(parts[0])"); continue
            }
            guard let document = FileManager.default.contents(atPath: parts[1]) else {
                problems.append("--metadata \(pair): cannot read \(parts[1])"); continue
            }
            let patches = destination.metadataPatches
            do {
                let result = try MetadataPatcher.apply(patches, to: Array(document))
                for patch in result.unmatched {
                    let index = patches.firstIndex(of: patch) ?? 0
                    problems.append(
                        "\(file): metadataPatches[\(index)]: matches no property \(patch.property) of an entity type \(patch.entityType) in \(parts[1])"
                    )
                }
                for unfitting in result.unfittingScales {
                    problems.append(
                        "\(file): metadataPatches: after patching \(parts[1]), \(unfitting) (clients refuse it; set a Precision that fits)")
                }
            } catch {
                problems.append("--metadata \(pair): \(error.description)")
            }
        }
        problems += Self.unusableKeySets(configuration, in: config)
        for problem in problems { print(problem) }
        guard problems.isEmpty else { throw ExitCode.failure }
        for warning in ConfigurationLoader(directory: config).warnings(for: configuration) { print(warning) }
        print(
            "\(config): OK (\(configuration.apps.count) apps, \(configuration.destinations.count) destinations, \(configuration.users.count) users)")
    }
}

extension CheckConfig {
    /// A JWKS file (an app's or a push sender's) that holds no key a token can be checked with:
    /// the server starts with it, and refuses every token it should check.
    static func unusableKeySets(_ configuration: MidtierConfiguration, in config: String) -> [String] {
        var files: [(file: String, key: String, path: String)] = []
        for (id, app) in configuration.apps {
            if case .jwt(let jwt) = app.authentication, case .file(let path) = jwt.jwks {
                files.append(("\(config)/apps/\(id).json", "authentication.jwks.file", path))
            }
        }
        for (index, sender) in configuration.pushSenders.enumerated() {
            if let oauth = sender.oauth, case .file(let path) = oauth.token.jwks {
                files.append(("\(config)/push-senders.json", "senders[\(index)].oauth.jwks.file", path))
            }
        }
        return files.compactMap { file in
            // Unreadable files are the loader's problem, already reported.
            guard let bytes = FileManager.default.contents(atPath: file.path),
                let problem = JWKSFileCheck.problem(in: Array(bytes))
            else { return nil }
            return "\(file.file): \(file.key): \(file.path): \(problem); every token it should check is refused"
        }.sorted()
    }
}

/// The configuration in `directory`; when it has problems, each is printed (`file: key: what`,
/// to standard error unless `printing` says otherwise), then `last` with their number, and the
/// command ends with failure.
func configurationOrExit(
    _ directory: String, printing: (String) -> Void = printError,
    last: ((Int) -> String)? = nil
) throws -> MidtierConfiguration {
    do {
        return try loadConfiguration(directory)
    } catch {
        for problem in error.problems { printing(problem.description) }
        if let last { printing(last(error.problems.count)) }
        throw ExitCode.failure
    }
}
