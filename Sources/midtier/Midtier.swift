import ArgumentParser
import Foundation
import NIOCore
import NIOPosix

@main
struct Midtier: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "midtier",
        abstract: "A self-hosted mobile-services middle tier in front of SAP SuccessFactors.",
        subcommands: [Serve.self, CheckConfig.self, Assertion.self, UserCertificate.self, TokenRequest.self, HashSecret.self]
    )

    /// Runs Swift concurrency's tasks on SwiftNIO's event loops rather than a second thread
    /// pool, so that a request's awaits (device socket, token cache, back-end socket) do not
    /// hop between threads. Must happen on the main thread before any task is enqueued.
    static func main() async {
        if ProcessInfo.processInfo.environment["MIDTIER_GLOBAL_EXECUTOR"] != "swift" {
            NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        }
        await Self.main(nil)
    }
}
