package import AsyncHTTPClient
import Foundation
package import MidtierCore
import MidtierJSON
import NIOCore
import NIOHTTP1

/// Sends notifications to Apple's push service over HTTP/2 with token authentication
/// (docs/push.md, "APNs"): the app's provider token (`APNsProviderToken`), renewed when APNs
/// calls it expired.
package final class APNsClient: Sendable {
    package let settings: APNsSettings
    private let httpClient: HTTPClient
    private let providerToken: APNsProviderToken
    static let timeout = TimeAmount.seconds(30)

    /// Fails when the key does not load (the configuration loader checked it already).
    package init(settings: APNsSettings, httpClient: HTTPClient) async throws {
        self.settings = settings
        self.httpClient = httpClient
        providerToken = try await APNsProviderToken(privateKeyPEM: settings.privateKeyPEM, teamID: settings.teamID, keyID: settings.keyID)
    }

    /// Sends `request` to the device with `deviceToken`, if `stillWanted` says yes when the
    /// body is to go (`PushRequestBody`).
    package func send(
        _ request: APNsRequest, to deviceToken: String, stillWanted: @escaping @Sendable () async -> Bool = { true }
    ) async -> PushAttemptResult {
        guard !deviceToken.isEmpty, deviceToken.utf8.allSatisfy(Self.isHexDigit) else {
            return .tokenGone(reason: "APNs BadDeviceToken (not hexadecimal)")
        }
        let token: String
        do {
            token = try await providerToken.value(at: .now, issuedAt: Date())
        } catch {
            return .refused(reason: "the APNs key cannot sign a provider token")
        }
        var http = HTTPClientRequest(url: "\(settings.endpoint)/3/device/\(deviceToken)")
        http.method = .POST
        http.headers.add(name: "authorization", value: "bearer " + token)
        http.headers.add(name: "apns-topic", value: settings.topic)
        http.headers.add(name: "apns-push-type", value: request.pushType)
        http.headers.add(name: "apns-priority", value: String(request.priority))
        if let expiration = request.expiration { http.headers.add(name: "apns-expiration", value: String(expiration)) }
        // A notification sent twice (an answer lost with its connection, then a retry) shows
        // once: the phone shows notifications with the same collapse id as one.
        http.headers.add(name: "apns-collapse-id", value: request.collapseID)
        http.headers.add(name: "content-type", value: "application/json")
        http.body = PushRequestBody(bytes: ByteBuffer(string: request.payload), stillWanted: stillWanted).body
        let status: Int, body: ByteBuffer, retryAfter: String?
        do {
            let response = try await PushConnectionEnds.execute(http, with: httpClient, deadline: .now() + Self.timeout)
            status = Int(response.status.code)
            retryAfter = response.headers.first(name: "retry-after")
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch is PushSendWithdrawn {
            return .withdrawn
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
            await providerToken.expired(token)
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
