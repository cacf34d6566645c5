package import AsyncHTTPClient
import Foundation
import JWTKit
package import MidtierCore
package import MidtierJSON
import NIOCore
import NIOHTTP1

/// Sends notifications through Firebase Cloud Messaging's HTTP v1 API (docs/push.md, "FCM"),
/// authenticated as the app's service account: an RS256 JWT exchanged at the account's token
/// URI for an access token, which is kept until a minute before it expires (`keptFor`) and
/// shared by every message (one exchange at a time).
package actor FCMClient {
    package let settings: FCMSettings
    private let httpClient: HTTPClient
    private let keys: JWTKeyCollection
    private var accessToken: (value: String, expiresAt: ContinuousClock.Instant)?
    private var fetching: Task<String, any Error>?
    static let timeout = TimeAmount.seconds(30)
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    package init(settings: FCMSettings, httpClient: HTTPClient) async throws {
        self.settings = settings
        self.httpClient = httpClient
        keys = await JWTKeyCollection().add(rsa: try Insecure.RSA.PrivateKey(pem: settings.privateKeyPEM), digestAlgorithm: .sha256)
    }

    struct AssertionClaims: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// The token URI refused the service account (`4xx`: the account, its key or the token
    /// URI is wrong, which another attempt does not mend) or did not answer usably (`5xx`).
    struct TokenRefused: Error {
        var reason: String
        var permanent: Bool
    }

    /// The access token, fetched when there is none or it is about to expire.
    private func token() async throws -> String {
        if let accessToken, ContinuousClock.now < accessToken.expiresAt { return accessToken.value }
        if let fetching { return try await fetching.value }
        let task = Task { try await self.fetchToken() }
        fetching = task
        defer { fetching = nil }
        return try await task.value
    }

    private func fetchToken() async throws -> String {
        // Whole seconds: Google refuses an `iat` or `exp` with a fraction.
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let claims = AssertionClaims(
            iss: IssuerClaim(value: settings.clientEmail), scope: Self.scope, aud: AudienceClaim(value: settings.tokenURI),
            iat: IssuedAtClaim(value: now), exp: ExpirationClaim(value: now.addingTimeInterval(3600)))
        let assertion = try await keys.sign(claims)
        var request = HTTPClientRequest(url: settings.tokenURI)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"))
        // The token's life is counted from before it was asked for: never longer than Google counts it.
        let askedAt = ContinuousClock.now
        let response = try await PushConnectionEnds.execute(request, with: httpClient, deadline: .now() + Self.timeout)
        let body = try await response.body.collect(upTo: 64 * 1024)
        let answer = StrictJSON.object(Array(buffer: body)).get(or: [:])
        guard response.status == .ok, let value = answer["access_token"]?.stringValue, !value.isEmpty,
            value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else {
            throw TokenRefused(
                reason: "FCM token exchange \(response.status.code) \(reasonCode(answer["error"]?.stringValue))",
                permanent: (400..<500).contains(Int(response.status.code)) && response.status.code != 429)
        }
        accessToken = (value, askedAt + Self.keptFor(expiresIn: answer["expires_in"]?.doubleValue))
        return value
    }

    /// How long an access token is used: until a minute before it expires (`expires_in`
    /// seconds after it was asked for; an hour when the answer does not say), or a tenth of its
    /// life before for one shorter than ten minutes — not for no time at all, which would fetch
    /// a token for every message.
    static func keptFor(expiresIn: Double?) -> Duration {
        let seconds = expiresIn.flatMap { $0.isFinite ? min(max($0, 1), 86_400) : nil } ?? 3600
        let lifetime = Duration.milliseconds(Int64((seconds * 1000).rounded(.down)))
        return lifetime - min(.seconds(60), lifetime / 10)
    }

    /// Sends `message` (FCM's `{"message":…}`), if `stillWanted` says yes when the body is to
    /// go (`PushRequestBody`): after the access token and the connection are ready.
    package func send(_ message: JSON, stillWanted: @escaping @Sendable () async -> Bool = { true }) async -> PushAttemptResult {
        let bearer: String
        do {
            bearer = try await token()
        } catch let refused as TokenRefused {
            return refused.permanent ? .refused(reason: refused.reason) : .retry(after: nil, reason: refused.reason)
        } catch {
            return .retry(after: nil, reason: "FCM token exchange failed")
        }
        var request = HTTPClientRequest(url: "\(settings.endpoint)/v1/projects/\(settings.projectID)/messages:send")
        request.method = .POST
        request.headers.add(name: "authorization", value: "Bearer \(bearer)")
        request.headers.add(name: "content-type", value: "application/json")
        request.body = PushRequestBody(bytes: ByteBuffer(string: message.serialized()), stillWanted: stillWanted).body
        let status: Int, body: ByteBuffer, retryAfter: String?
        do {
            let response = try await PushConnectionEnds.execute(request, with: httpClient, deadline: .now() + Self.timeout)
            status = Int(response.status.code)
            retryAfter = response.headers.first(name: "retry-after")
            body = try await response.body.collect(upTo: 64 * 1024)
        } catch is PushSendWithdrawn {
            return .withdrawn
        } catch {
            return .retry(after: nil, reason: "FCM unreachable")
        }
        let error = StrictJSON.object(Array(buffer: body)).get(or: [:])["error"]
        let errorCode: String? = {
            guard case .array(let details)? = error?["details"] else { return nil }
            return details.lazy.compactMap { $0["errorCode"]?.stringValue }.first
        }()
        let code = reasonCode(errorCode ?? error?["status"]?.stringValue)
        let described = "FCM \(status)" + (code.isEmpty ? "" : " \(code)")
        switch (status, code) {
        case (200, _): return .delivered
        // Only FCM's own word clears a token: a 404 without it is a wrong endpoint or project,
        // which must not clear every Android token of the app.
        case (_, "UNREGISTERED"): return .tokenGone(reason: described)
        case (401, _):
            // This request's token was refused: the next fetches another — unless one came
            // since, which stays (a refusal of an older token says nothing of it).
            if accessToken?.value == bearer { accessToken = nil }
            return .retry(after: 0, reason: described)
        case (429, _), (500...599, _): return .retry(after: retryAfterSeconds(retryAfter), reason: described)
        default: return .refused(reason: described)
        }
    }
}
