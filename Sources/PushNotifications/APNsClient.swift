package import AsyncHTTPClient
import Foundation
import JWTKit
package import MidtierCore
import MidtierJSON
import NIOCore
import NIOHTTP1
import Synchronization

/// Sends notifications to Apple's push service over HTTP/2 with token authentication
/// (docs/push.md, "APNs"): an ES256 JWT (`iss` the team, `kid` the key) made from the app's
/// `.p8` key, reused for 50 minutes (Apple refuses one older than an hour and one renewed more
/// often than every 20 minutes) and renewed early when APNs calls it expired or invalid.
package final class APNsClient: Sendable {
    package let settings: APNsSettings
    private let httpClient: HTTPClient
    private let keys: JWTKeyCollection
    private let providerToken = Mutex<(value: String, madeAt: ContinuousClock.Instant)?>(nil)
    static let tokenLifetime = Duration.seconds(50 * 60)
    static let timeout = TimeAmount.seconds(30)

    /// Fails when the key does not load (the configuration loader checked it already).
    package init(settings: APNsSettings, httpClient: HTTPClient) async throws {
        self.settings = settings
        self.httpClient = httpClient
        let key = try ES256PrivateKey(pem: settings.privateKeyPEM)
        keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: settings.keyID))
    }

    struct ProviderClaims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// The provider token, made anew when older than 50 minutes or when `renew` is set.
    private func token(renew: Bool) async throws -> String {
        let now = ContinuousClock.now
        if !renew, let current = providerToken.withLock({ $0 }), now - current.madeAt < Self.tokenLifetime { return current.value }
        // Whole seconds: APNs refuses an `iat` with a fraction.
        let claims = ProviderClaims(
            iss: IssuerClaim(value: settings.teamID),
            iat: IssuedAtClaim(value: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))))
        let value = try await keys.sign(claims, kid: JWKIdentifier(string: settings.keyID))
        providerToken.withLock { $0 = (value, now) }
        return value
    }

    /// Sends `request` to the device with `deviceToken`.
    package func send(_ request: APNsRequest, to deviceToken: String) async -> PushAttemptResult {
        guard !deviceToken.isEmpty, deviceToken.utf8.allSatisfy(Self.isHexDigit) else {
            return .tokenGone(reason: "APNs BadDeviceToken (not hexadecimal)")
        }
        let authorization: String
        do {
            authorization = "bearer " + (try await token(renew: false))
        } catch {
            return .refused(reason: "the APNs key cannot sign a provider token")
        }
        var http = HTTPClientRequest(url: "\(settings.endpoint)/3/device/\(deviceToken)")
        http.method = .POST
        http.headers.add(name: "authorization", value: authorization)
        http.headers.add(name: "apns-topic", value: settings.topic)
        http.headers.add(name: "apns-push-type", value: request.pushType)
        http.headers.add(name: "apns-priority", value: String(request.priority))
        if let expiration = request.expiration { http.headers.add(name: "apns-expiration", value: String(expiration)) }
        // A notification sent twice (an answer lost with its connection, then a retry) shows
        // once: the phone shows notifications with the same collapse id as one.
        http.headers.add(name: "apns-collapse-id", value: request.collapseID)
        http.headers.add(name: "content-type", value: "application/json")
        http.body = .bytes(ByteBuffer(string: request.payload))
        let status: Int, body: ByteBuffer, retryAfter: String?
        do {
            let response = try await PushConnectionEnds.execute(http, with: httpClient, deadline: .now() + Self.timeout)
            status = Int(response.status.code)
            retryAfter = response.headers.first(name: "retry-after")
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch {
            return .retry(after: nil, reason: "APNs unreachable")
        }
        let reason = reasonCode(StrictJSON.object(Array(buffer: body)).map { $0["reason"]?.stringValue }.get(or: nil))
        let described = "APNs \(status)" + (reason.isEmpty ? "" : " \(reason)")
        switch (status, reason) {
        case (200, _): return .delivered
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"): return .tokenGone(reason: described)
        case (403, "ExpiredProviderToken"):
            // Made anew for the next attempt.
            _ = try? await token(renew: true)
            return .retry(after: 1, reason: described)
        case (429, _), (500...599, _): return .retry(after: retryAfterSeconds(retryAfter), reason: described)
        default: return .refused(reason: described)
        }
    }
}

extension APNsClient {
    /// APNs device tokens are hexadecimal; anything else could not be a path segment safely.
    static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }
}

extension Result {
    /// The success value, or `fallback` on failure.
    func get(or fallback: Success) -> Success {
        (try? get()) ?? fallback
    }
}
