package import Callers
import DeviceAuthentication
import Foundation
import HTTPTypes
package import Hummingbird
package import Logging
import MidtierCore
package import MidtierHTTP
import MidtierJSON
package import MidtierStore
package import PushNotifications
package import Registrations

/// SAP Mobile Services' Notification Backend API, for back-end senders (docs/push.md,
/// "Sending"), on the device listener:
/// - `POST /mobileservices/push/{v1|v2}/backend/applications/{appId}/notifications`: to every
///   registration of the app;
/// - `POST …/applications/{appId}/notifications/users`: `{"users":[…],"notification":{…}}`;
/// - `POST …/applications/{appId}/users/{userId}/devices/{deviceId}/notifications`: to one
///   registration (its id or its `DeviceId`);
/// - `GET /mobileservices/push/{v1|v2}/backend/notifications/{id}/status`: where it stands,
///   with each registration's delivery.
///
/// Senders sign in with HTTP Basic (`config/push-senders.json`) and reach only the apps they
/// are allowed. An accepted notification is in the store, with one delivery per registration,
/// before the sender hears `202`.
package struct PushSenderRoutes: Sendable {
    let signIn: CurrentSignIn
    let registrations: RegistrationService
    let store: any PushStore
    let wakeUp: PushWakeUp
    let logger: Logger

    /// The most users one call names, and the largest body.
    static let maximumUsers = 1000
    static let bodyLimit = 256 * 1024

    package init(
        signIn: CurrentSignIn, registrations: RegistrationService, store: any PushStore, wakeUp: PushWakeUp, logger: Logger
    ) {
        self.signIn = signIn
        self.registrations = registrations
        self.store = store
        self.wakeUp = wakeUp
        self.logger = logger
    }

    package func add(to router: Router<MidtierRequestContext>) {
        for version in ["v1", "v2"] {
            let root = "/mobileservices/push/\(version)/backend"
            router.post(RouterPath("\(root)/applications/{appId}/notifications")) { request, context throws(Refusal) -> Response in
                try await send(request, context, to: .app)
            }
            router.post(RouterPath("\(root)/applications/{appId}/notifications/users")) { request, context throws(Refusal) -> Response in
                try await send(request, context, to: .users)
            }
            router.post(RouterPath("\(root)/applications/{appId}/users/{userId}/devices/{deviceId}/notifications")) {
                request, context throws(Refusal) -> Response in
                try await send(request, context, to: .device)
            }
            router.get(RouterPath("\(root)/notifications/{id}/status")) { request, context throws(Refusal) -> Response in
                try await status(request, context)
            }
        }
    }

    enum Audience { case app, users, device }

    // MARK: Sending

    private func send(_ request: Request, _ context: MidtierRequestContext, to audience: Audience) async throws(Refusal) -> Response {
        let signIn = signIn.current
        let sender = try await signIn.authenticatePushSender(request, client: context.clientIP)
        let appID = context.parameters.get("appId") ?? ""
        guard sender.mayUse(app: appID) else { throw .forbidden("the sender \(sender.name) may not send to application \(appID)") }
        guard let app = signIn.configuration.apps[appID] else { throw .notFound("unknown application \(appID)") }
        guard app.push.isEnabled else { throw .notFound("push notifications are not enabled for application \(app.id)") }

        var body = request
        let bytes = try await body.collectBody(upTo: Self.bodyLimit, describedAs: "notification")
        let document: JSON
        switch StrictJSON.value(Array(buffer: bytes)) {
        case .success(let value) where value.members != nil: document = value
        case .success(let value): throw .badRequest("the body is \(value.kind), not a JSON object")
        case .failure(let error): throw .badRequest("the body is not JSON: \(error.message)")
        }
        let notification = Self.notification(in: document, audience: audience)
        try Self.check(notification)

        let targets = try await recipients(document, context, audience: audience, app: app)
        guard !targets.registrations.isEmpty else {
            return .json(
                ["status": ["code": 404, "message": .string("no registrations with a push token for \(targets.described)")]], status: .notFound)
        }
        let record = PushNotificationRecord(
            id: UUID().uuidString.lowercased(), app: app.id, sender: sender.name,
            payload: notification.serialized(), createdAt: registrations.clock.now())
        try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await store.enqueue(record, registrations: targets.registrations)
        }
        wakeUp.nudge()
        logger.info(
            "push notification accepted",
            metadata: [
                "notification": "\(record.id)", "app": "\(app.id)", "sender": "\(sender.name)",
                "registrations": "\(targets.registrations.count)",
            ])
        return .json(
            [
                "status": ["code": 202, "message": "accepted"], "notificationId": .string(record.id),
                "pushResults": .array(targets.results.map { ["target": .string($0), "notificationId": .string(record.id), "code": 202] }),
            ],
            status: .accepted)
    }

    /// The notification object: the body itself (v1 to an app or a device), or its
    /// `notification` member (users, and v2's wrapper, whose localized form nests it once more).
    static func notification(in document: JSON, audience: Audience) -> JSON {
        var notification = document
        if audience == .users || document["notification"]?.members != nil { notification = document["notification"] ?? .null }
        if let nested = notification["notification"], nested.members != nil { notification = nested }
        return notification
    }

    /// Refuses (400, naming the member) a notification object that does not read or would not
    /// fit a push service (docs/push.md, "Sending").
    static func check(_ notification: JSON) throws(Refusal) {
        do {
            try PushMessage.read(notification).checkSize()
        } catch {
            throw .badRequest(error.message)
        }
    }

    private struct Recipients {
        var registrations: [String]
        /// One entry of `pushResults` per target the sender named.
        var results: [String]
        var described: String
    }

    private func recipients(
        _ document: JSON, _ context: MidtierRequestContext, audience: Audience,
        app: AppConfiguration
    ) async throws(Refusal) -> Recipients {
        let realm = Self.realm(of: app)
        switch audience {
        case .app:
            let all = try await listed(RegistrationFilter(app: app.id, state: .active), app: app)
            return Recipients(registrations: all, results: [app.id], described: "application \(app.id)")
        case .users:
            guard case .array(let entries)? = document["users"], !entries.isEmpty else {
                throw .badRequest("users must be a non-empty list of user ids (or {\"realm\",\"id\"} objects)")
            }
            guard entries.count <= Self.maximumUsers else {
                throw .badRequest("users names \(entries.count) users; at most \(Self.maximumUsers) in one call")
            }
            var found: [String] = [], results: [String] = []
            for (index, entry) in entries.enumerated() {
                let user = try Self.user(entry, realm: realm, at: "users[\(index)]")
                found += try await listed(RegistrationFilter(user: user, app: app.id, state: .active), app: app)
                results.append(user.id)
            }
            return Recipients(registrations: found, results: results, described: "the users named")
        case .device:
            let rawUser = context.parameters.get("userId") ?? "", rawDevice = context.parameters.get("deviceId") ?? ""
            guard let userID = rawUser.removingPercentEncoding, let device = rawDevice.removingPercentEncoding else {
                throw .badRequest("the user or device id is not percent-encoded correctly")
            }
            let user = try Self.user(.string(userID), realm: realm, at: "the user id")
            let owned = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await registrations.store.registrations(matching: RegistrationFilter(user: user, app: app.id, state: .active))
            }
            var matching = owned.filter { UserIdentity.sameBytes($0.id, device) }
            if matching.isEmpty { matching = owned.filter { !$0.deviceId.isEmpty && UserIdentity.sameBytes($0.deviceId, device) } }
            let ids = matching.filter { Self.hasToken($0, app: app) }.map(\.id)
            return Recipients(registrations: ids, results: [device], described: "device \(device) of user \(userID)")
        }
    }

    /// The active registrations `filter` lists that hold a token for one of the app's push services.
    private func listed(_ filter: RegistrationFilter, app: AppConfiguration) async throws(Refusal) -> [String] {
        let found = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: filter)
        }
        return found.filter { Self.hasToken($0, app: app) }.map(\.id)
    }

    static func hasToken(_ registration: Registration, app: AppConfiguration) -> Bool {
        (app.push.apns != nil && !registration.apnsDeviceToken.isEmpty) || (app.push.fcm != nil && !registration.androidGcmRegistrationId.isEmpty)
    }

    /// The realm an app's users belong to (docs/identity.md): `users.json`'s for a basic app,
    /// the identity provider's issuer for a jwt app.
    static func realm(of app: AppConfiguration) -> String {
        app.authentication.realm
    }

    /// A user a sender names: an id in the app's realm, or `{"realm": …, "id": …}`.
    static func user(_ entry: JSON, realm: String, at path: String) throws(Refusal) -> UserIdentity {
        let user: UserIdentity
        switch entry {
        case .string(let id): user = UserIdentity(realm: realm, id: id)
        case .object:
            guard let id = entry["id"]?.stringValue else { throw .badRequest("\(path).id is missing (a string)") }
            user = UserIdentity(realm: entry["realm"]?.stringValue ?? realm, id: id)
        default: throw .badRequest("\(path) must be a user id or {\"realm\",\"id\"}")
        }
        guard !user.id.isEmpty, !StoredText.hasControlCharacters(user.id), !StoredText.hasControlCharacters(user.realm) else {
            throw .badRequest("\(path) is empty or has a control character")
        }
        return user
    }

    // MARK: Status

    private func status(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let sender = try await signIn.current.authenticatePushSender(request, client: context.clientIP)
        let id = context.parameters.get("id") ?? ""
        let found = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await store.pushNotification(id: id) }
        // Another sender's notification is as unknown as one that does not exist.
        guard let (notification, deliveries) = found, UserIdentity.sameBytes(notification.sender, sender.name) else {
            throw .notFound("no notification \(id) of sender \(sender.name)")
        }
        let overall = Self.overall(deliveries)
        let shown: [JSON] = deliveries.map { delivery in
            .sortedObject([
                "registration": .string(delivery.registration), "status": .string(delivery.state.rawValue),
                "attempts": .number(delivery.attempts), "provider": .optional(delivery.provider) { .string($0.rawValue) },
                "reason": .string(delivery.reason), "updatedAt": .number(delivery.updatedAt),
            ])
        }
        return .json([
            "status": ["code": 200, "message": "OK"],
            "statusDetails": [
                "notificationId": .string(notification.id), "applicationId": .string(notification.app),
                "caller": .string(notification.sender), "status": .string(overall),
                "createdAt": .number(notification.createdAt),
            ],
            "deliveries": .array(shown),
        ])
    }

    /// SAP's status for the whole notification: `QUEUED` while any delivery is pending, `SENT`
    /// when at least one was delivered, `ERROR` otherwise.
    static func overall(_ deliveries: [PushDeliveryRecord]) -> String {
        if deliveries.contains(where: { $0.state == .pending }) { return "QUEUED" }
        if deliveries.contains(where: { $0.state == .delivered }) { return "SENT" }
        return "ERROR"
    }
}
