import DeviceAuthentication
import MidtierCore
import Testing

/// Push senders' API keys (`X-API-Key`; docs/push.md, "Sending"): found by their SHA-256, each
/// only as itself.
@Suite struct APIKeysTests {
    static let first = "k1-" + String(repeating: "a", count: 40)
    static let second = "k2-" + String(repeating: "b", count: 40)

    static func sender(_ name: String, key: String?) -> PushSender {
        PushSender(name: name, passwordHash: nil, apiKeyDigest: key.map(APIKeys.digest), apps: ["demo"])
    }

    @Test func aKeyFindsItsSenderAndNoOther() {
        let keys = APIKeys(senders: [Self.sender("basic-only", key: nil), Self.sender("one", key: Self.first), Self.sender("two", key: Self.second)])
        #expect(keys.sender(withKey: Self.first) == 1)
        #expect(keys.sender(withKey: Self.second) == 2)
        #expect(keys.sender(withKey: String(Self.first.dropLast())) == nil)
        #expect(keys.sender(withKey: Self.first + "a") == nil)
        #expect(keys.sender(withKey: "") == nil)
        #expect(keys.sender(withKey: String(repeating: "x", count: 10_000)) == nil)
    }

    @Test func theConfigurationTextIsTheKeysSHA256() {
        // SHA-256("abc"), FIPS 180-2's first example.
        #expect(APIKeys.hashText("abc") == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func onlyLongPrintableKeysAreTaken() throws {
        try APIKeys.check(Self.first)
        #expect(throws: APIKeys.Problem.self) { try APIKeys.check("short-but-random") }
        #expect(throws: APIKeys.Problem.self) { try APIKeys.check(Self.first + " with a space") }
        #expect(throws: APIKeys.Problem.self) { try APIKeys.check(Self.first + "\u{7}") }
        #expect(throws: APIKeys.Problem.self) { try APIKeys.check(String(repeating: "z", count: 513)) }
    }
}
