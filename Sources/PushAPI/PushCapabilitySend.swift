import Callers
import Foundation
import Hummingbird
import Logging
import MidtierCore
package import MidtierHTTP
package import MidtierJSON
import MidtierStore
import PushNotifications
import Registrations

/// SAP's push to a capability (docs/push.md, "Capabilities"): `POST
/// …/capabilities/{capability}/notifications` with `{"notification": {…}, "users": [{"user": …,
/// "formFactor": ["phone", …], "badge": 3}, …]}`. It reaches each named user's active
/// registrations, in the sender's apps, that registered the capability and have one of the form
/// factors named. Each user gets their own notification (their `badge` in it), stored with the
/// others in one transaction, all or none, as a bulk push is.
extension PushSenderRoutes {
    func sendToCapability(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let signIn = signIn.current
        let sender = try await signIn.authenticatePushSender(request, client: context.clientIP)
        let raw = context.parameters.get("capability") ?? ""
        guard let capability = raw.removingPercentEncoding, !capability.isEmpty, !StoredText.hasControlCharacters(capability) else {
            throw .badRequest("the capability \(raw) is empty, not percent-encoded correctly, or has a control character")
        }
        let body = try PushCapabilityBody.read(try await Self.document(request))
        // The sender's apps with push, in the order the sender's entry names them.
        let apps = sender.apps.compactMap { signIn.configuration.apps[$0] }.filter(\.push.isEnabled)
        guard !apps.isEmpty else { throw .notFound("none of the sender's applications has push notifications enabled") }

        // A bare user id is a user of the apps' realm; when the sender's apps have users in
        // several realms, it would name a different person in each (found by the outside
        // attack of issue 36), so the sender names the realm.
        let realms = apps.map(Self.realm(of:)).reduce(into: [String]()) { found, realm in
            if !found.contains(where: { UserIdentity.sameBytes($0, realm) }) { found.append(realm) }
        }
        var batch: [(notification: PushNotificationRecord, registrations: [String])] = []
        var results: [JSON] = []
        // A user named twice is one target (the first entry's badge), per app.
        var seen = Set<[UInt8]>()
        let now = registrations.clock.now()
        for (index, target) in body.targets.enumerated() {
            if case .string = target.user, realms.count > 1 {
                throw .badRequest(
                    "users[\(index)].user: the sender's applications have users in \(realms.count) realms; "
                        + "name the user as {\"realm\": …, \"id\": …}")
            }
            var reached = false
            for app in apps {
                let user = try Self.user(target.user, realm: Self.realm(of: app), at: "users[\(index)].user")
                guard seen.insert(Array("\(app.id)\u{0}\(user.realm)\u{0}\(user.id)".utf8)).inserted else {
                    reached = true
                    continue
                }
                let owned = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                    try await registrations.store.registrations(matching: RegistrationFilter(user: user, app: app.id, state: .active))
                }
                let ids = owned.filter { registration in
                    Self.hasToken(registration, app: app)
                        && PushCapabilityBody.hasCapability(registration, named: capability)
                        && PushCapabilityBody.formFactorMatches(registration.formFactor, target.formFactors)
                }.map(\.id)
                guard !ids.isEmpty else { continue }
                reached = true
                let record = PushNotificationRecord(
                    id: UUID().uuidString.lowercased(), app: app.id, sender: sender.name,
                    payload: body.notification(for: target).serialized(), createdAt: now)
                batch.append((record, ids))
                results += ids.map { Self.result(target: $0, notification: record.id, code: .sent) }
            }
            if !reached { results.append(Self.result(target: target.described, notification: nil, code: .targetNotFound)) }
        }
        guard !batch.isEmpty else {
            return .json(
                [
                    "status": [
                        "code": 404, "message": .string("no registrations with a push token and capability \(capability) for the users named"),
                    ],
                    "pushResults": .array(results),
                ], status: .notFound)
        }
        try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await store.enqueue(batch) }
        wakeUp.nudge()
        logger.info(
            "push notifications accepted (capability)",
            metadata: [
                "sender": "\(sender.name)", "notifications": "\(batch.count)",
                "registrations": "\(batch.reduce(0) { $0 + $1.registrations.count })",
            ])
        return .json(["status": ["code": 202, "message": "accepted"], "pushResults": .array(results)], status: .accepted)
    }
}

/// SAP's push-to-capability body as a sender sends it, read and checked without the store.
package struct PushCapabilityBody: Sendable {
    /// One user the notification is for, with the form factors of their devices it is for.
    package struct Target: Sendable {
        /// The user as named: an id, or `{"realm", "id"}` (resolved per app).
        package var user: JSON
        /// Lower-case form factors (`phone`, `tablet`, …); empty: any.
        package var formFactors: [String]
        /// The badge this user's notification shows, when the sender gives one.
        package var badge: Int?

        var described: String { user.stringValue ?? user["id"]?.stringValue ?? "" }
    }

    package var notification: JSON
    package var targets: [Target]

    package static func read(_ document: JSON) throws(Refusal) -> PushCapabilityBody {
        try PushSenderRoutes.refuseUnknownMembers(of: document, at: "the body", known: ["notification", "users"])
        let notification = PushSenderRoutes.notification(in: document, audience: .users)
        try PushSenderRoutes.check(notification)
        guard case .array(let list)? = document["users"], !list.isEmpty else {
            throw .badRequest("users must be a non-empty list of {\"user\", \"formFactor\"}")
        }
        guard list.count <= PushSenderRoutes.maximumUsers else {
            throw .badRequest("users names \(list.count) users; at most \(PushSenderRoutes.maximumUsers) in one call")
        }
        var targets: [Target] = []
        for (index, entry) in list.enumerated() {
            guard entry.members != nil, let user = entry["user"] else { throw .badRequest("users[\(index)] must be {\"user\", \"formFactor\"}") }
            try PushSenderRoutes.refuseUnknownMembers(of: entry, at: "users[\(index)]", known: ["user", "formFactor", "badge", "badges"])
            // Checked here, in the app's realm later.
            _ = try PushSenderRoutes.user(user, realm: UserIdentity.localRealm, at: "users[\(index)].user")
            var formFactors: [String] = []
            switch entry["formFactor"] {
            case nil, .null?: break
            case .array(let values)?:
                for value in values {
                    guard case .string(let text) = value, !text.isEmpty, text.utf8.count <= 64, !StoredText.hasControlCharacters(text) else {
                        throw .badRequest("users[\(index)].formFactor must be a list of form factors (phone, tablet, …)")
                    }
                    formFactors.append(Self.formFactor(text))
                }
            default: throw .badRequest("users[\(index)].formFactor must be a list of form factors (phone, tablet, …)")
            }
            var badge: Int?
            switch entry["badge"] {
            case nil, .null?: break
            case let value?:
                guard let number = value.doubleValue, number >= 0, number <= 999_999, number == number.rounded() else {
                    throw .badRequest("users[\(index)].badge must be a whole number from 0 to 999999")
                }
                badge = Int(number)
            }
            switch entry["badges"] {
            case nil, .null?: break
            case .object(let members)? where members.isEmpty: break
            default: throw .badRequest("users[\(index)].badges (a badge per registration) is not supported; give the user's badge")
            }
            let target = Target(user: user, formFactors: formFactors, badge: badge)
            // With the user's badge in it, the notification must still fit the push services.
            if badge != nil {
                do {
                    try PushSenderRoutes.check(PushCapabilityBody(notification: notification, targets: []).notification(for: target))
                } catch {
                    throw .badRequest("users[\(index)]: with its badge, \(error.message)")
                }
            }
            targets.append(target)
        }
        return PushCapabilityBody(notification: notification, targets: targets)
    }

    /// The notification for `target`: the common one, with the target's badge when it has one.
    package func notification(for target: Target) -> JSON {
        guard let badge = target.badge, case .object(var members) = notification else { return notification }
        members.removeAll { $0.key == "badge" }
        members.append(JSONMember(key: "badge", value: .number(Int64(badge))))
        return .object(members)
    }

    /// A form factor as compared: lower case, SAP's registration example's `smartphone` as
    /// `phone`.
    static func formFactor(_ text: String) -> String {
        let lowered = text.lowercased()
        return lowered == "smartphone" ? "phone" : lowered
    }

    /// Whether a registration's form factor is one of `wanted`: any when none is wanted, and a
    /// registration that named no form factor is not left out.
    static func formFactorMatches(_ registered: String, _ wanted: [String]) -> Bool {
        wanted.isEmpty || registered.isEmpty || wanted.contains(formFactor(registered))
    }

    /// Whether the registration registered the capability `name` (by its bytes), or the
    /// wildcard `*`.
    static func hasCapability(_ registration: Registration, named name: String) -> Bool {
        DeviceFields.capabilities(of: registration).contains { UserIdentity.sameBytes($0.name, name) || $0.name == "*" }
    }
}
