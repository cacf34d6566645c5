import Testing
@testable import AdminAPI
import Hummingbird

/// Which `Host` names the admin listener answers to for the admin API and the console
/// (docs/operations.md): IP addresses, localhost and adminURL's host; never another name, which
/// is what a DNS-rebinding page sends.
@Suite struct AdminHostCheckTests {
    typealias Check = AdminHostCheck<BasicRequestContext>

    @Test(arguments: ["127.0.0.1", "10.0.0.7", "[::1]", "[2001:db8::1]", "localhost", "LOCALHOST", "localhost."])
    func addressesAndLocalhostAreTaken(_ host: String) {
        #expect(Check.isAllowed(host, adminHost: nil))
    }

    @Test(arguments: ["rebind.attacker.example", "127.0.0.1.attacker.example", "localhost.attacker.example", "1.2.3", "1.2.3.4.5",
                      "１２７.0.0.1", "midtier-admin.internal", ""])
    func otherNamesAreRefused(_ host: String) {
        #expect(!Check.isAllowed(host, adminHost: nil))
    }

    @Test func adminURLsHostIsTaken() {
        #expect(Check.isAllowed("midtier-admin.internal", adminHost: "midtier-admin.internal"))
        #expect(Check.isAllowed("Midtier-Admin.Internal", adminHost: "midtier-admin.internal"), "host names are case-insensitive")
        #expect(!Check.isAllowed("other.internal", adminHost: "midtier-admin.internal"))
    }

    @Test func theHostOfAHostHeader() {
        #expect(Check.host(of: "a.example:9090") == "a.example")
        #expect(Check.host(of: "a.example") == "a.example")
        #expect(Check.host(of: "[::1]:9090") == "[::1]")
        #expect(Check.host(of: "[::1") == nil)
    }
}
