// Push notifications (docs/push.md): how an app's notifications reach Apple's and Google's
// push services, and which back-end senders may send them.

/// An app's push services (`push` in `config/apps/<appId>.json`). Neither set: the app has no
/// push, and its senders' calls are refused.
package struct PushSettings: Sendable {
    package var apns: APNsSettings?
    package var fcm: FCMSettings?

    package init(apns: APNsSettings? = nil, fcm: FCMSettings? = nil) {
        self.apns = apns
        self.fcm = fcm
    }

    package var isEnabled: Bool { apns != nil || fcm != nil }
}

/// Apple Push Notification service with token authentication (an ES256 JWT signed by the
/// team's `.p8` key).
package struct APNsSettings: Sendable {
    package enum Environment: String, Sendable, CaseIterable {
        case production, sandbox

        /// Apple's endpoint for the environment.
        package var endpoint: String {
            switch self {
            case .production: "https://api.push.apple.com"
            case .sandbox: "https://api.sandbox.push.apple.com"
            }
        }
    }

    package var teamID: String
    package var keyID: String
    /// The `.p8` key's PEM text (PKCS#8, P-256): a secret.
    package var privateKeyPEM: String
    /// `apns-topic`: the app's bundle id.
    package var topic: String
    package var environment: Environment
    /// Where notifications are posted (`https://host[:port]`, no path): the environment's
    /// endpoint unless the file names another (a stand-in in tests).
    package var endpoint: String
    /// A PEM file of certificates to trust for `endpoint` besides the system's (a stand-in's
    /// own CA in tests); nil for the system's roots only.
    package var caFile: String?

    package init(
        teamID: String, keyID: String, privateKeyPEM: String, topic: String, environment: Environment,
        endpoint: String? = nil, caFile: String? = nil
    ) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyPEM = privateKeyPEM
        self.topic = topic
        self.environment = environment
        self.endpoint = endpoint ?? environment.endpoint
        self.caFile = caFile
    }
}

/// Firebase Cloud Messaging, HTTP v1 API, authenticated as a Google service account (an RS256
/// JWT exchanged for an OAuth access token).
package struct FCMSettings: Sendable {
    package static let defaultEndpoint = "https://fcm.googleapis.com"
    package static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    package var projectID: String
    /// The service account's `client_email`.
    package var clientEmail: String
    /// The service account's `private_key` PEM text (RSA): a secret.
    package var privateKeyPEM: String
    /// Where the JWT is exchanged for an access token (the service account's `token_uri`
    /// unless the file names another).
    package var tokenURI: String
    /// Where messages are posted (`https://host[:port]`, no path).
    package var endpoint: String
    /// As ``APNsSettings/caFile``, for both `tokenURI` and `endpoint`.
    package var caFile: String?

    package init(
        projectID: String, clientEmail: String, privateKeyPEM: String, tokenURI: String = FCMSettings.defaultTokenURI,
        endpoint: String = FCMSettings.defaultEndpoint, caFile: String? = nil
    ) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyPEM = privateKeyPEM
        self.tokenURI = tokenURI
        self.endpoint = endpoint
        self.caFile = caFile
    }
}

/// A back-end system that may send notifications (`config/push-senders.json`): a technical
/// user that signs in with HTTP Basic (a bcrypt hash), an API key (`X-API-Key`, its SHA-256) or
/// an OAuth access token of its identity provider, allowed to send to the apps it names
/// (docs/push.md, "Sending").
package struct PushSender: Sendable {
    package var name: String
    /// bcrypt hash from `midtier hash-secret`, for HTTP Basic; nil: the sender has no password.
    package var passwordHash: String?
    /// The SHA-256 of the sender's API key (32 bytes), from `midtier hash-secret --api-key`;
    /// nil: the sender has no API key.
    package var apiKeyDigest: [UInt8]?
    /// The OAuth client the sender's access tokens name; nil: the sender takes no tokens.
    package var oauth: PushSenderOAuth?
    /// App ids this sender may send to.
    package var apps: [String]

    package init(name: String, passwordHash: String?, apiKeyDigest: [UInt8]? = nil, oauth: PushSenderOAuth? = nil, apps: [String]) {
        self.name = name
        self.passwordHash = passwordHash
        self.apiKeyDigest = apiKeyDigest
        self.oauth = oauth
        self.apps = apps
    }

    /// Whether the sender may send to `app` (app ids compared by their bytes).
    package func mayUse(app: String) -> Bool {
        apps.contains { UserIdentity.sameBytes($0, app) }
    }
}

/// How a sender signs in with OAuth (docs/push.md, "Sending"): a bearer JWT access token that
/// the sender got from its identity provider (client credentials), checked as a JWT app's
/// tokens are — signature by the JWKS, issuer, audience, expiry —, whose `clientClaim` (the
/// `token`'s `userClaim`, default `client_id`) is exactly `clientID`.
package struct PushSenderOAuth: Sendable, Equatable {
    /// The issuer, audience, keys and the claim naming the client.
    package var token: JWTAuthentication
    package var clientID: String

    package init(token: JWTAuthentication, clientID: String) {
        self.token = token
        self.clientID = clientID
    }
}

extension PushSenderOAuth {
    /// The same client of the same token settings, each text by its exact bytes (Swift's `==`
    /// on strings is canonical equivalence, which would take `é` and `e` + `◌́` as one).
    package func hasSameBytes(as other: PushSenderOAuth) -> Bool {
        token.hasSameBytes(as: other.token) && UserIdentity.sameBytes(clientID, other.clientID)
    }
}

extension JWTAuthentication {
    /// The same issuer, audience, keys and claim, each by its exact bytes.
    package func hasSameBytes(as other: JWTAuthentication) -> Bool {
        let keys: Bool
        switch (jwks, other.jwks) {
        case (.file(let a), .file(let b)), (.url(let a), .url(let b)): keys = UserIdentity.sameBytes(a, b)
        default: keys = false
        }
        return keys && UserIdentity.sameBytes(issuer, other.issuer) && UserIdentity.sameBytes(audience, other.audience)
            && UserIdentity.sameBytes(userClaim, other.userClaim)
    }
}
