import ArgumentParser

@main
struct Midtier: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "midtier",
        abstract: "A self-hosted mobile-services middle tier in front of SAP SuccessFactors.",
        subcommands: [Serve.self, CheckConfig.self, Sandbox.self, Assertion.self, HashSecret.self, BenchInternal.self]
    )
}
