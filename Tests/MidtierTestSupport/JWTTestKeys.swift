import Foundation
package import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

// MARK: - Keys and tokens, made with the openssl command line (independent of jwt-kit)

/// A signing key made by `openssl` for one test, with its public JWK.
package struct JWTTestKey: Sendable {
    package enum Kind: Sendable { case rsa, ec }
    package let kind: Kind
    package let kid: String
    package let keyPath: String
    package let directory: String
    /// The public key as a JWK (`kty`, `kid`, `n`/`e` or `crv`/`x`/`y`).
    package let jwk: [String: String]
    /// The public key in PEM, the bytes an HS/RS confusion attack uses as the HMAC secret.
    package let publicKeyPEM: [UInt8]
    /// The JWS algorithm this key signs with.
    package var alg: String { kind == .rsa ? "RS256" : "ES256" }

    package static func rsa(_ kid: String, in directory: String, bits: Int = 2048) throws -> JWTTestKey {
        let path = "\(directory)/\(UUID().uuidString).key"
        try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(bits)", "-out", path])
        let modulus = try openssl(["rsa", "-in", path, "-noout", "-modulus"])
        guard let hex = modulus.split(separator: "=").last?.trimmingCharacters(in: .whitespacesAndNewlines) else {
            throw TestFailure("no modulus in \(modulus)")
        }
        let pem = try publicKey(of: path, der: false)
        return JWTTestKey(
            kind: .rsa, kid: kid, keyPath: path, directory: directory,
            jwk: ["kty": "RSA", "kid": kid, "n": base64URL(bytes(hex: hex)), "e": "AQAB"], publicKeyPEM: pem)
    }

    package static func ec(_ kid: String, in directory: String, curve: String = "P-256") throws -> JWTTestKey {
        let path = "\(directory)/\(UUID().uuidString).key"
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:\(curve)", "-out", path])
        let size = curve == "P-256" ? 32 : 48
        // The DER SubjectPublicKeyInfo ends with the uncompressed point 04 || x || y.
        let point = Array(try publicKey(of: path, der: true).suffix(1 + 2 * size))
        return JWTTestKey(
            kind: .ec, kid: kid, keyPath: path, directory: directory,
            jwk: [
                "kty": "EC", "kid": kid, "crv": curve,
                "x": base64URL(Array(point[1...size])), "y": base64URL(Array(point[(size + 1)...])),
            ],
            publicKeyPEM: try publicKey(of: path, der: false))
    }

    /// A JWS signature over `input`: PKCS#1 v1.5 for RSA, raw `r || s` for EC (RFC 7518 §3.4).
    package func sign(_ input: [UInt8]) throws -> [UInt8] {
        let signature = try Self.opensslFile(input, in: directory) { input, output in
            ["dgst", "-sha256", "-sign", keyPath, "-out", output, input]
        }
        return kind == .rsa ? signature : try Self.rawECDSA(signature, size: jwk["crv"] == "P-256" ? 32 : 48)
    }

    package static func hmacSHA256(_ input: [UInt8], secret: [UInt8], in directory: String) throws -> [UInt8] {
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
    package static func rawECDSA(_ der: [UInt8], size: Int) throws -> [UInt8] {
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

    package static func bytes(hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var iterator = hex.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            result.append(UInt8(String([high, low]), radix: 16)!)
        }
        return result
    }
}

package func base64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A JWKS document with `keys`.
package func jwksDocument(_ keys: [[String: String]]) -> String {
    let data = try! JSONSerialization.data(withJSONObject: ["keys": keys], options: [.sortedKeys])
    return String(decoding: data, as: UTF8.self)
}

/// How a test token is signed.
package enum TestSigning {
    case key(JWTTestKey)
    case hmac(secret: [UInt8], directory: String)
    case unsigned
}

package enum TestTokens {
    package static let issuer = "https://idp.test/realms/company"
    package static let audience = "midtier-app"

    /// Claims of a valid token for `sub` (mapped to SuccessFactors by `sfUserId`), changed by `adjust`.
    package static func claims(
        sub: String = "alice", sfUserId: String = "100001", now: Double = Date().timeIntervalSince1970,
        _ adjust: (inout [String: Any]) -> Void = { _ in }
    ) -> [String: Any] {
        var claims: [String: Any] = [
            "iss": issuer, "aud": audience, "sub": sub, "sfUserId": sfUserId,
            "iat": Int(now), "exp": Int(now) + 600, "jti": UUID().uuidString,
        ]
        adjust(&claims)
        return claims
    }

    /// A compact JWS. `header` defaults to the key's `alg` and `kid`.
    package static func make(_ signing: TestSigning, header: [String: Any]? = nil, claims: [String: Any]) throws -> String {
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
package final class JWKSServer: Sendable {
    private struct State {
        var document: String
        var fetches = 0
        var status: HTTPResponse.Status = .ok
        var delayMilliseconds = 0
    }
    private let state: Mutex<State>

    package init(document: String) { state = Mutex(State(document: document)) }

    package var fetches: Int { state.withLock { $0.fetches } }
    package func serve(_ document: String) { state.withLock { $0.document = document } }
    package func fail(with status: HTTPResponse.Status) { state.withLock { $0.status = status } }
    package func delay(milliseconds: Int) { state.withLock { $0.delayMilliseconds = milliseconds } }

    /// Runs the server on a loopback port for `body`, which gets the JWKS URL.
    package func run(_ body: (String) async throws -> Void) async throws {
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
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
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
package final class ManualClocks: Sendable {
    private let state: Mutex<(wall: Double, uptime: UInt64)>
    package init(wall: Double = Date().timeIntervalSince1970) { state = Mutex((wall, 1_000_000_000)) }
    package var wall: Double { state.withLock { $0.wall } }
    package var uptime: UInt64 { state.withLock { $0.uptime } }
    package func advance(seconds: Double) {
        state.withLock {
            $0.wall += seconds; $0.uptime += UInt64(seconds * 1_000_000_000)
        }
    }
    /// Moves only the monotonic clock (cache lifetime and JWKS timing), not token time.
    package func advanceUptime(seconds: Double) { state.withLock { $0.uptime += UInt64(seconds * 1_000_000_000) } }
}

/// Keys and a JWKS file (`jwks.json`, both keys) in a fresh directory, for `body`.
package func withJWTTestKeys(_ body: (_ directory: String, _ rsa: JWTTestKey, _ ec: JWTTestKey) async throws -> Void) async throws {
    let directory = try makeTemporaryDirectory()
    defer { removeTemporaryDirectory(directory) }
    let rsa = try JWTTestKey.rsa("rsa-1", in: directory)
    let ec = try JWTTestKey.ec("ec-1", in: directory)
    try jwksDocument([rsa.jwk, ec.jwk]).write(toFile: "\(directory)/jwks.json", atomically: true, encoding: .utf8)
    try await body(directory, rsa, ec)
}
