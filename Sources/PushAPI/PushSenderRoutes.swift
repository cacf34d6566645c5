package import Callers
import DeviceAuthentication
import Foundation
import HTTPTypes
package import Hummingbird
package import Logging
package import MidtierCore
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
            router.add(middleware: EmptySegmentCheck(under: "/mobileservices/push/\(version)/backend/", described: "push sender API"))
        }
        addReads(to: router)
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
            router.post(RouterPath("\(root)/applications/{appId}/groups/{group}/notifications")) { request, context throws(Refusal) -> Response in
                try await send(request, context, to: .group)
            }
            router.post(RouterPath("\(root)/applications/{appId}/notifications/bulk")) { request, context throws(Refusal) -> Response in
                try await sendBulk(request, context)
            }
            router.post(RouterPath("\(root)/capabilities/{capability}/notifications")) { request, context throws(Refusal) -> Response in
                try await sendToCapability(request, context)
            }
            router.post(RouterPath("\(root)/applications/{appId}/topics/notifications")) { request, context throws(Refusal) -> Response in
                _ = try await signIn.current.authenticatePushSender(request, client: context.clientIP)
                throw Refusal(
                    .notImplemented, code: "NOT_IMPLEMENTED",
                    "push to topics is not supported: devices subscribe to no topics with Midtier (docs/push.md)")
            }
            router.get(RouterPath("\(root)/notifications/{id}/status")) { request, context throws(Refusal) -> Response in
                try await status(request, context)
            }
        }
    }

    enum Audience { case app, users, device, group }

    // MARK: Sending

    /// The signed-in sender and the app of the path, which it may send to and which has push.
    func senderAndApp(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> (PushSender, AppConfiguration) {
        let signIn = signIn.current
        let sender = try await signIn.authenticatePushSender(request, client: context.clientIP)
        let appID = context.parameters.get("appId") ?? ""
        guard sender.mayUse(app: appID) else { throw .forbidden("the sender \(sender.name) may not send to application \(appID)") }
        guard let app = signIn.configuration.apps[appID] else { throw .notFound("unknown application \(appID)") }
        guard app.push.isEnabled else { throw .notFound("push notifications are not enabled for application \(app.id)") }
        return (sender, app)
    }

    /// The body: a JSON object.
    static func document(_ request: Request) async throws(Refusal) -> JSON {
        var body = request
        let bytes = try await body.collectBody(upTo: Self.bodyLimit, describedAs: "notification")
        switch StrictJSON.value(Array(buffer: bytes)) {
        case .success(let value) where value.members != nil: return value
        case .success(let value): throw .badRequest("the body is \(value.kind), not a JSON object")
        case .failure(let error): throw .badRequest("the body is not JSON: \(error.message)")
        }
    }

    private func send(_ request: Request, _ context: MidtierRequestContext, to audience: Audience) async throws(Refusal) -> Response {
        let (sender, app) = try await senderAndApp(request, context)
        let document = try await Self.document(request)
        let notification = Self.notification(in: document, audience: audience)
        try Self.check(notification)

        let targets = try await recipients(document, context, audience: audience, app: app)
        guard !targets.registrations.isEmpty else {
            return .json(
                [
                    "status": ["code": 404, "message": .string("no registrations with a push token for \(targets.described)")],
                    "pushResults": .array(targets.unreached.map { Self.result(target: $0, notification: nil, code: .targetNotFound) }),
                ], status: .notFound)
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
        let results =
            targets.registrations.map { Self.result(target: $0, notification: record.id, code: .sent) }
            + targets.unreached.map { Self.result(target: $0, notification: record.id, code: .targetNotFound) }
        return .json(
            ["status": ["code": 202, "message": "accepted"], "notificationId": .string(record.id), "pushResults": .array(results)],
            status: .accepted)
    }

    /// SAP's completion codes of a `pushResults` entry (docs/push.md, "Sending").
    enum CompletionCode: Int {
        /// Handed on for delivery: Midtier has it in its durable queue for the registration.
        case sent = 0
        /// The target named has no registration with a push token.
        case targetNotFound = 2
    }

    /// One `pushResults` entry: the device registration (or the target named, when none of its
    /// registrations can be reached), the notification, SAP's completion code.
    static func result(target: String, notification: String?, code: CompletionCode) -> JSON {
        var members: [(String, JSON)] = [("target", .string(target))]
        if let notification { members.append(("notificationId", .string(notification))) }
        members.append(("code", .number(code.rawValue)))
        if code == .targetNotFound { members.append(("message", "no registration with a push token")) }
        return .object(members.map { JSONMember(key: $0.0, value: $0.1) })
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
        /// The registrations the notification goes to.
        var registrations: [String]
        /// The targets the sender named that no registration with a token stands for.
        var unreached: [String]
        var described: String
    }

    private func recipients(
        _ document: JSON, _ context: MidtierRequestContext, audience: Audience,
        app: AppConfiguration
    ) async throws(Refusal) -> Recipients {
        let realm = Self.realm(of: app)
        switch audience {
        case .app:
            let store = registrations.store
            let all = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await Self.pushTargets(of: app, in: store)
            }
            return Recipients(registrations: all, unreached: all.isEmpty ? [app.id] : [], described: "application \(app.id)")
        case .users:
            guard case .array(let entries)? = document["users"], !entries.isEmpty else {
                throw .badRequest("users must be a non-empty list of user ids (or {\"realm\",\"id\"} objects)")
            }
            guard entries.count <= Self.maximumUsers else {
                throw .badRequest("users names \(entries.count) users; at most \(Self.maximumUsers) in one call")
            }
            var found: [String] = [], unreached: [String] = []
            var seen = Set<UserIdentity>()
            for (index, entry) in entries.enumerated() {
                let user = try Self.user(entry, realm: realm, at: "users[\(index)]")
                // A user named twice is one target.
                guard seen.insert(user).inserted else { continue }
                let ids = try await listed(RegistrationFilter(user: user, app: app.id, state: .active), app: app)
                found += ids
                if ids.isEmpty { unreached.append(user.id) }
            }
            return Recipients(registrations: found, unreached: unreached, described: "the users named")
        case .group:
            let raw = context.parameters.get("group") ?? ""
            guard let group = raw.removingPercentEncoding, !group.isEmpty, !StoredText.hasControlCharacters(group) else {
                throw .badRequest("the push group \(raw) is empty, not percent-encoded correctly, or has a control character")
            }
            // The group a device named when it registered for push (`pushGroup`), by its bytes.
            let ids = try await listed(RegistrationFilter(app: app.id, state: .active), app: app) { registration in
                registration.details["PushGroup"].map { UserIdentity.sameBytes($0, group) } == true
            }
            return Recipients(registrations: ids, unreached: ids.isEmpty ? [group] : [], described: "push group \(group)")
        case .device:
            let rawUser = context.parameters.get("userId") ?? "", rawDevice = context.parameters.get("deviceId") ?? ""
            guard let userID = rawUser.removingPercentEncoding, let device = rawDevice.removingPercentEncoding else {
                throw .badRequest("the user or device id is not percent-encoded correctly")
            }
            let user = try Self.user(.string(userID), realm: realm, at: "the user id")
            let owned = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await registrations.store.registrations(matching: RegistrationFilter(user: user, app: app.id, state: .active))
            }
            // As the device's own push registration names it (Callers).
            let matching = Callers.registrations(owned, namedByPushDeviceId: device)
            let ids = matching.filter { Self.hasToken($0, app: app) }.map(\.id)
            return Recipients(registrations: ids, unreached: ids.isEmpty ? [device] : [], described: "device \(device) of user \(userID)")
        }
    }

    /// The ids of the registrations `filter` lists that hold a token for one of the app's push
    /// services (and that `keep` keeps), by their bytes (``tokenHolders(of:app:in:pageSize:keeping:)``).
    func listed(
        _ filter: RegistrationFilter, app: AppConfiguration, keeping keep: @Sendable (Registration) -> Bool = { _ in true }
    ) async throws(Refusal) -> [String] {
        let store = registrations.store
        return try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await Self.tokenHolders(of: filter, app: app, in: store, keeping: keep)
        }
    }

    /// The ids of the registrations `filter` lists that hold a token for one of the app's push
    /// services (and that `keep` keeps), by their bytes, read a page of `pageSize` at a time: a
    /// push to a whole app of a million registrations holds their ids, not their rows
    /// (docs/push.md, "Sending").
    package static func tokenHolders(
        of filter: RegistrationFilter, app: AppConfiguration, in store: any StateStore, pageSize: Int = listPage,
        keeping keep: (Registration) -> Bool = { _ in true }
    ) async throws(StoreError) -> [String] {
        var ids: [String] = []
        var after: String?
        while true {
            let page = try await store.registrations(matching: filter, after: after, limit: pageSize)
            for registration in page where hasToken(registration, app: app) && keep(registration) { ids.append(registration.id) }
            guard page.count == pageSize, let last = page.last else { return ids }
            after = last.id
        }
    }

    /// The ids of the app's active registrations that hold a token for one of its push
    /// services, by their bytes, a page of `pageSize` at a time: ids alone, from the index
    /// (reading each registration whole took 90 % of the time to accept a push to a whole app).
    package static func pushTargets(of app: AppConfiguration, in store: any StateStore, pageSize: Int = listPage) async throws(StoreError) -> [String]
    {
        var providers: [PushProvider] = []
        if app.push.apns != nil { providers.append(.apns) }
        if app.push.fcm != nil { providers.append(.fcm) }
        var ids: [String] = []
        while true {
            let page = try await store.pushTargets(app: app.id, providers: providers, after: ids.last, limit: pageSize)
            ids += page
            guard page.count == pageSize else { return ids }
        }
    }

    /// The registrations read at once while listing a notification's recipients.
    static let listPage = 1000

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
            try refuseUnknownMembers(of: entry, at: path, known: ["realm", "id"])
            guard let id = entry["id"]?.stringValue else { throw .badRequest("\(path).id is missing (a string)") }
            switch entry["realm"] {
            case nil, .null?: user = UserIdentity(realm: realm, id: id)
            case .string(let named)?: user = UserIdentity(realm: named, id: id)
            default: throw .badRequest("\(path).realm must be a string")
            }
        default: throw .badRequest("\(path) must be a user id or {\"realm\",\"id\"}")
        }
        guard !user.id.isEmpty, !StoredText.hasControlCharacters(user.id), !StoredText.hasControlCharacters(user.realm) else {
            throw .badRequest("\(path) is empty or has a control character")
        }
        return user
    }

    // MARK: Status

    /// The most deliveries one status answer lists (and how many when `limit` is not given).
    static let statusDeliveriesMaximum = 500

    /// Where a notification stands (docs/push.md, "Sending"): SAP's status from the counts of
    /// its deliveries in each state, and its deliveries a page of at most
    /// ``statusDeliveriesMaximum`` at a time by registration id (`limit`, `after`,
    /// `deliveriesNext`), so that a notification to a million registrations is answered
    /// without reading a million rows.
    private func status(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let sender = try await signIn.current.authenticatePushSender(request, client: context.clientIP)
        let raw = context.parameters.get("id") ?? ""
        guard let id = raw.removingPercentEncoding else { throw .badRequest("the notification id \(raw) is not percent-encoded correctly") }
        // No notification id holds a control character (Midtier makes them: UUIDs); one with a
        // NUL was cut there by SQLite and refused by PostgreSQL (a 503).
        guard !StoredText.hasControlCharacters(id) else { throw .notFound("no notification \(raw) of sender \(sender.name)") }
        let query = request.uri.queryParameters
        for name in ["limit", "after"] where query.getAll(name).count > 1 {
            throw .badRequest("\(name) is given more than once; give it once")
        }
        guard
            let limit = RegistrationCursor.limit(
                query["limit"].map(String.init), default: Self.statusDeliveriesMaximum, maximum: Self.statusDeliveriesMaximum)
        else {
            throw .badRequest("limit must be a whole number from 1 to \(Self.statusDeliveriesMaximum)")
        }
        var after: String?
        if let text = query["after"].map(String.init), !text.isEmpty {
            guard let decoded = RegistrationCursor.decode(text) else {
                throw .badRequest("after is malformed: pass the previous answer's deliveriesNext unchanged")
            }
            after = decoded
        }
        let found = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await store.pushNotification(id: id, deliveriesAfter: after, limit: limit + 1)
        }
        // Another sender's notification is as unknown as one that does not exist.
        guard let found, UserIdentity.sameBytes(found.notification.sender, sender.name) else {
            throw .notFound("no notification \(id) of sender \(sender.name)")
        }
        let notification = found.notification
        let deliveries = found.deliveries.prefix(limit)
        let shown: [JSON] = deliveries.map { delivery in
            .sortedObject([
                "registration": .string(delivery.registration), "status": .string(delivery.state.rawValue),
                "attempts": .number(delivery.attempts), "provider": .optional(delivery.provider) { .string($0.rawValue) },
                "reason": .string(delivery.reason), "updatedAt": .number(delivery.updatedAt),
            ])
        }
        var answer: [String: JSON] = [
            "status": ["code": 200, "message": "OK"],
            "statusDetails": [
                "notificationId": .string(notification.id), "applicationId": .string(notification.app),
                "caller": .string(notification.sender), "status": .string(Self.overall(found.counts)),
                "notificationType": .string(Self.notificationType(found.providers)),
                "createdAt": .number(notification.createdAt),
            ],
            "deliveries": .array(shown),
        ]
        if found.deliveries.count > limit, let last = deliveries.last {
            answer["deliveriesNext"] = .string(RegistrationCursor.encode(after: last.registration))
        }
        return .json(.sortedObject(answer))
    }

    /// SAP's target type of the notification: `ios` (APNs), `android` (FCM), both as
    /// `ios,android`, from the services its deliveries went to so far; empty while none went.
    static func notificationType(_ providers: Set<PushProvider>) -> String {
        [(PushProvider.apns, "ios"), (.fcm, "android")].filter { providers.contains($0.0) }.map(\.1).joined(separator: ",")
    }

    /// SAP's status for the whole notification: `QUEUED` while any delivery is pending, `SENT`
    /// when at least one was delivered, `ERROR` otherwise.
    static func overall(_ counts: PushDeliveryCounts) -> String {
        if counts.pending > 0 { return "QUEUED" }
        if counts.delivered > 0 { return "SENT" }
        return "ERROR"
    }
}
