import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MidtierCore
import MidtierTestSupport
import NIOCore
import ServiceLifecycle
import Synchronization
import Testing
@testable import DeviceAuthentication
import NIOHTTP1

// MARK: - Keys and tokens, made with the openssl command line (independent of jwt-kit)

/// A signing key made by `openssl` for one test, with its public JWK.
struct JWTTestKey: Sendable {
    enum Kind: Sendable { case rsa, ec }
    let kind: Kind
    let kid: String
    let keyPath: String
    let directory: String
    /// The public key as a JWK (`kty`, `kid`, `n`/`e` or `crv`/`x`/`y`).
    let jwk: [String: String]
    /// The public key in PEM, the bytes an HS/RS confusion attack uses as the HMAC secret.
    let publicKeyPEM: [UInt8]
    /// The JWS algorithm this key signs with.
    var alg: String { kind == .rsa ? "RS256" : "ES256" }

    static func rsa(_ kid: String, in directory: String, bits: Int = 2048) throws -> JWTTestKey {
        let path = "\(directory)/\(UUID().uuidString).key"
        try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(bits)", "-out", path])
        let modulus = try openssl(["rsa", "-in", path, "-noout", "-modulus"])
        guard let hex = modulus.split(separator: "=").last?.trimmingCharacters(in: .whitespacesAndNewlines) else {
            throw TestFailure("no modulus in \(modulus)")
        }
        let pem = try publicKey(of: path, der: false)
        return JWTTestKey(kind: .rsa, kid: kid, keyPath: path, directory: directory,
                          jwk: ["kty": "RSA", "kid": kid, "n": base64URL(bytes(hex: hex)), "e": "AQAB"], publicKeyPEM: pem)
    }

    static func ec(_ kid: String, in directory: String, curve: String = "P-256") throws -> JWTTestKey {
        let path = "\(directory)/\(UUID().uuidString).key"
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:\(curve)", "-out", path])
        let size = curve == "P-256" ? 32 : 48
        // The DER SubjectPublicKeyInfo ends with the uncompressed point 04 || x || y.
        let point = Array(try publicKey(of: path, der: true).suffix(1 + 2 * size))
        return JWTTestKey(kind: .ec, kid: kid, keyPath: path, directory: directory,
                          jwk: ["kty": "EC", "kid": kid, "crv": curve,
                                "x": base64URL(Array(point[1...size])), "y": base64URL(Array(point[(size + 1)...]))],
                          publicKeyPEM: try publicKey(of: path, der: false))
    }

    /// A JWS signature over `input`: PKCS#1 v1.5 for RSA, raw `r || s` for EC (RFC 7518 §3.4).
    func sign(_ input: [UInt8]) throws -> [UInt8] {
        let signature = try Self.opensslFile(input, in: directory) { input, output in
            ["dgst", "-sha256", "-sign", keyPath, "-out", output, input]
        }
        return kind == .rsa ? signature : try Self.rawECDSA(signature, size: jwk["crv"] == "P-256" ? 32 : 48)
    }

    static func hmacSHA256(_ input: [UInt8], secret: [UInt8], in directory: String) throws -> [UInt8] {
        let hexKey = secret.map { String(format: "%02x", $0) }.joined()
        return try opensslFile(input, in: directory) { input, output in
            ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(hexKey)", "-binary", "-out", output, input]
        }
    }

    private static func publicKey(of path: String, der: Bool) throws -> [UInt8] {
        let out = path + (der ? ".pub.der" : ".pub.pem")
        try openssl(["pkey", "-in", path, "-pubout", "-outform", der ? "DER" : "PEM", "-out", out])
        return Array(try Data(contentsOf: URL(fileURLWithPath: out)))
    }

    private static func opensslFile(_ input: [UInt8], in directory: String, _ arguments: (String, String) -> [String]) throws -> [UInt8] {
        let name = "\(directory)/\(UUID().uuidString)"
        try Data(input).write(to: URL(fileURLWithPath: name + ".in"))
        try openssl(arguments(name + ".in", name + ".out"))
        return Array(try Data(contentsOf: URL(fileURLWithPath: name + ".out")))
    }

    @discardableResult
    private static func openssl(_ arguments: [String]) throws -> String {
        let result = try run("/usr/bin/openssl", arguments)
        guard result.status == 0 else { throw TestFailure("openssl \(arguments.first ?? "") failed: \(result.output)") }
        return result.output
    }

    /// DER `SEQUENCE { INTEGER r, INTEGER s }` → `r || s`, each left-padded to `size` bytes.
    static func rawECDSA(_ der: [UInt8], size: Int) throws -> [UInt8] {
        guard der.count > 8, der[0] == 0x30 else { throw TestFailure("not a DER ECDSA signature") }
        var index = (der[1] & 0x80) != 0 ? 2 + Int(der[1] & 0x7F) : 2
        func integer() throws -> [UInt8] {
            guard der[index] == 0x02 else { throw TestFailure("not a DER INTEGER") }
            let length = Int(der[index + 1])
            var value = Array(der[(index + 2)..<(index + 2 + length)])
            index += 2 + length
            while value.count > size, value.first == 0 { value.removeFirst() }
            return [UInt8](repeating: 0, count: size - value.count) + value
        }
        return try integer() + integer()
    }

    static func bytes(hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var iterator = hex.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            result.append(UInt8(String([high, low]), radix: 16)!)
        }
        return result
    }
}

func base64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A JWKS document with `keys`.
func jwksDocument(_ keys: [[String: String]]) -> String {
    let data = try! JSONSerialization.data(withJSONObject: ["keys": keys], options: [.sortedKeys])
    return String(decoding: data, as: UTF8.self)
}

/// How a test token is signed.
enum TestSigning {
    case key(JWTTestKey)
    case hmac(secret: [UInt8], directory: String)
    case unsigned
}

enum TestTokens {
    static let issuer = "https://idp.test/realms/company"
    static let audience = "midtier-app"

    /// Claims of a valid token for `sub` (mapped to SuccessFactors by `sfUserId`), changed by `adjust`.
    static func claims(sub: String = "alice", sfUserId: String = "100001", now: Double = Date().timeIntervalSince1970,
                       _ adjust: (inout [String: Any]) -> Void = { _ in }) -> [String: Any] {
        var claims: [String: Any] = ["iss": issuer, "aud": audience, "sub": sub, "sfUserId": sfUserId,
                                     "iat": Int(now), "exp": Int(now) + 600, "jti": UUID().uuidString]
        adjust(&claims)
        return claims
    }

    /// A compact JWS. `header` defaults to the key's `alg` and `kid`.
    static func make(_ signing: TestSigning, header: [String: Any]? = nil, claims: [String: Any]) throws -> String {
        var defaultHeader: [String: Any] = ["typ": "JWT"]
        switch signing {
        case .key(let key): defaultHeader["alg"] = key.alg; defaultHeader["kid"] = key.kid
        case .hmac: defaultHeader["alg"] = "HS256"
        case .unsigned: defaultHeader["alg"] = "none"
        }
        let encodedHeader = base64URL(Array(try JSONSerialization.data(withJSONObject: header ?? defaultHeader, options: [.sortedKeys])))
        let encodedClaims = base64URL(Array(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])))
        let input = Array("\(encodedHeader).\(encodedClaims)".utf8)
        let signature: [UInt8]
        switch signing {
        case .key(let key): signature = try key.sign(input)
        case .hmac(let secret, let directory): signature = try JWTTestKey.hmacSHA256(input, secret: secret, in: directory)
        case .unsigned: signature = []
        }
        return "\(encodedHeader).\(encodedClaims).\(base64URL(signature))"
    }
}

/// A JWKS endpoint, as an IdP serves it: counts fetches, can change its keys, be slow or fail.
final class JWKSServer: Sendable {
    private struct State {
        var document: String
        var fetches = 0
        var status: HTTPResponse.Status = .ok
        var delayMilliseconds = 0
    }
    private let state: Mutex<State>

    init(document: String) { state = Mutex(State(document: document)) }

    var fetches: Int { state.withLock { $0.fetches } }
    func serve(_ document: String) { state.withLock { $0.document = document } }
    func fail(with status: HTTPResponse.Status) { state.withLock { $0.status = status } }
    func delay(milliseconds: Int) { state.withLock { $0.delayMilliseconds = milliseconds } }

    /// Runs the server on a loopback port for `body`, which gets the JWKS URL.
    func run(_ body: (String) async throws -> Void) async throws {
        let port = PortBox()
        let router = Router()
        router.get("/realms/company/jwks") { _, _ -> Response in
            let (document, status, delay) = self.state.withLock { state in
                state.fetches += 1
                return (state.document, state.status, state.delayMilliseconds)
            }
            if delay > 0 { try await Task.sleep(for: .milliseconds(delay)) }
            return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: document)))
        }
        let logger = Logger(label: "jwks")
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                                      onServerRunning: port.set, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [.init(service: application)], logger: logger))
        let task = Task { try await group.run() }
        let url = "http://127.0.0.1:\(await port.port)/realms/company/jwks"
        do {
            try await body(url)
        } catch {
            await group.triggerGracefulShutdown()
            _ = await task.result
            throw error
        }
        await group.triggerGracefulShutdown()
        _ = await task.result
    }
}

/// Wall and monotonic time for an authenticator under test, moved by hand.
final class ManualClocks: Sendable {
    private let state: Mutex<(wall: Double, uptime: UInt64)>
    init(wall: Double = Date().timeIntervalSince1970) { state = Mutex((wall, 1_000_000_000)) }
    var wall: Double { state.withLock { $0.wall } }
    var uptime: UInt64 { state.withLock { $0.uptime } }
    func advance(seconds: Double) {
        state.withLock { $0.wall += seconds; $0.uptime += UInt64(seconds * 1_000_000_000) }
    }
    /// Moves only the monotonic clock (cache lifetime and JWKS timing), not token time.
    func advanceUptime(seconds: Double) { state.withLock { $0.uptime += UInt64(seconds * 1_000_000_000) } }
}

// MARK: - Through real sockets

@Suite struct JWTAuthenticationTests {
    static let bearerChallenge = #"Bearer realm="midtier""#

    static func idpApp(_ jwks: JWTAuthentication.KeySource, userClaim: String = "sub") -> AppConfiguration {
        AppConfiguration(id: "idp", authentication: .jwt(JWTAuthentication(issuer: TestTokens.issuer, audience: TestTokens.audience,
                                                                          jwks: jwks, userClaim: userClaim)),
                         destinations: ["sf", "echo"])
    }

    /// Keys and a JWKS file in a fresh directory, for `body`.
    static func withKeys(_ body: (_ directory: String, _ rsa: JWTTestKey, _ ec: JWTTestKey) async throws -> Void) async throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        let rsa = try JWTTestKey.rsa("rsa-1", in: directory)
        let ec = try JWTTestKey.ec("ec-1", in: directory)
        try jwksDocument([rsa.jwk, ec.jwk]).write(toFile: "\(directory)/jwks.json", atomically: true, encoding: .utf8)
        try await body(directory, rsa, ec)
    }

    static func register(_ env: TestEnvironment, token: String) async throws -> TestEnvironment.Reply {
        try await env.call(.POST, "/odata/applications/v1/idp/Connections",
                           headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                           body: #"{"DeviceType":"iOS","DeviceModel":"iPhone15,2"}"#)
    }

    static func results(_ reply: TestEnvironment.Reply) -> [[String: Any]] {
        ((reply.json["d"] as? [String: Any])?["results"] as? [[String: Any]]) ?? []
    }

    @Test func anRS256TokenRegistersADeviceAndReadsItsUsersPayroll() async throws {
        try await Self.withKeys { directory, rsa, _ in
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = Self.idpApp(.file(path: "\(directory)/jwks.json"))
            }) { env in
                let token = try TestTokens.make(.key(rsa), claims: TestTokens.claims())
                let registered = try await Self.register(env, token: token)
                #expect(registered.status == 201, "\(registered.text)")
                #expect((registered.json["d"] as? [String: Any])?["UserName"] as? String == "alice", "the user is the token's sub")
                let id = try #require(registered.header("X-SMP-APPCID"))

                let reply = try await env.call(.GET, RegisterAndReadTests.seedQuery, headers: [("Authorization", "Bearer \(token)"), ("X-SMP-APPCID", id)])
                #expect(reply.status == 200, "\(reply.text)")
                let runs = Self.results(reply)
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
        try await Self.withKeys { directory, _, ec in
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = Self.idpApp(.file(path: "\(directory)/jwks.json"))
            }) { env in
                let token = try TestTokens.make(.key(ec), claims: TestTokens.claims(sub: "bob", sfUserId: "100002"))
                let registered = try await Self.register(env, token: token)
                #expect(registered.status == 201, "\(registered.text)")
                let id = try #require(registered.header("X-SMP-APPCID"))
                let own = try await env.call(.GET, "/sf/odata/v2/EmployeePayrollRunResults?%24top=100",
                                             headers: [("Authorization", "Bearer \(token)"), ("X-SMP-APPCID", id)])
                #expect(own.status == 200, "\(own.text)")
                #expect(!Self.results(own).isEmpty)
                #expect(Self.results(own).allSatisfy { $0["userId"] as? String == "100002" })
                // Settings exchange is authenticated the same way.
                let settings = try await env.call(.GET, "/mobileservices/settingsExchange/v1/idp", headers: [("Authorization", "Bearer \(token)")])
                #expect(settings.status == 200)
            }
        }
    }

    @Test func badTokensAreRefusedWithAClearReasonAndABearerChallenge() async throws {
        try await Self.withKeys { directory, rsa, ec in
            // Another key under the same kid: what a forger without the IdP's key would make.
            let forger = try JWTTestKey.rsa("rsa-1", in: directory)
            let now = Date().timeIntervalSince1970
            let valid = TestTokens.claims(now: now)
            let cases: [(String, String, String)] = [
                ("forged signature", try TestTokens.make(.key(forger), claims: valid), "the token's signature does not verify"),
                ("tampered claims", try {
                    let good = try TestTokens.make(.key(rsa), claims: valid).split(separator: ".")
                    let other = base64URL(Array(try JSONSerialization.data(withJSONObject: TestTokens.claims(sub: "bob", sfUserId: "100002"))))
                    return "\(good[0]).\(other).\(good[2])"
                }(), "the token's signature does not verify"),
                ("expired", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["exp"] = Int(now) - 3600 }), "the token has expired"),
                ("expired beyond the skew", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["exp"] = Int(now) - 75 }), "the token has expired"),
                ("not yet valid", try TestTokens.make(.key(ec), claims: TestTokens.claims { $0["nbf"] = Int(now) + 3600 }), "the token is not valid yet (nbf)"),
                ("no exp", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["exp"] = nil }), "the token has no exp claim"),
                ("wrong audience", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["aud"] = "another-app" }),
                 "the token's audience is not midtier-app"),
                ("audience list without ours", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["aud"] = ["a", "b"] }),
                 "the token's audience is not midtier-app"),
                ("wrong issuer", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["iss"] = "https://evil.test" }),
                 "the token's issuer is not \(TestTokens.issuer)"),
                ("alg none", try TestTokens.make(.unsigned, header: ["alg": "none", "kid": "rsa-1"], claims: valid),
                 "the token uses alg none, which is not accepted (only RS256 and ES256 are)"),
                ("alg none without kid", try TestTokens.make(.unsigned, claims: valid),
                 "the token uses alg none, which is not accepted (only RS256 and ES256 are)"),
                ("HS256 with the RSA public key as secret", try TestTokens.make(.hmac(secret: rsa.publicKeyPEM, directory: directory),
                                                                               header: ["alg": "HS256", "kid": "rsa-1", "typ": "JWT"], claims: valid),
                 "the token uses alg HS256, which is not accepted (only RS256 and ES256 are)"),
                ("RS256 naming the EC key", try TestTokens.make(.key(rsa), header: ["alg": "RS256", "kid": "ec-1"], claims: valid),
                 "the token's alg RS256 does not match the type of the key it names"),
                ("ES256 naming the RSA key", try TestTokens.make(.key(ec), header: ["alg": "ES256", "kid": "rsa-1"], claims: valid),
                 "the token's alg ES256 does not match the type of the key it names"),
                ("unknown kid", try TestTokens.make(.key(rsa), header: ["alg": "RS256", "kid": "rsa-9"], claims: valid),
                 "the token's signing key is not one of the identity provider's keys"),
                ("missing user claim", try TestTokens.make(.key(rsa), claims: TestTokens.claims { $0["sub"] = nil }),
                 "the token has no sub claim naming the user"),
                ("garbage", "this-is-not-a-token", "the token is malformed: it is not a JWT of three base64url parts"),
                ("garbage in three parts", "a.b!.c", "the token is malformed: its parts are not base64url"),
            ]
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = Self.idpApp(.file(path: "\(directory)/jwks.json"))
            }) { env in
                for (name, token, reason) in cases {
                    let reply = try await Self.register(env, token: token)
                    #expect(reply.status == 401, "\(name): \(reply.status) \(reply.text)")
                    #expect(reply.errorMessage == reason, "\(name)")
                    #expect(reply.header("WWW-Authenticate") == Self.bearerChallenge, "\(name)")
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
                #expect(none.header("WWW-Authenticate") == Self.bearerChallenge)
                // The basic app keeps its Basic challenge.
                let demo = try await env.call(.POST, "/odata/applications/v1/demo/Connections")
                #expect(demo.header("WWW-Authenticate")?.hasPrefix("Basic ") == true)

                // Control: the same keys and settings accept good tokens, also at the edges of the skew.
                for (name, claims) in [("valid", valid), ("audience list", TestTokens.claims { $0["aud"] = ["a", TestTokens.audience] }),
                                       ("expired within the skew", TestTokens.claims { $0["exp"] = Int(now) - 20 }),
                                       ("nbf within the skew", TestTokens.claims { $0["nbf"] = Int(now) + 20 })] {
                    let reply = try await Self.register(env, token: try TestTokens.make(.key(rsa), claims: claims))
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
                configuration.apps["idp"] = Self.idpApp(.url(url))
            }) { env in
                #expect(idp.fetches == 0, "keys are fetched on first use")
                let token = try TestTokens.make(.key(first), claims: TestTokens.claims())
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<20 {
                        group.addTask { try await env.call(.GET, "/mobileservices/settingsExchange/v1/idp", headers: [("Authorization", "Bearer \(token)")]).status }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                #expect(statuses == Array(repeating: 200, count: 20), "\(statuses)")
                for _ in 0..<10 {
                    let other = try TestTokens.make(.key(first), claims: TestTokens.claims())
                    #expect(try await Self.register(env, token: other).status == 201)
                }
                #expect(idp.fetches == 1, "concurrent first requests share one fetch; later ones use the cached keys")

                // The IdP rotates: a token with the new kid makes Midtier fetch again, once.
                idp.serve(jwksDocument([first.jwk, second.jwk]))
                let rotated = try TestTokens.make(.key(second), claims: TestTokens.claims())
                let afterRotation = try await Self.register(env, token: rotated)
                #expect(afterRotation.status == 201, "\(afterRotation.text)")
                #expect(idp.fetches == 2)
                #expect(try await Self.register(env, token: try TestTokens.make(.key(second), claims: TestTokens.claims())).status == 201)
                #expect(idp.fetches == 2)

                // Made-up kids do not make Midtier fetch again within 30 seconds.
                for index in 0..<10 {
                    let made = try TestTokens.make(.key(first), header: ["alg": "RS256", "kid": "random-\(index)"], claims: TestTokens.claims())
                    let reply = try await Self.register(env, token: made)
                    #expect(reply.status == 401)
                    #expect(reply.errorMessage == "the token's signing key is not one of the identity provider's keys")
                }
                #expect(idp.fetches == 2)
            }
        }
    }

    @Test func aBrokenJWKSFileRefusesTokensWithoutStoppingTheServer() async throws {
        try await Self.withKeys { directory, rsa, _ in
            try "{\"keys\": \"not a list\"}".write(toFile: "\(directory)/broken.json", atomically: true, encoding: .utf8)
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                configuration.apps["idp"] = Self.idpApp(.file(path: "\(directory)/broken.json"))
                var missing = Self.idpApp(.file(path: "\(directory)/missing.json"))
                missing.id = "idp2"
                configuration.apps["idp2"] = missing
            }) { env in
                let token = try TestTokens.make(.key(rsa), claims: TestTokens.claims())
                for app in ["idp", "idp2"] {
                    let reply = try await env.call(.POST, "/odata/applications/v1/\(app)/Connections",
                                                   headers: [("Authorization", "Bearer \(token)")], body: "{}")
                    #expect(reply.status == 401, "\(app)")
                    #expect(reply.errorMessage == "the identity provider's keys are not available to Midtier; try again later")
                }
                #expect(try await env.register(.alice).isEmpty == false, "the basic app still works")
            }
        }
    }
}

// MARK: - The authenticator itself, with clocks in hand

@Suite struct JWTAuthenticatorTests {
    static func authenticator(_ jwks: JWTAuthentication.KeySource, clocks: ManualClocks, userClaim: String = "sub",
                              httpClient: HTTPClient? = nil, capacity: Int = 10_000) -> JWTAuthenticator {
        JWTAuthenticator(settings: JWTAuthentication(issuer: TestTokens.issuer, audience: TestTokens.audience, jwks: jwks, userClaim: userClaim),
                         httpClient: httpClient, capacity: capacity, now: { clocks.wall }, uptime: { clocks.uptime })
    }

    static func withKeyFile(_ body: (_ directory: String, _ rsa: JWTTestKey, _ ec: JWTTestKey) async throws -> Void) async throws {
        try await JWTAuthenticationTests.withKeys(body)
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
            let claims = TestTokens.claims(now: clocks.wall) { $0["email"] = "alice@example.com"; $0["groups"] = ["payroll"]; $0["level"] = 3 }
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
                settings: JWTAuthentication(issuer: "https://idp.test/realms/K\u{E9}", audience: "app-K",
                                            jwks: .file(path: "\(directory)/jwks.json"), userClaim: "sub"),
                httpClient: nil, now: { clocks.wall }, uptime: { clocks.uptime })
            func token(iss: String, aud: Any) throws -> String {
                "Bearer " + (try TestTokens.make(.key(rsa), claims: TestTokens.claims(now: clocks.wall) { $0["iss"] = iss; $0["aud"] = aud }))
            }
            #expect("https://idp.test/realms/\u{212A}e\u{301}" == "https://idp.test/realms/K\u{E9}", "Swift's == calls them equal")
            #expect(try await authenticator.authenticate(authorization: token(iss: "https://idp.test/realms/K\u{E9}", aud: "app-K")).get().id == "alice")
            let kelvin = await authenticator.authenticate(authorization: try token(iss: "https://idp.test/realms/\u{212A}e\u{301}", aud: "app-K"))
            #expect(kelvin == .failure(.wrongIssuer(expected: "https://idp.test/realms/K\u{E9}")))
            let audience = await authenticator.authenticate(authorization: try token(iss: "https://idp.test/realms/K\u{E9}", aud: "app-\u{212A}"))
            #expect(audience == .failure(.wrongAudience(expected: "app-K")))
            let inList = await authenticator.authenticate(authorization: try token(iss: "https://idp.test/realms/K\u{E9}", aud: ["x", "app-\u{212A}"]))
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
            let confused = try TestTokens.make(.hmac(secret: rsa.publicKeyPEM, directory: directory), header: ["alg": "HS256", "kid": "rsa-1"], claims: claims)
            #expect(await check(confused) == .failure(.algorithmNotAccepted("HS256")))
            #expect(JWTAuthenticationFailure.algorithmNotAccepted("<script>").description.contains("<script>") == false)
            // A header that names its own key is ignored: only the JWKS is trusted.
            let stranger = try JWTTestKey.rsa("rsa-1", in: directory)
            let withJWK = try TestTokens.make(.key(stranger), header: ["alg": "RS256", "kid": "rsa-1", "jwk": stranger.jwk,
                                                                      "jku": "http://127.0.0.1:1/jwks"], claims: claims)
            #expect(await check(withJWK) == .failure(.signatureDoesNotVerify))
            let critical = try TestTokens.make(.key(rsa), header: ["alg": "RS256", "kid": "rsa-1", "crit": ["exp"]], claims: claims)
            #expect(await check(critical) == .failure(.malformedToken("its header has critical parameters (crit), which are not supported")))
            #expect(await check(try TestTokens.make(.key(rsa), claims: TestTokens.claims(now: clocks.wall) { $0["exp"] = "tomorrow" }))
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
                    let token = try TestTokens.make(.key(signer), header: ["alg": "RS256", "kid": kid ?? signer.kid],
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
