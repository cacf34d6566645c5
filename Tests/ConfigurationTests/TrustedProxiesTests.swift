import ConfigurationFiles
import MidtierCore
import Testing

/// `trustedProxies` and how the client's address is found behind them (docs/operations.md,
/// "Behind a load balancer").
@Suite struct TrustedProxiesTests {
    @Test func rangesParseAndMatch() throws {
        let block = try #require(AddressRange("10.0.1.0/24"))
        #expect(block.contains(AddressRange.bytes(of: "10.0.1.200")!))
        #expect(!block.contains(AddressRange.bytes(of: "10.0.2.1")!))
        #expect(block.contains(AddressRange.bytes(of: "::ffff:10.0.1.1")!), "an IPv4-mapped address is its IPv4 address")
        #expect(!block.contains(AddressRange.bytes(of: "2001:db8::a00:101")!), "IPv6 is another family")
        #expect(AddressRange("10.0.1.7/24")?.description == "10.0.1.0/24", "host bits are cleared")
        #expect(AddressRange("10.0.0.5")?.description == "10.0.0.5")
        #expect(AddressRange("fd00::/8")?.contains(AddressRange.bytes(of: "fd12::1")!) == true)
        #expect(AddressRange("0.0.0.0/0")?.contains(AddressRange.bytes(of: "203.0.113.9")!) == true)
        #expect(AddressRange("10.0.0.0/12")?.contains(AddressRange.bytes(of: "10.15.255.255")!) == true)
        #expect(AddressRange("10.0.0.0/12")?.contains(AddressRange.bytes(of: "10.16.0.0")!) == false)
        for bad in ["", "10.0.0", "10.0.0.1/33", "10.0.0.1/", "10.0.0.1/-1", "::1/129", "lb.example", "10.0.0.1/٢٤", " 10.0.0.1"] {
            #expect(AddressRange(bad) == nil, "\(bad)")
        }
    }

    @Test func theClientIsTheRightmostUntrustedForwardedAddress() {
        let proxies = [AddressRange("10.0.0.5")!, AddressRange("10.0.1.0/24")!]
        // No proxies configured, or a peer that is not one: the peer, whatever the header says.
        #expect([AddressRange]().client(peer: "10.0.0.5", forwardedFor: ["198.51.100.7"]) == "10.0.0.5")
        #expect(proxies.client(peer: "203.0.113.9", forwardedFor: ["198.51.100.7"]) == "203.0.113.9", "a device cannot claim an address")
        // Through the load balancer: the address it appended.
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["198.51.100.7"]) == "198.51.100.7")
        // A device that sends its own header: only what the proxy appended is believed.
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["1.2.3.4, 198.51.100.7"]) == "198.51.100.7")
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["1.2.3.4", "198.51.100.7"]) == "198.51.100.7", "several header lines")
        // Two proxies in a row, both trusted.
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["1.2.3.4, 198.51.100.7 , 10.0.1.20"]) == "198.51.100.7")
        // Nothing forwarded, or garbage: the last address believed.
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: []) == "10.0.0.5")
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["unknown"]) == "10.0.0.5")
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["198.51.100.7, garbage, 10.0.1.20"]) == "10.0.1.20")
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["2001:db8::7"]) == "2001:db8::7")
        // A dual-stack listener sees the IPv4 proxy as an IPv4-mapped IPv6 address.
        #expect(proxies.client(peer: "::ffff:10.0.0.5", forwardedFor: ["198.51.100.7"]) == "198.51.100.7")
        // Proxies that add the client's port.
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["198.51.100.7:41234"]) == "198.51.100.7")
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["[2001:db8::7]:41234"]) == "2001:db8::7")
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["[2001:db8::7]"]) == "2001:db8::7")
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["[2001:db8::7]x"]) == "10.0.0.5")
        #expect(proxies.client(peer: "10.0.0.5", forwardedFor: ["198.51.100.7:80:1"]) == "10.0.0.5")
    }

    @Test func configurationTakesAddressesAndBlocks() throws {
        let fixture = Fixture()
        #expect(try fixture.load().server.trustedProxies.isEmpty, "none by default")
        fixture.set("midtier.json", "trustedProxies", #"["10.0.0.5", "10.0.1.0/24", "fd00::/8"]"#)
        #expect(try fixture.load().server.trustedProxies.map(\.description) == ["10.0.0.5", "10.0.1.0/24", "fd00::/8"])
        fixture.set("midtier.json", "trustedProxies", #"["10.0.0.5", "lb.example", 7]"#)
        #expect(fixture.problems().map(\.key) == ["trustedProxies[1]", "trustedProxies[2]"])
        #expect(fixture.problems().first?.message.contains("CIDR") == true)
    }
}
