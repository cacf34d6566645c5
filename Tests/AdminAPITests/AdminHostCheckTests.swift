import Hummingbird
import MidtierTestSupport
import Testing

@testable import AdminAPI

/// Which `Host` names the admin listener answers to for the admin API and the console
/// (docs/operations.md): IP addresses, localhost and adminURL's host; never another name, which
/// is what a DNS-rebinding page sends.
@Suite(.timeLimit(.minutes(10))) struct AdminHostCheckTests {
    typealias Check = AdminHostCheck<BasicRequestContext>

    @Test(arguments: ["127.0.0.1", "10.0.0.7", "[::1]", "[2001:db8::1]", "localhost", "LOCALHOST", "localhost."])
    func addressesAndLocalhostAreTaken(_ host: String) {
        #expect(Check.isAllowed(host, adminHost: nil))
    }

    @Test(arguments: [
        "rebind.attacker.example", "127.0.0.1.attacker.example", "localhost.attacker.example", "1.2.3", "1.2.3.4.5",
        "１２７.0.0.1", "midtier-admin.internal", "",
    ])
    func otherNamesAreRefused(_ host: String) {
        #expect(!Check.isAllowed(host, adminHost: nil))
    }

    @Test func adminURLsHostIsTaken() {
        #expect(Check.isAllowed("midtier-admin.internal", adminHost: "midtier-admin.internal"))
        #expect(Check.isAllowed("Midtier-Admin.Internal", adminHost: "midtier-admin.internal"), "host names are case-insensitive")
        #expect(!Check.isAllowed("other.internal", adminHost: "midtier-admin.internal"))
    }

    /// Over a real socket, in the spellings the router reads as the same path: a foreign name
    /// is refused before anything else, for every path but health and metrics at their exact
    /// paths (curl `--path-as-is`, so `//admin/…` reaches the listener as typed).
    @Test func aForeignHostIsRefusedOnEveryPathTheRouterWouldServe() async throws {
        try await TestEnvironment.with { env in
            func status(_ path: String, host: String) async throws -> Int {
                let result = try await runOffThePool(
                    "/usr/bin/curl",
                    [
                        "-s", "--path-as-is", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: \(host)",
                        "-H", "Authorization: Bearer \(TestEnvironment.adminToken)", "http://127.0.0.1:\(env.adminPort)\(path)",
                    ])
                return Int(result.output) ?? -1
            }
            for path in [
                "/admin/v1/users/x", "//admin/v1/users/x", "///admin/v1/users/x", "/admin//v1/users/x", "//console/",
                "//console", "/console/", "//console/users?id=x", "//metrics", "/metrics/", "//healthz", "/nothing",
            ] {
                let got = try await status(path, host: "rebind.attacker.example:\(env.adminPort)")
                #expect(got == 421, "\(path)")
            }
            for path in ["/healthz", "/readyz", "/metrics"] {
                let got = try await status(path, host: "scraper.internal")
                #expect(got == 200, "\(path): probes and scrapers may use any name")
            }
            let byAddress = try await status("//admin/v1/users/x", host: "127.0.0.1:\(env.adminPort)")
            #expect(byAddress != 421, "an IP address is taken")
        }
    }

    @Test func theHostOfAHostHeader() {
        #expect(Check.host(of: "a.example:9090") == "a.example")
        #expect(Check.host(of: "a.example") == "a.example")
        #expect(Check.host(of: "[::1]:9090") == "[::1]")
        #expect(Check.host(of: "[::1") == nil)
    }
}
