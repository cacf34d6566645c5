import AsyncHTTPClient
import Foundation
import HTTPTypes
import MidtierCore
import MidtierTestSupport
import Synchronization
import Testing

@testable import DeviceAuthentication

/// The JWT authenticator itself, with clocks in hand: its cache, JWKS fetching and refusals.
@Suite(.timeLimit(.minutes(10))) struct JWTAuthenticatorTests {
    static func authenticator(
        _ jwks: JWTAuthentication.KeySource, clocks: ManualClocks, userClaim: String = "sub",
        httpClient: HTTPClient? = nil, capacity: Int = 10_000
    ) -> JWTAuthenticator {
        JWTAuthenticator(
            settings: JWTAuthentication(issuer: TestTokens.issuer, audience: TestTokens.audience, jwks: jwks, userClaim: userClaim),
            httpClient: httpClient, capacity: capacity, now: { clocks.wall }, uptime: { clocks.uptime })
    }

    static func withKeyFile(_ body: (_ directory: String, _ rsa: JWTTestKey, _ ec: JWTTestKey) async throws -> Void) async throws {
        try await withJWTTestKeys(body)
    }

    @Test func verifiedTokensAreCachedButNeverPastTheirExpiry() async throws {
        try await Self.withKeyFile { directory, rsa, _ in
            let clocks = ManualClocks()
            let t0 = clocks.wall
            let authenticator = Self.authenticator(.file(path: "\(directory)/jwks.json"), clocks: clocks)
            let token = "Bearer " + (try TestTokens.make(.key(rsa), claims: TestTokens.claims(now: t0) { $0["exp"] = t0 + 100 }))
            for _ in 0..<5 { #expect(try await authenticator.authenticate(authorization: token).get().id == "alice") }
            #expect(authenticator.signatureChecks.load(ordering: .relaxed) == 1, "one verification for five requests")

            // The cache entry lives at most cacheSeconds (60 s)...
            clocks.advance(seconds: 61)
            #expect(try await authenticator.authenticate(authorization: token).get().id == "alice")
            #expect(authenticator.signatureChecks.load(ordering: .relaxed) == 2)
            // ... and not past exp: at exp + 30 s the token is verified again (accepted within the skew) ...
            clocks.advance(seconds: 69)
            #expect(try await authenticator.authenticate(authorization: token).get().id == "alice")
            #expect(authenticator.signatureChecks.load(ordering: .relaxed) == 3)
            // ... and refused past the skew, though it was verified a moment ago.
            clocks.advance(seconds: 31)
            #expect(await authenticator.authenticate(authorization: token) == .failure(.expired))

            // Another token is not the cached one, even for the same user.
            let other = "Bearer " + (try TestTokens.make(.key(rsa), claims: TestTokens.claims(now: clocks.wall)))
            _ = try await authenticator.authenticate(authorization: other).get()
            #expect(authenticator.signatureChecks.load(ordering: .relaxed) == 5)
        }
    }

    @Test func theCacheIsBounded() async throws {
        try await Self.withKeyFile { directory, rsa, _ in
            let clocks = ManualClocks()
            let authenticator = Self.authenticator(.file(path: "\(directory)/jwks.json"), clocks: clocks, capacity: 2)
            var tokens: [String] = []
            for _ in 0..<3 { tokens.append("Bearer " + (try TestTokens.make(.key(rsa), claims: TestTokens.claims(now: clocks.wall)))) }
            for token in tokens { _ = try await authenticator.authenticate(authorization: token).get() }
            #expect(authenticator.signatureChecks.load(ordering: .relaxed) == 3)
            // The third token found the cache full of live entries and emptied it.
            _ = try await authenticator.authenticate(authorization: tokens[0]).get()
            #expect(authenticator.signatureChecks.load(ordering: .relaxed) == 4)
            _ = try await authenticator.authenticate(authorization: tokens[2]).get()
            #expect(authenticator.signatureChecks.load(ordering: .relaxed) == 4)
        }
    }

    @Test func theUserClaimNamesTheUserAndStringClaimsBecomeAttributes() async throws {
        try await Self.withKeyFile { directory, _, ec in
            let clocks = ManualClocks()
            let authenticator = Self.authenticator(.file(path: "\(directory)/jwks.json"), clocks: clocks, userClaim: "email")
            let claims = TestTokens.claims(now: clocks.wall) {
                $0["email"] = "alice@example.com"; $0["groups"] = ["payroll"]; $0["level"] = 3
            }
            let user = try await authenticator.authenticate(authorization: "Bearer " + (try TestTokens.make(.key(ec), claims: claims))).get()
            #expect(user.id == "alice@example.com")
            #expect(user.attributes["sfUserId"] == "100001")
            #expect(user.attributes["sub"] == "alice")
            #expect(user.attributes["groups"] == nil && user.attributes["level"] == nil, "only string claims")
            let without = TestTokens.claims(now: clocks.wall)
            let refused = await authenticator.authenticate(authorization: "Bearer " + (try TestTokens.make(.key(ec), claims: without)))
            #expect(refused == .failure(.missingUserClaim("email")))
            #expect(JWTAuthenticationFailure.missingUserClaim("email").description == "the token has no email claim naming the user")
        }
    }

    /// The issuer and the audience are compared by their exact bytes, as every identity is
    /// (docs/identity.md): an `iss` or `aud` that is only canonically equivalent to the
    /// configured one (KELVIN SIGN for K, a decomposed é) is another issuer or audience.
    @Test func issuerAndAudienceCompareByBytes() async throws {
        try await Self.withKeyFile { directory, rsa, _ in
            let clocks = ManualClocks()
            let authenticator = JWTAuthenticator(
                settings: JWTAuthentication(
                    issuer: "https://idp.test/realms/K\u{E9}", audience: "app-K",
                    jwks: .file(path: "\(directory)/jwks.json"), userClaim: "sub"),
                httpClient: nil, now: { clocks.wall }, uptime: { clocks.uptime })
            func token(iss: String, aud: Any) throws -> String {
                "Bearer "
                    + (try TestTokens.make(
                        .key(rsa),
                        claims: TestTokens.claims(now: clocks.wall) {
                            $0["iss"] = iss; $0["aud"] = aud
                        }))
            }
            #expect("https://idp.test/realms/\u{212A}e\u{301}" == "https://idp.test/realms/K\u{E9}", "Swift's == calls them equal")
            #expect(
                try await authenticator.authenticate(authorization: token(iss: "https://idp.test/realms/K\u{E9}", aud: "app-K")).get().id == "alice")
            let kelvin = await authenticator.authenticate(authorization: try token(iss: "https://idp.test/realms/\u{212A}e\u{301}", aud: "app-K"))
            #expect(kelvin == .failure(.wrongIssuer(expected: "https://idp.test/realms/K\u{E9}")))
            let audience = await authenticator.authenticate(authorization: try token(iss: "https://idp.test/realms/K\u{E9}", aud: "app-\u{212A}"))
            #expect(audience == .failure(.wrongAudience(expected: "app-K")))
            let inList = await authenticator.authenticate(
                authorization: try token(iss: "https://idp.test/realms/K\u{E9}", aud: ["x", "app-\u{212A}"]))
            #expect(inList == .failure(.wrongAudience(expected: "app-K")))
        }
    }

    @Test func onlyRS256AndES256OnKeysOfTheirTypeAreAccepted() async throws {
        try await Self.withKeyFile { directory, rsa, ec in
            let clocks = ManualClocks()
            let authenticator = Self.authenticator(.file(path: "\(directory)/jwks.json"), clocks: clocks)
            let claims = TestTokens.claims(now: clocks.wall)
            func check(_ token: String) async -> Result<AuthenticatedUser, JWTAuthenticationFailure> {
                await authenticator.authenticate(authorization: "Bearer " + token)
            }
            // Without kid, every key of the algorithm's type is tried.
            #expect(try await check(try TestTokens.make(.key(rsa), header: ["alg": "RS256"], claims: claims)).get().id == "alice")
            #expect(try await check(try TestTokens.make(.key(ec), header: ["alg": "ES256"], claims: claims)).get().id == "alice")
            for alg in ["none", "None", "HS256", "HS512", "RS512", "PS256", "ES384", "EdDSA"] {
                let token = try TestTokens.make(.key(rsa), header: ["alg": alg, "kid": "rsa-1"], claims: claims)
                #expect(await check(token) == .failure(.algorithmNotAccepted(alg)), "\(alg)")
            }
            let confused = try TestTokens.make(
                .hmac(secret: rsa.publicKeyPEM, directory: directory), header: ["alg": "HS256", "kid": "rsa-1"], claims: claims)
            #expect(await check(confused) == .failure(.algorithmNotAccepted("HS256")))
            #expect(JWTAuthenticationFailure.algorithmNotAccepted("<script>").description.contains("<script>") == false)
            // A header that names its own key is ignored: only the JWKS is trusted.
            let stranger = try JWTTestKey.rsa("rsa-1", in: directory)
            let withJWK = try TestTokens.make(
                .key(stranger),
                header: [
                    "alg": "RS256", "kid": "rsa-1", "jwk": stranger.jwk,
                    "jku": "http://127.0.0.1:1/jwks",
                ], claims: claims)
            #expect(await check(withJWK) == .failure(.signatureDoesNotVerify))
            let critical = try TestTokens.make(.key(rsa), header: ["alg": "RS256", "kid": "rsa-1", "crit": ["exp"]], claims: claims)
            #expect(await check(critical) == .failure(.malformedToken("its header has critical parameters (crit), which are not supported")))
            #expect(
                await check(try TestTokens.make(.key(rsa), claims: TestTokens.claims(now: clocks.wall) { $0["exp"] = "tomorrow" }))
                    == .failure(.malformedToken("its exp is not a number")))
            #expect(await check("a.b.c.d.e") == .failure(.malformedToken("it is encrypted (JWE), not signed")))
        }
    }

    @Test func theKeySetKeepsOnlyVerificationKeysMidtierAccepts() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let rsa = try JWTTestKey.rsa("good-rsa", in: directory)
        let ec = try JWTTestKey.ec("good-ec", in: directory)
        var rs512 = try JWTTestKey.rsa("rs512", in: directory).jwk; rs512["alg"] = "RS512"
        var encryption = try JWTTestKey.rsa("enc", in: directory).jwk; encryption["use"] = "enc"
        let small = try JWTTestKey.rsa("small", in: directory, bits: 1024).jwk
        let p384 = try JWTTestKey.ec("p384", in: directory, curve: "P-384").jwk
        let hmac = ["kty": "oct", "kid": "good-rsa", "k": base64URL(rsa.publicKeyPEM)]
        let keys = try await JWKSKeySet.parse(Array(jwksDocument([hmac, rsa.jwk, rs512, encryption, small, ec.jwk, p384]).utf8))
        #expect(keys.keys.map(\.kid) == ["good-rsa", "good-ec"])
        #expect(keys.keys.map(\.algorithm) == [.rs256, .es256])
        #expect(keys.skipped.count == 5, "\(keys.skipped)")
        #expect(keys.skipped.contains { $0.hasPrefix("key \"good-rsa\": its kty is oct") })

        for broken in ["not json", #"{"keys": {}}"#, "[]", jwksDocument([hmac, small])] {
            await #expect(throws: JWKSProblem.self, "\(broken)") { try await JWKSKeySet.parse(Array(broken.utf8)) }
        }
    }

    @Test func aJWKSURLIsRefreshedEveryFiveMinutesAndForUnknownKidsAtMostEvery30Seconds() async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let key = try JWTTestKey.rsa("k1", in: directory)
        let next = try JWTTestKey.rsa("k2", in: directory)
        let idp = JWKSServer(document: jwksDocument([key.jwk]))
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            try await idp.run { url in
                let clocks = ManualClocks()
                let authenticator = Self.authenticator(.url(url), clocks: clocks, httpClient: client)
                func check(_ signer: JWTTestKey, kid: String? = nil) async throws -> Result<AuthenticatedUser, JWTAuthenticationFailure> {
                    let token = try TestTokens.make(
                        .key(signer), header: ["alg": "RS256", "kid": kid ?? signer.kid],
                        claims: TestTokens.claims(now: clocks.wall))
                    return await authenticator.authenticate(authorization: "Bearer " + token)
                }
                #expect(try await check(key).get().id == "alice")
                #expect(idp.fetches == 1)
                #expect(try await check(key, kid: "made-up-1") == .failure(.unknownKey))
                #expect(idp.fetches == 2, "the first unknown kid fetches again")
                #expect(try await check(key, kid: "made-up-2") == .failure(.unknownKey))
                clocks.advance(seconds: 29)
                #expect(try await check(key, kid: "made-up-3") == .failure(.unknownKey))
                #expect(idp.fetches == 2, "not again within 30 s")
                clocks.advance(seconds: 2)
                #expect(try await check(key, kid: "made-up-4") == .failure(.unknownKey))
                #expect(idp.fetches == 3)

                // Known keys are refreshed after five minutes, not before.
                clocks.advance(seconds: 299)
                #expect(try await check(key).get().id == "alice")
                #expect(idp.fetches == 3)
                clocks.advance(seconds: 2)
                #expect(try await check(key).get().id == "alice")
                #expect(idp.fetches == 4)

                // The IdP fails: the keys fetched before stay in use, and it is not asked again at once.
                idp.fail(with: .internalServerError)
                clocks.advance(seconds: 301)
                #expect(try await check(key).get().id == "alice")
                #expect(idp.fetches == 5)
                clocks.advance(seconds: 1)
                #expect(try await check(key).get().id == "alice")
                #expect(idp.fetches == 5)

                // A rotation seen by many requests at once: one fetch.
                idp.fail(with: .ok)
                idp.serve(jwksDocument([key.jwk, next.jwk]))
                idp.delay(milliseconds: 200)
                clocks.advance(seconds: 31)
                let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
                    for _ in 0..<10 { group.addTask { (try? await check(next).get()) != nil } }
                    return try await group.reduce(into: [Bool]()) { $0.append($1) }
                }
                #expect(outcomes == Array(repeating: true, count: 10))
                #expect(idp.fetches == 6)
                #expect(authenticator.keySetLoads == 6)
            }
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }
}
