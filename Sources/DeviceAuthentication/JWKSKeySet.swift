import Foundation
import JWTKit
import MidtierCore
import MidtierJSON

/// The two signature algorithms Midtier accepts on device tokens, each bound to one key type:
/// a token's `alg` must match the type of the key it names (no RSA/HMAC/EC confusion).
enum JWTSignatureAlgorithm: String, Sendable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256, on an RSA key (`kty` `RSA`) of at least 2048 bits.
    case rs256 = "RS256"
    /// ECDSA on P-256 with SHA-256, on an EC key (`kty` `EC`, `crv` `P-256`).
    case es256 = "ES256"
}

/// One verification key from a JWKS, with the one algorithm it is used with.
struct JWKSKey: Sendable {
    let kid: String?
    let algorithm: JWTSignatureAlgorithm
    /// jwt-kit's key collection holding this key alone (for exactly `algorithm`), made once
    /// when the set is loaded: it verifies a token's signature and decodes its claims.
    let collection: JWTKeyCollection

    /// The token's claims, if this key signed it.
    func verify(_ token: String) async -> DeviceClaims? {
        try? await collection.verify(token, as: DeviceClaims.self)
    }
}

/// Every claim of a device token, for the checks Midtier makes itself with its own messages
/// (issuer, audience, expiry, the user claim); jwt-kit has checked the signature by then.
struct DeviceClaims: JWTPayload {
    let claims: [String: JSON]

    init(from decoder: any Decoder) throws {
        claims = try decoder.singleValueContainer().decode([String: JSON].self)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(claims)
    }

    /// Nothing here: ``JWTAuthenticator`` checks the claims after the signature.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Why a JWKS cannot be used. For logs; devices only learn that keys are unavailable.
struct JWKSProblem: Error, Sendable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A JWKS (RFC 7517) reduced to the keys Midtier can verify device tokens with.
///
/// Parsing is lenient per key and strict per document: an IdP's set may carry keys for
/// encryption or for algorithms Midtier does not accept; those are skipped (and named in
/// `skipped`), while a document that is not a JWKS, that is not strict JSON (a member given
/// twice makes a key ambiguous), or that has no usable key, is a problem.
/// Private key members (`d`, …) are ignored: only the public part of a key is ever used.
struct JWKSKeySet: Sendable {
    let keys: [JWKSKey]
    /// One line per key that was left out, and why.
    let skipped: [String]

    /// Keys that carry `kid`.
    func keys(kid: String) -> [JWKSKey] { keys.filter { $0.kid == kid } }

    /// A JWKS document, checked and reduced. jwt-kit makes the verifiers (its key collection
    /// is an actor, hence `async`).
    static func parse(_ bytes: [UInt8]) async throws(JWKSProblem) -> JWKSKeySet {
        let candidates = try candidates(in: bytes)
        var keys: [JWKSKey] = []
        var skipped = candidates.skipped
        for candidate in candidates.usable {
            do {
                keys.append(try await candidate.makeKey())
            } catch {
                skipped.append("\(candidate.label): the key material does not load (\(Self.reason(error)))")
            }
        }
        guard !keys.isEmpty else {
            let detail = skipped.isEmpty ? "" : " (" + skipped.joined(separator: "; ") + ")"
            throw JWKSProblem("the JWKS has no usable RS256 or ES256 signing key\(detail)")
        }
        return JWKSKeySet(keys: keys, skipped: skipped)
    }

    /// A key as found in the document, before jwt-kit has made its verifier.
    struct Candidate: Sendable {
        enum Material: Sendable {
            case rsa(Insecure.RSA.PublicKey)
            case ec(ES256PublicKey)
        }
        let kid: String?
        let material: Material
        let label: String

        func makeKey() async throws -> JWKSKey {
            let collection = JWTKeyCollection()
            let handle = JWKIdentifier(string: "key")
            let algorithm: JWTSignatureAlgorithm
            switch material {
            case .rsa(let key):
                await collection.add(rsa: key, digestAlgorithm: .sha256, kid: handle)
                algorithm = .rs256
            case .ec(let key):
                await collection.add(ecdsa: key, kid: handle)
                algorithm = .es256
            }
            let verifier = try await collection.getKey(for: handle)
            guard verifier.name == algorithm.rawValue else {
                throw JWKSProblem("jwt-kit made a \(verifier.name) verifier for an \(algorithm.rawValue) key")
            }
            return JWKSKey(kid: kid, algorithm: algorithm, collection: collection)
        }
    }

    /// The document's keys, split into those worth making verifiers for and those skipped.
    /// Synchronous, so a configuration load can report a broken file at once.
    static func candidates(in bytes: [UInt8]) throws(JWKSProblem) -> (usable: [Candidate], skipped: [String]) {
        let members: [String: JSON]
        switch StrictJSON.object(bytes) {
        case .success(let object): members = object
        case .failure(let error): throw JWKSProblem("the JWKS is not a JSON object: \(error.message)")
        }
        guard case .array(let entries)? = members["keys"] else {
            throw JWKSProblem("the JWKS is not a JSON object with a \"keys\" array")
        }
        var usable: [Candidate] = []
        var skipped: [String] = []
        for (index, entry) in entries.enumerated() {
            guard let key = entry.members.map({ Dictionary($0.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first }) }) else {
                skipped.append("keys[\(index)]: not a JSON object")
                continue
            }
            let kid = key.string("kid")
            let label = kid.map { "key \"\($0)\"" } ?? "keys[\(index)] (no kid)"
            switch candidate(key, kid: kid) {
            case .success(let material): usable.append(Candidate(kid: kid, material: material, label: label))
            case .failure(let reason): skipped.append("\(label): \(reason.description)")
            }
        }
        return (usable, skipped)
    }

    private static func candidate(_ key: [String: JSON], kid: String?) -> Result<Candidate.Material, JWKSProblem> {
        if let use = key.string("use"), use != "sig" {
            return .failure(JWKSProblem("its use is \(use), not sig"))
        }
        if case .array(let operations)? = key["key_ops"], !operations.contains(.string("verify")) {
            return .failure(JWKSProblem("its key_ops do not include verify"))
        }
        let alg = key.string("alg")
        switch key.string("kty") {
        case "RSA":
            if let alg, alg != JWTSignatureAlgorithm.rs256.rawValue {
                return .failure(JWKSProblem("its alg is \(alg); only RS256 is accepted for RSA keys"))
            }
            guard let n = key.string("n"), let e = key.string("e") else {
                return .failure(JWKSProblem("an RSA key needs n and e"))
            }
            do {
                return .success(.rsa(try Insecure.RSA.PublicKey(modulus: n, exponent: e)))
            } catch {
                return .failure(JWKSProblem("the RSA key does not load (\(reason(error)))"))
            }
        case "EC":
            if let alg, alg != JWTSignatureAlgorithm.es256.rawValue {
                return .failure(JWKSProblem("its alg is \(alg); only ES256 is accepted for EC keys"))
            }
            guard key.string("crv") == "P-256" else {
                return .failure(JWKSProblem("its curve is \(key.string("crv") ?? "missing"); only P-256 (ES256) is accepted"))
            }
            guard let x = key.string("x"), let y = key.string("y") else {
                return .failure(JWKSProblem("an EC key needs x and y"))
            }
            do {
                return .success(.ec(try ES256PublicKey(parameters: (x: x, y: y))))
            } catch {
                return .failure(JWKSProblem("the EC key does not load (\(reason(error)))"))
            }
        case let other:
            return .failure(JWKSProblem("its kty is \(other ?? "missing"); only RSA and EC keys are accepted"))
        }
    }

    /// A short reason from a jwt-kit or swift-crypto error.
    static func reason(_ error: any Error) -> String {
        if let error = error as? JWTError { return error.reason ?? error.errorType.description }
        return String(describing: error)
    }
}

extension [String: JSON] {
    func string(_ key: String) -> String? {
        if case .string(let value)? = self[key] { value } else { nil }
    }
}
