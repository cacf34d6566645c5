import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MidtierCore
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import Testing

@testable import DeviceAuthentication

// MARK: - Through real sockets

@Suite(.timeLimit(.minutes(10))) struct JWTAuthenticationTests {
    @Test func anRS256TokenRegistersADeviceAndReadsItsUsersPayroll() async throws {
        try await withJWTTestKeys { directory, rsa, _ in
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = DeviceCalls.idpApp(.file(path: "\(directory)/jwks.json"))
            }) { env in
                let token = try TestTokens.make(.key(rsa), claims: TestTokens.claims())
                let registered = try await DeviceCalls.register(env, token: token)
                #expect(registered.status == 201, "\(registered.text)")
                #expect((registered.json["d"] as? [String: Any])?["UserName"] as? String == "alice", "the user is the token's sub")
                let id = try #require(registered.header("X-SMP-APPCID"))

                let reply = try await env.call(
                    .GET, DeviceCalls.seedQuery, headers: [("Authorization", "Bearer \(token)"), ("X-SMP-APPCID", id)])
                #expect(reply.status == 200, "\(reply.text)")
                let runs = DeviceCalls.results(reply)
                #expect(runs.count == 5)
                #expect(runs.allSatisfy { $0["userId"] as? String == "100001" }, "the sfUserId claim is the SuccessFactors user")
                let stats = try await env.sandboxStats()
                #expect((stats["exchangesByUser"] as? [String: Int])?["100001"] == 1)

                // The registration is alice's: the same device id with a token for bob is not his.
                let bob = try TestTokens.make(.key(rsa), claims: TestTokens.claims(sub: "bob", sfUserId: "100002"))
                let asBob = try await env.call(.GET, "/odata/applications/v1/idp/Connections('\(id)')", headers: [("Authorization", "Bearer \(bob)")])
                #expect(asBob.status == 404)
            }
        }
    }

    @Test func anES256TokenWorksToo() async throws {
        try await withJWTTestKeys { directory, _, ec in
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = DeviceCalls.idpApp(.file(path: "\(directory)/jwks.json"))
            }) { env in
                let token = try TestTokens.make(.key(ec), claims: TestTokens.claims(sub: "bob", sfUserId: "100002"))
                let registered = try await DeviceCalls.register(env, token: token)
                #expect(registered.status == 201, "\(registered.text)")
                let id = try #require(registered.header("X-SMP-APPCID"))
                let own = try await env.call(
                    .GET, "/sf/odata/v2/EmployeePayrollRunResults?%24top=100",
                    headers: [("Authorization", "Bearer \(token)"), ("X-SMP-APPCID", id)])
                #expect(own.status == 200, "\(own.text)")
                #expect(!DeviceCalls.results(own).isEmpty)
                #expect(DeviceCalls.results(own).allSatisfy { $0["userId"] as? String == "100002" })
                // Settings exchange is authenticated the same way.
                let settings = try await env.call(.GET, "/mobileservices/settingsExchange/v1/idp", headers: [("Authorization", "Bearer \(token)")])
                #expect(settings.status == 200)
            }
        }
    }

    @Test func badTokensAreRefusedWithAClearReasonAndABearerChallenge() async throws {
        try await withJWTTestKeys { directory, rsa, ec in
            // Another key under the same kid: what a forger without the IdP's key would make.
            let forger = try JWTTestKey.rsa("rsa-1", in: directory)
            let now = Date().timeIntervalSince1970
            let valid = TestTokens.claims(now: now)
            let cases: [(String, String, String)] = [
                ("forged signature", try TestTokens.make(.key(forger), claims: valid), "the token's signature does not verify"),
                (
                    "tampered claims",
                    try {
                        let good = try TestTokens.make(.key(rsa), claims: valid).split(separator: ".")
                        let other = base64URL(Array(try JSONSerialization.data(withJSONObject: TestTokens.claims(sub: "bob", sfUserId: "100002"))))
                        return "\(good[0]).\(other).\(good[2])"
                    }(), "the token's signature does not verify"
                ),
                ("expired", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["exp"] = Int(now) - 3600 }), "the token has expired"),
                (
                    "expired beyond the skew", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["exp"] = Int(now) - 75 }),
                    "the token has expired"
                ),
                (
                    "not yet valid", try TestTokens.make(.key(ec), claims: TestTokens.claims { $0["nbf"] = Int(now) + 3600 }),
                    "the token is not valid yet (nbf)"
                ),
                ("no exp", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["exp"] = nil }), "the token has no exp claim"),
                (
                    "wrong audience", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["aud"] = "another-app" }),
                    "the token's audience is not midtier-app"
                ),
                (
                    "audience list without ours", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["aud"] = ["a", "b"] }),
                    "the token's audience is not midtier-app"
                ),
                (
                    "wrong issuer", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["iss"] = "https://evil.test" }),
                    "the token's issuer is not \(TestTokens.issuer)"
                ),
                (
                    "alg none", try TestTokens.make(.unsigned, header: ["alg": "none", "kid": "rsa-1"], claims: valid),
                    "the token uses alg none, which is not accepted (only RS256 and ES256 are)"
                ),
                (
                    "alg none without kid", try TestTokens.make(.unsigned, claims: valid),
                    "the token uses alg none, which is not accepted (only RS256 and ES256 are)"
                ),
                (
                    "HS256 with the RSA public key as secret",
                    try TestTokens.make(
                        .hmac(secret: rsa.publicKeyPEM, directory: directory),
                        header: ["alg": "HS256", "kid": "rsa-1", "typ": "JWT"], claims: valid),
                    "the token uses alg HS256, which is not accepted (only RS256 and ES256 are)"
                ),
                (
                    "RS256 naming the EC key", try TestTokens.make(.key(rsa), header: ["alg": "RS256", "kid": "ec-1"], claims: valid),
                    "the token's alg RS256 does not match the type of the key it names"
                ),
                (
                    "ES256 naming the RSA key", try TestTokens.make(.key(ec), header: ["alg": "ES256", "kid": "rsa-1"], claims: valid),
                    "the token's alg ES256 does not match the type of the key it names"
                ),
                (
                    "unknown kid", try TestTokens.make(.key(rsa), header: ["alg": "RS256", "kid": "rsa-9"], claims: valid),
                    "the token's signing key is not one of the identity provider's keys"
                ),
                (
                    "missing user claim", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["sub"] = nil }),
                    "the token has no sub claim naming the user"
                ),
                ("garbage", "this-is-not-a-token", "the token is malformed: it is not a JWT of three base64url parts"),
                ("garbage in three parts", "a.b!.c", "the token is malformed: its parts are not base64url"),
            ]
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = DeviceCalls.idpApp(.file(path: "\(directory)/jwks.json"))
            }) { env in
                for (name, token, reason) in cases {
                    let reply = try await DeviceCalls.register(env, token: token)
                    #expect(reply.status == 401, "\(name): \(reply.status) \(reply.text)")
                    #expect(reply.errorMessage == reason, "\(name)")
                    #expect(reply.header("WWW-Authenticate") == DeviceCalls.bearerChallenge, "\(name)")
                    for part in token.split(separator: ".") where part.count > 8 {
                        #expect(!reply.text.contains(part), "\(name): the 401 echoes the token")
                    }
                }
                let basic = try await env.call(.POST, "/odata/applications/v1/idp/Connections", headers: [("Authorization", TestUser.alice.basic)])
                #expect(basic.status == 401)
                #expect(basic.errorMessage == "the Authorization header is malformed: expected the Bearer scheme and a token")
                let none = try await env.call(.POST, "/odata/applications/v1/idp/Connections")
                #expect(none.status == 401)
                #expect(none.errorMessage == "no bearer token was sent")
                #expect(none.header("WWW-Authenticate") == DeviceCalls.bearerChallenge)
                // The basic app keeps its Basic challenge.
                let demo = try await env.call(.POST, "/odata/applications/v1/demo/Connections")
                #expect(demo.header("WWW-Authenticate")?.hasPrefix("Basic ") == true)

                // Control: the same keys and settings accept good tokens, also at the edges of the skew.
                // The clock is read again here: on a loaded machine the cases above can take longer
                // than the skew.
                let later = Date().timeIntervalSince1970
                for (name, claims) in [
                    ("valid", valid), ("audience list", TestTokens.claims { $0["aud"] = ["a", TestTokens.audience] }),
                    ("expired within the skew", TestTokens.claims { $0["exp"] = Int(later) - 20 }),
                    ("nbf within the skew", TestTokens.claims { $0["nbf"] = Int(later) + 20 }),
                ] {
                    let reply = try await DeviceCalls.register(env, token: try TestTokens.make(.key(rsa), claims: claims))
                    #expect(reply.status == 201, "\(name): \(reply.text)")
                }
            }
        }
    }

    @Test func aJWKSURLIsFetchedOnceAndAgainOnlyForARotatedKey() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let first = try JWTTestKey.rsa("2024-key", in: directory)
        let second = try JWTTestKey.ec("2025-key", in: directory)
        let idp = JWKSServer(document: jwksDocument([first.jwk]))
        idp.delay(milliseconds: 200)
        try await idp.run { url in
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = DeviceCalls.idpApp(.url(url))
            }) { env in
                #expect(idp.fetches == 0, "keys are fetched on first use")
                let token = try TestTokens.make(.key(first), claims: TestTokens.claims())
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<20 {
                        group.addTask {
                            try await env.call(.GET, "/mobileservices/settingsExchange/v1/idp", headers: [("Authorization", "Bearer \(token)")])
                                .status
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                #expect(statuses == Array(repeating: 200, count: 20), "\(statuses)")
                for _ in 0..<10 {
                    let other = try TestTokens.make(.key(first), claims: TestTokens.claims())
                    #expect(try await DeviceCalls.register(env, token: other).status == 201)
                }
                #expect(idp.fetches == 1, "concurrent first requests share one fetch; later ones use the cached keys")

                // The IdP rotates: a token with the new kid makes Midtier fetch again, once.
                idp.serve(jwksDocument([first.jwk, second.jwk]))
                let rotated = try TestTokens.make(.key(second), claims: TestTokens.claims())
                let afterRotation = try await DeviceCalls.register(env, token: rotated)
                #expect(afterRotation.status == 201, "\(afterRotation.text)")
                #expect(idp.fetches == 2)
                #expect(try await DeviceCalls.register(env, token: try TestTokens.make(.key(second), claims: TestTokens.claims())).status == 201)
                #expect(idp.fetches == 2)

                // Made-up kids do not make Midtier fetch again within 30 seconds.
                for index in 0..<10 {
                    let made = try TestTokens.make(.key(first), header: ["alg": "RS256", "kid": "random-\(index)"], claims: TestTokens.claims())
                    let reply = try await DeviceCalls.register(env, token: made)
                    #expect(reply.status == 401)
                    #expect(reply.errorMessage == "the token's signing key is not one of the identity provider's keys")
                }
                #expect(idp.fetches == 2)
            }
        }
    }

    @Test func aBrokenJWKSFileRefusesTokensWithoutStoppingTheServer() async throws {
        try await withJWTTestKeys { directory, rsa, _ in
            try "{\"keys\": \"not a list\"}".write(toFile: "\(directory)/broken.json", atomically: true, encoding: .utf8)
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = DeviceCalls.idpApp(.file(path: "\(directory)/broken.json"))
                var missing = DeviceCalls.idpApp(.file(path: "\(directory)/missing.json"))
                missing.id = "idp2"
                configuration.apps["idp2"] = missing
            }) { env in
                let token = try TestTokens.make(.key(rsa), claims: TestTokens.claims())
                for app in ["idp", "idp2"] {
                    let reply = try await env.call(
                        .POST, "/odata/applications/v1/\(app)/Connections",
                        headers: [("Authorization", "Bearer \(token)")], body: "{}")
                    #expect(reply.status == 401, "\(app)")
                    #expect(reply.errorMessage == "the identity provider's keys are not available to Midtier; try again later")
                }
                #expect(try await env.register(.alice).isEmpty == false, "the basic app still works")
            }
        }
    }
}
