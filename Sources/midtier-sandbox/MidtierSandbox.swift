import ArgumentParser
import Foundation
import Hummingbird
import Logging
import SAMLSigning
import ServiceLifecycle
import SuccessFactorsSandbox
import UnixSignals

/// `midtier-sandbox`: the SuccessFactors stand-in for `make run` and the tests
/// (docs/sandbox.md). Its own program, so that the server binary does not carry it.
@main
struct MidtierSandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "midtier-sandbox", abstract: "Run the SuccessFactors sandbox (token service and payroll OData).")

    @Option(help: "The port to listen on.")
    var port = 8081

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The registered certificate (PEM) that assertions must be signed for.")
    var certificate = "certs/demo-signing.crt"

    @Option(name: .customLong("client-id"), help: "The registered OAuth client id (API key).")
    var clientID = "midtier-demo-api-key"

    @Option(name: .customLong("company-id"), help: "The company id.")
    var companyID = "DEMOCOMPANY"

    @Option(help: "The audience assertions must name.")
    var audience = "www.successfactors.com"

    @Option(name: .customLong("token-url"), help: "The Recipient assertions must name (default: http://<Host>/oauth/token).")
    var tokenURL: String?

    @Option(name: .customLong("token-lifetime"), help: "Seconds an access token lives.")
    var tokenLifetime = 3600

    @Option(name: .customLong("page-size"), help: "OData server page size (__next paging beyond it).")
    var pageSize = 20

    @Option(
        name: .customLong("extra-employees"),
        help: "Generated employees 200001, 200002, … with payroll data, besides the three demo ones (for load tests).")
    var extraEmployees = 0

    func validate() throws {
        guard (1...65535).contains(port) else { throw ValidationError("--port must be between 1 and 65535") }
        guard tokenLifetime > 0 else { throw ValidationError("--token-lifetime must be positive") }
        guard pageSize > 0 else { throw ValidationError("--page-size must be positive") }
        guard (0...100_000).contains(extraEmployees) else { throw ValidationError("--extra-employees must be between 0 and 100000") }
    }

    func run() async throws {
        guard let pem = FileManager.default.contents(atPath: certificate) else {
            printError("midtier-sandbox: cannot read the certificate \(certificate) (run 'make certs' first)")
            throw ExitCode.failure
        }
        let tokens: SandboxTokenService
        do {
            tokens = try SandboxTokenService(
                settings: .init(
                    certificatePEM: Array(pem), clientID: clientID, companyID: companyID,
                    audience: audience, tokenURL: tokenURL, tokenLifetimeSeconds: tokenLifetime))
        } catch {
            printError("midtier-sandbox: \(certificate): \(error.message)")
            throw ExitCode.failure
        }
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        let logger = Logger(label: "sandbox")
        let application = SandboxServer(
            tokens: tokens, odata: PayrollODataService(data: extraEmployees == 0 ? .demo : .demo(extraEmployees: extraEmployees), pageSize: pageSize)
        )
        .makeApplication(address: .hostname(host, port: port), logger: logger)
        let services = ServiceGroup(
            configuration: .init(
                services: [.init(service: application)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        logger.info("SuccessFactors sandbox on http://\(host):\(port) (client id \(clientID), company \(companyID))")
        try await services.run()
    }
}

/// Writes to standard error.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
