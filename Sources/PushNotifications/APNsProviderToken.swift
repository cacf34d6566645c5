import Foundation
import JWTKit

/// An app's APNs provider token (docs/push.md, "Tokens of the push services"): an ES256 JWT
/// (`iss` the team id, `kid` the key id, `iat` in whole seconds) signed with the app's `.p8`
/// key. Apple refuses one issued more than an hour ago (`ExpiredProviderToken`) and one renewed
/// more often than every 20 minutes (`TooManyProviderTokenUpdates`), so every request uses the
/// same token for 50 minutes, and a new one only when APNs calls the one in use expired; a
/// token is made once however many requests ask for it, or call it expired, at the same moment.
actor APNsProviderToken {
    static let lifetime = Duration.seconds(50 * 60)
    private let keys: JWTKeyCollection
    private let teamID: String
    private let keyID: String
    private var current: (value: String, madeAt: ContinuousClock.Instant)?
    /// The token being made, which those asking meanwhile wait for.
    private var making: Task<String, any Error>?

    /// Fails when the key does not load (the configuration loader checked it already).
    init(privateKeyPEM: String, teamID: String, keyID: String) async throws {
        let key = try ES256PrivateKey(pem: privateKeyPEM)
        keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: keyID))
        self.teamID = teamID
        self.keyID = keyID
    }

    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// The token for a request made at `now`: the current one while it is younger than
    /// `lifetime`, else a new one, issued at `issuedAt`.
    func value(at now: ContinuousClock.Instant, issuedAt: Date) async throws -> String {
        if let current, now - current.madeAt < Self.lifetime { return current.value }
        if let making { return try await making.value }
        // Whole seconds: APNs refuses an `iat` with a fraction.
        let claims = Claims(
            iss: IssuerClaim(value: teamID), iat: IssuedAtClaim(value: Date(timeIntervalSince1970: issuedAt.timeIntervalSince1970.rounded(.down))))
        let (keys, kid) = (keys, JWKIdentifier(string: keyID))
        let task = Task { try await keys.sign(claims, kid: kid) }
        making = task
        defer { making = nil }
        let value = try await task.value
        current = (value, now)
        return value
    }

    /// APNs called `refused` expired: the next request gets a new token — unless `refused` is no
    /// longer the one in use (another answer said so first, and a new one is made or being made).
    func expired(_ refused: String) {
        if current?.value == refused { current = nil }
    }
}
