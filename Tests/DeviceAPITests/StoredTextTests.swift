import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierTestSupport
import NIOHTTP1
import Testing

/// Text that Midtier stores has no control characters (docs/identity.md, "Stored text"): a
/// device field with one is a 400 naming the field, a JWT whose user claim has one is a 401
/// naming the claim — the same answer on SQLite and on PostgreSQL (which cannot store a NUL at
/// all, and answered 503 before).
@Suite(.timeLimit(.minutes(10))) struct StoredTextTests {
    static let connections = "/odata/applications/v1/demo/Connections"

    /// Every device-supplied text field of a Connection, with a value holding a control
    /// character (as a JSON escape: the JSON reader refuses raw ones already).
    static let pollutedFields: [(field: String, value: String)] = [
        ("DeviceModel", #"iPhone\u0000"#), ("DeviceType", #"i\u0001OS"#), ("DeviceId", #"\u001f"#), ("FormFactor", #"\n"#),
        ("ApnsDeviceToken", #"ab\u007f"#), ("AndroidGcmRegistrationId", #"\t"#), ("DeviceSubType", #"\r"#),
        ("WnsChannelURI", #"https://x\u0000"#), ("PushGroup", #"\u001b[31m"#), ("UserLocale", #"de\u0000"#), ("TimeZone", #"\u0008"#),
        ("Email", #"a@b\u0000"#), ("CustomCustom1", #"\u0000"#), ("CustomCustom2", #"\u000b"#), ("CustomCustom3", #"\u000c"#),
        ("CustomCustom4", #"\u0085"#), ("ApplicationVersion", #"1.0\u0000"#),
    ]

    @Test(arguments: StoreKind.allCases) func controlCharactersInDeviceFieldsAreRefusedNamingTheField(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let headers = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            for (field, value) in Self.pollutedFields {
                let other = field == "DeviceType" ? "DeviceModel" : "DeviceType"
                for body in ["{\"\(field)\":\"\(value)\"}", "{\"d\":{\"\(other)\":\"iOS\",\"\(field)\":\"\(value)\"}}"] {
                    let reply = try await env.call(.POST, Self.connections, headers: headers, body: body)
                    #expect(reply.status == 400, "\(body): \(reply.status) \(reply.text)")
                    #expect(reply.errorMessage == "\(field) contains control characters", "\(body): \(reply.text)")
                }
            }
            let listed = try await env.call(.GET, Self.connections, headers: headers)
            #expect(listed.status == 200 && DeviceCalls.results(listed).isEmpty, "nothing was stored: \(listed.text)")

            // An update is held to the same rule, and leaves the stored fields as they were.
            let id = try await env.register(.alice)
            for method in [HTTPMethod.PUT, .PATCH] {
                let reply = try await env.call(method, "\(Self.connections)('\(id)')", headers: headers, body: #"{"DeviceModel":"x\u0000y"}"#)
                #expect(
                    reply.status == 400 && reply.errorMessage == "DeviceModel contains control characters", "\(method): \(reply.status) \(reply.text)"
                )
            }
            let stored = try await env.call(.GET, "\(Self.connections)('\(id)')", headers: headers + [("Accept", "application/json")])
            #expect((stored.json["d"] as? [String: Any])?["DeviceModel"] as? String == "iPhone15,2", "\(stored.text)")

            // Printable text of any script is kept as sent.
            let model = "Pixel – Ü ☃ 😀 نص"
            let printable = try await env.call(
                .POST, Self.connections, headers: headers, body: "{\"DeviceModel\":\"\(model)\",\"CustomCustom1\":\"a b\"}")
            #expect(printable.status == 201, "\(printable.text)")
            #expect((printable.json["d"] as? [String: Any])?["DeviceModel"] as? String == model)
        }
    }

    /// A registration id with a control character (or any other character no id has) names
    /// no registration: 404, on PostgreSQL too, without asking the store.
    @Test(arguments: StoreKind.allCases) func anIdWithAControlCharacterIsUnknown(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            for method in [HTTPMethod.GET, .PUT, .PATCH, .DELETE] {
                let reply = try await env.call(
                    method, "\(Self.connections)('a%00b')", headers: alice, body: method == .GET || method == .DELETE ? nil : "{}")
                #expect(reply.status == 404, "\(method): \(reply.status) \(reply.text)")
            }
            for action in ["lock", "wipe"] {
                let reply = try await env.call(.POST, "/mobileservices/me/registrations/a%00b/\(action)", headers: alice)
                #expect(reply.status == 404, "\(action): \(reply.status) \(reply.text)")
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func aJWTWhoseUserClaimHasAControlCharacterIsRefused(_ kind: StoreKind) async throws {
        try await withJWTTestKeys { directory, rsa, _ in
            try await TestEnvironment.withMidtier(
                kind,
                adjust: { configuration in
                    configuration.apps["idp"] = DeviceCalls.idpApp(.file(path: "\(directory)/jwks.json"))
                }
            ) { env in
                for sub in ["ali\u{0}ce", "alice\u{7f}", "\u{1b}[2Jalice", "alice\n", "ali\u{85}ce"] {
                    let token = try TestTokens.make(.key(rsa), claims: TestTokens.claims(sub: sub))
                    let registered = try await DeviceCalls.register(env, token: token)
                    #expect(registered.status == 401, "\(sub.debugDescription): \(registered.status) \(registered.text)")
                    #expect(registered.errorMessage == "the token's sub claim contains control characters, which a user id cannot have")
                    #expect(registered.header("WWW-Authenticate") == DeviceCalls.bearerChallenge)
                    let selfService = try await env.call(.GET, "/mobileservices/me/registrations", headers: [("Authorization", "Bearer \(token)")])
                    #expect(selfService.status == 401, "\(sub.debugDescription): \(selfService.status) \(selfService.text)")
                }
                // Control: the same token with a plain sub is accepted.
                let good = try await DeviceCalls.register(
                    env, token: try TestTokens.make(.key(rsa), claims: TestTokens.claims(sub: "alice")))
                #expect(good.status == 201, "\(good.text)")
            }
        }
    }
}
