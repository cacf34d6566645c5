import ArgumentParser
import Testing

@testable import midtier

/// The command line as docs/operations.md and docs/configuration.md give it: every subcommand
/// and option parses, and a wrong one is refused with what is wrong (the commands' effects run
/// against the real binary in `Tests/e2e`).
@Suite struct CommandLineTests {
    @Test func serveAndCheckConfigTakeTheConfigurationDirectory() throws {
        let serve = try #require(try Midtier.parseAsRoot(["serve", "--config", "/etc/midtier"]) as? Serve)
        #expect(serve.config == "/etc/midtier")
        #expect((try Midtier.parseAsRoot(["serve"]) as? Serve)?.config == "config", "config/ by default")
        let check = try #require(
            try Midtier.parseAsRoot(["check-config", "--config", "c", "--metadata", "sf=meta.xml", "--metadata", "gw=g.xml"]) as? CheckConfig)
        #expect(check.config == "c")
        #expect(check.metadata == ["sf=meta.xml", "gw=g.xml"])
    }

    @Test func theToolsNameTheirDestinationAndUser() throws {
        let assertion = try #require(try Midtier.parseAsRoot(["assertion", "--destination", "sf", "--user", "alice"]) as? Assertion)
        #expect(assertion.destination == "sf" && assertion.user == "alice" && assertion.verify == nil)
        let certificate = try #require(
            try Midtier.parseAsRoot(["user-certificate", "--destination", "gw", "--user", "alice", "--header"]) as? UserCertificate)
        #expect(certificate.destination == "gw" && certificate.user == "alice" && certificate.header)
        let token = try #require(try Midtier.parseAsRoot(["token-request", "--destination", "btp"]) as? TokenRequest)
        #expect(token.destination == "btp")
        let hash = try #require(try Midtier.parseAsRoot(["hash-secret", "--cost", "11"]) as? HashSecret)
        #expect(hash.cost == 11)
    }

    @Test(arguments: [
        ["assertion", "--user", "alice"], ["user-certificate", "--destination", "gw"], ["token-request"],
        ["hash-secret", "--cost", "9"], ["hash-secret", "--cost", "16"], ["no-such-command"], ["serve", "--no-such-option"],
    ])
    func aWrongCommandLineIsRefused(arguments: [String]) {
        do {
            _ = try Midtier.parseAsRoot(arguments)
            Issue.record("\(arguments) was taken")
        } catch {
            #expect(!Midtier.message(for: error).isEmpty, "the refusal says what is wrong")
        }
    }

    @Test func theCostMustBeBcryptsUsefulRange() {
        do {
            _ = try Midtier.parseAsRoot(["hash-secret", "--cost", "9"])
            Issue.record("cost 9 was taken")
        } catch {
            #expect(Midtier.message(for: error).contains("--cost must be between 10 and 15"))
        }
    }
}
