package import AsyncHTTPClient
import Dispatch
import Foundation
import JWTKit
package import MidtierCore
import MidtierJSON
import RequestTracing
import Synchronization

/// Why a bearer token was not accepted. The messages are safe for a 401 body: they name the
/// app's configured issuer, audience and user claim, never anything taken from the token
/// except an algorithm name of plain letters and digits.
package enum JWTAuthenticationFailure: Error, Sendable, Equatable, CustomStringConvertible {
    case missingToken
    case malformedHeader
    case malformedToken(String)
    /// `alg` is not RS256 or ES256 (`none`, `HS256`, …): the algorithm as the token names it.
    case algorithmNotAccepted(String)
    /// The token's `kid` names a key of another type than its `alg` needs.
    case algorithmDoesNotMatchKey(String)
    case unknownKey
    case signatureDoesNotVerify
    case missingExpiry
    case expired
    case notYetValid
    case wrongIssuer(expected: String)
    case wrongAudience(expected: String)
    case missingUserClaim(String)
    /// The `userClaim` has control characters, which no stored user id may have
    /// (docs/identity.md, "Stored text"): the claim's name.
    case userClaimHasControlCharacters(String)
    case keysUnavailable

    package var description: String {
        switch self {
        case .missingToken: "no bearer token was sent"
        case .malformedHeader: "the Authorization header is malformed: expected the Bearer scheme and a token"
        case .malformedToken(let detail): "the token is malformed: \(detail)"
        case .algorithmNotAccepted(let alg): "the token uses alg \(Self.printable(alg)), which is not accepted (only RS256 and ES256 are)"
        case .algorithmDoesNotMatchKey(let alg): "the token's alg \(alg) does not match the type of the key it names"
        case .unknownKey: "the token's signing key is not one of the identity provider's keys"
        case .signatureDoesNotVerify: "the token's signature does not verify"
        case .missingExpiry: "the token has no exp claim"
        case .expired: "the token has expired"
        case .notYetValid: "the token is not valid yet (nbf)"
        case .wrongIssuer(let expected): "the token's issuer is not \(expected)"
        case .wrongAudience(let expected): "the token's audience is not \(expected)"
        case .missingUserClaim(let claim): "the token has no \(claim) claim naming the user"
        case .userClaimHasControlCharacters(let claim): "the token's \(claim) claim contains control characters, which a user id cannot have"
        case .keysUnavailable: "the identity provider's keys are not available to Midtier; try again later"
        }
    }

    /// An algorithm name as the token gave it, if it is short plain text; otherwise a stand-in.
    static func printable(_ alg: String) -> String {
        alg.count <= 16 && alg.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
            ? alg : "(an unknown algorithm)"
    }
}

/// Bearer JWT device authentication for one app (docs/configuration.md, "JWT authentication").
///
/// A token is accepted when it is a JWS compact token signed with RS256 or ES256 by a key of
/// the app's JWKS (the key named by `kid`, of the type `alg` needs; `none`, `HS*` and all other
/// algorithms are refused before any key is touched), its `iss` is the configured issuer, its
/// `aud` is or contains the configured audience, `exp` is present and not past and `nbf` (if
/// present) not ahead, each with `clockSkewSeconds` of tolerance, and it has the `userClaim` as
/// a string without control characters (docs/identity.md, "Stored text"). The user's
/// attributes are the token's string claims, so a destination's `userIdSource` can name one
/// (`sfUserId`). Header members that point at other keys (`jku`, `x5u`, `jwk`, `x5c`) are
/// ignored: only the configured JWKS is trusted.
///
/// Verified tokens are remembered for at most `cacheSeconds` and never past their `exp`,
/// keyed by an HMAC of the token under a per-process key, so the hot path does not verify a
/// signature per request. Failures are not remembered.
package final class JWTAuthenticator: Sendable {
    private struct CachedToken {
        let user: AuthenticatedUser
        /// The token's `exp` (seconds since 1970).
        let expiresAt: Double
        /// Uptime (ns) after which the entry is verified again.
        let until: UInt64
    }

    package let settings: JWTAuthentication
    let source: JWKSSource
    private let cacheNanoseconds: UInt64
    private let capacity: Int
    private let digester = KeyedDigester()
    private let cache = Mutex<[CredentialDigest: CachedToken]>([:])
    private let now: @Sendable () -> Double
    private let uptime: @Sendable () -> UInt64
    /// How many tokens had their signature checked (cache misses that got that far): for
    /// tests (`@testable`).
    let signatureChecks = Atomic<Int>(0)

    package static let clockSkewSeconds: Double = 60
    static let maximumTokenBytes = 16 * 1024
    /// At most this many keys are tried for a token without `kid`.
    static let maximumKeysWithoutKid = 8

    /// - Parameters:
    ///   - httpClient: fetches a JWKS `url` (unused for a `file`).
    ///   - now: wall-clock seconds since 1970, for `exp` and `nbf`.
    ///   - uptime: a monotonic clock in nanoseconds, for the token cache and JWKS refreshes.
    ///   - log: JWKS loads and problems, for the server's log (never a token).
    package init(
        settings: JWTAuthentication, httpClient: HTTPClient?,
        cacheSeconds: Int = 60, capacity: Int = 10_000,
        refreshSeconds: Int = 300, unknownKidIntervalSeconds: Int = 30,
        now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
        uptime: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds },
        log: @escaping @Sendable (JWKSLogLevel, String) -> Void = { _, _ in }
    ) {
        self.settings = settings
        self.cacheNanoseconds = UInt64(max(0, cacheSeconds)) * 1_000_000_000
        self.capacity = max(1, capacity)
        self.now = now
        self.uptime = uptime
        let origin: JWKSSource.Origin
        switch settings.jwks {
        case .file(let path):
            do {
                origin = .file(path: path, bytes: .success(Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
            } catch {
                origin = .file(path: path, bytes: .failure(JWKSProblem("cannot read the file: \(error.localizedDescription)")))
            }
        case .url(let url):
            origin = .url(url)
        }
        self.source = JWKSSource(
            origin: origin, httpClient: httpClient, refreshSeconds: refreshSeconds,
            unknownKidIntervalSeconds: unknownKidIntervalSeconds, uptime: uptime, log: log)
    }

    /// How many times the JWKS was loaded (fetched, for a URL) so far: for tests (`@testable`).
    var keySetLoads: Int { source.loads }

    /// Verifies an `Authorization: Bearer …` header value.
    package func authenticate(authorization: String?) async -> Result<AuthenticatedUser, JWTAuthenticationFailure> {
        guard let authorization, !authorization.isEmpty else { return .failure(.missingToken) }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return .failure(.malformedHeader) }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty else { return .failure(.malformedHeader) }
        guard token.utf8.count <= Self.maximumTokenBytes else {
            return .failure(.malformedToken("it is longer than \(Self.maximumTokenBytes) bytes"))
        }

        let digest = digester.digest([token])
        let wallNow = now()
        let upNow = uptime()
        if let cached = cache.withLock({ $0[digest] }), upNow < cached.until, wallNow < cached.expiresAt {
            RequestTrace.currentSpan.set("midtier.credential", "remembered")
            return .success(cached.user)
        }
        RequestTrace.currentSpan.set("midtier.credential", "verified")
        switch await verify(token, at: wallNow) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let (user, expiresAt)):
            remember(digest, CachedToken(user: user, expiresAt: expiresAt, until: upNow + cacheNanoseconds))
            return .success(user)
        }
    }

    /// The `iss` a bearer token claims, before anything is verified: only for choosing which
    /// authenticators to ask, never for trusting it.
    package static func claimedIssuer(authorization: String?) -> String? {
        guard let authorization else { return nil }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        guard token.utf8.count <= maximumTokenBytes,
            let claims = try? DefaultJWTParser().parse(Array(token.utf8), as: DeviceClaims.self).payload.claims
        else { return nil }
        return claims.string("iss")
    }

    private func verify(_ token: String, at now: Double) async -> Result<(AuthenticatedUser, Double), JWTAuthenticationFailure> {
        // The token's shape, in words a device's developer can act on; jwt-kit reads it after.
        let segments = token.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3 else {
            return .failure(.malformedToken(segments.count == 5 ? "it is encrypted (JWE), not signed" : "it is not a JWT of three base64url parts"))
        }
        guard segments.allSatisfy(Self.isBase64URL) else { return .failure(.malformedToken("its parts are not base64url")) }
        // The header, read (not trusted) to choose the key; the claims are read only once a
        // key has verified the signature.
        let header: JWTHeader
        do {
            header = try DefaultJWTParser().parse(Array(token.utf8), as: DeviceClaims.self).header
        } catch {
            return .failure(.malformedToken("its header or claims are not a JSON object"))
        }

        // The algorithm decides the key type, before any key is looked at.
        guard let alg = header.alg else { return .failure(.malformedToken("its header has no alg")) }
        guard let algorithm = JWTSignatureAlgorithm(rawValue: alg) else { return .failure(.algorithmNotAccepted(alg)) }
        if header.fields["crit"] != nil {
            return .failure(.malformedToken("its header has critical parameters (crit), which are not supported"))
        }
        guard header.fields["kid"] == nil || header.kid != nil else { return .failure(.malformedToken("its kid is not a string")) }
        let kid = header.kid

        // The key: by kid (fetching the set again, within limits, for a kid it lacks), else
        // every key of the right type.
        guard var keys = await source.keys() else { return .failure(.keysUnavailable) }
        let candidates: [JWKSKey]
        if let kid {
            if keys.keys(kid: kid).isEmpty, let refreshed = await source.keysAfterUnknownKid() { keys = refreshed }
            let named = keys.keys(kid: kid)
            guard !named.isEmpty else { return .failure(.unknownKey) }
            candidates = named.filter { $0.algorithm == algorithm }
            guard !candidates.isEmpty else { return .failure(.algorithmDoesNotMatchKey(alg)) }
        } else {
            candidates = Array(keys.keys.filter { $0.algorithm == algorithm }.prefix(Self.maximumKeysWithoutKid))
            guard !candidates.isEmpty else { return .failure(.unknownKey) }
        }
        signatureChecks.add(1, ordering: .relaxed)
        var verified: DeviceClaims?
        for candidate in candidates {
            verified = await candidate.verify(token)
            if verified != nil { break }
        }
        guard let claims = verified?.claims else { return .failure(.signatureDoesNotVerify) }

        // The claims, only now that they are known to come from the IdP.
        // By bytes, as every identity (docs/identity.md): the issuer is the user's realm.
        guard let issuer = claims.string("iss"), UserIdentity.sameBytes(issuer, settings.issuer) else {
            return .failure(.wrongIssuer(expected: settings.issuer))
        }
        let isOurs: (JSON) -> Bool = { value in
            if case .string(let audience) = value { UserIdentity.sameBytes(audience, self.settings.audience) } else { false }
        }
        switch claims["aud"] {
        case let audience? where isOurs(audience): break
        case .array(let audiences)? where audiences.contains(where: isOurs): break
        default: return .failure(.wrongAudience(expected: settings.audience))
        }
        let expiresAt: Double
        switch claims["exp"] {
        case nil, .null?: return .failure(.missingExpiry)
        case let exp? where exp.doubleValue != nil: expiresAt = exp.doubleValue ?? 0
        case _?: return .failure(.malformedToken("its exp is not a number"))
        }
        guard now < expiresAt + Self.clockSkewSeconds else { return .failure(.expired) }
        switch claims["nbf"] {
        case nil, .null?: break
        case let notBefore? where notBefore.doubleValue != nil:
            guard now + Self.clockSkewSeconds >= notBefore.doubleValue ?? 0 else { return .failure(.notYetValid) }
        case _?: return .failure(.malformedToken("its nbf is not a number"))
        }
        guard let userID = claims.string(settings.userClaim), !userID.isEmpty else {
            return .failure(.missingUserClaim(settings.userClaim))
        }
        guard !StoredText.hasControlCharacters(userID) else { return .failure(.userClaimHasControlCharacters(settings.userClaim)) }
        var attributes: [String: String] = [:]
        for (name, value) in claims {
            if case .string(let text) = value { attributes[name] = text }
        }
        // The realm is the issuer (docs/identity.md): `alice` of this IdP is not `alice` of
        // users.json nor of another IdP.
        let user = AuthenticatedUser(identity: UserIdentity(realm: settings.issuer, id: userID), attributes: attributes, expiresAt: expiresAt)
        return .success((user, expiresAt))
    }

    private func remember(_ digest: CredentialDigest, _ entry: CachedToken) {
        guard cacheNanoseconds > 0 else { return }
        let wallNow = now(), upNow = uptime()
        cache.withLock { cache in
            if cache.count >= capacity {
                cache = cache.filter { upNow < $0.value.until && wallNow < $0.value.expiresAt }
                if cache.count >= capacity { cache.removeAll() }
            }
            cache[digest] = entry
        }
    }
}

extension JWTAuthenticator {
    /// Whether a token part is base64url without padding (RFC 7515 §2), jwt-kit decodes it.
    static func isBase64URL(_ part: Substring) -> Bool {
        part.utf8.count % 4 != 1
            && part.utf8.allSatisfy { byte in
                (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == 0x2D || byte == 0x5F
            }
    }
}
