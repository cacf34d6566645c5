import Foundation
import Hummingbird
import Logging
package import MidtierCore
package import MidtierHTTP
package import MidtierJSON
import MidtierStore
import PushNotifications
import Registrations

/// SAP's bulk push (docs/push.md, "Sending"): `POST …/applications/{appId}/notifications/bulk`
/// with `{"notification": {…}, "userNotifications": [{"user": …, "notification": {…}}, …]}`;
/// each user gets their own notification, or the common one when theirs is left out. Every
/// notification is stored with its deliveries in one transaction, all or none, before the
/// sender hears `202`; each has its own id, in each `pushResults` entry.
extension PushSenderRoutes {
    /// Refuses a member of `object` that is not one of `known`, naming it: a typo must not send
    /// something else (as the notification object's members are checked).
    static func refuseUnknownMembers(of object: JSON, at path: String, known: Set<String>) throws(Refusal) {
        for member in object.members ?? [] where !known.contains(member.key) {
            throw .badRequest("\(path): \(member.key) is not a member it takes (\(known.sorted().joined(separator: ", ")))")
        }
    }

    func sendBulk(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let (sender, app) = try await senderAndApp(request, context)
        let body = try PushBulkBody.read(try await Self.document(request), realm: Self.realm(of: app))
        var batch: [(notification: PushNotificationRecord, registrations: [String])] = []
        var results: [JSON] = []
        let now = registrations.clock.now()
        for (user, notification) in body.entries {
            let ids = try await listed(RegistrationFilter(user: user, app: app.id, state: .active), app: app)
            guard !ids.isEmpty else {
                results.append(Self.result(target: user.id, notification: nil, code: .targetNotFound))
                continue
            }
            let record = PushNotificationRecord(
                id: UUID().uuidString.lowercased(), app: app.id, sender: sender.name, payload: notification.serialized(), createdAt: now)
            batch.append((record, ids))
            results += ids.map { Self.result(target: $0, notification: record.id, code: .sent) }
        }
        guard !batch.isEmpty else {
            return .json(
                ["status": ["code": 404, "message": "no registrations with a push token for the users named"], "pushResults": .array(results)],
                status: .notFound)
        }
        try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await store.enqueue(batch) }
        wakeUp.nudge()
        logger.info(
            "push notifications accepted (bulk)",
            metadata: [
                "app": "\(app.id)", "sender": "\(sender.name)", "notifications": "\(batch.count)",
                "registrations": "\(batch.reduce(0) { $0 + $1.registrations.count })",
            ])
        return .json(["status": ["code": 202, "message": "accepted"], "pushResults": .array(results)], status: .accepted)
    }
}

/// SAP's bulk push body as a sender sends it, read and checked without the store (the fuzz
/// target `push-bulk` reads it the same way): each user named, with their own notification or
/// the common one, every notification one Midtier can deliver.
package struct PushBulkBody: Sendable {
    package var entries: [(user: UserIdentity, notification: JSON)]

    package static func read(_ document: JSON, realm: String) throws(Refusal) -> PushBulkBody {
        try PushSenderRoutes.refuseUnknownMembers(of: document, at: "the body", known: ["notification", "userNotifications"])
        var common: JSON?
        if let given = document["notification"], given != .null {
            common = PushSenderRoutes.notification(in: ["notification": given], audience: .users)
            if let common { try PushSenderRoutes.check(common) }
        }
        guard case .array(let list)? = document["userNotifications"], !list.isEmpty else {
            throw .badRequest("userNotifications must be a non-empty list of {\"user\", \"notification\"}")
        }
        guard list.count <= PushSenderRoutes.maximumUsers else {
            throw .badRequest("userNotifications names \(list.count) users; at most \(PushSenderRoutes.maximumUsers) in one call")
        }
        var entries: [(user: UserIdentity, notification: JSON)] = []
        for (index, entry) in list.enumerated() {
            guard entry.members != nil, let named = entry["user"] else {
                throw .badRequest("userNotifications[\(index)] must be {\"user\", \"notification\"}")
            }
            try PushSenderRoutes.refuseUnknownMembers(of: entry, at: "userNotifications[\(index)]", known: ["user", "notification"])
            let user = try PushSenderRoutes.user(named, realm: realm, at: "userNotifications[\(index)].user")
            var notification = common
            if let own = entry["notification"], own != .null {
                notification = PushSenderRoutes.notification(in: ["notification": own], audience: .users)
            }
            guard let notification else {
                throw .badRequest("userNotifications[\(index)] has no notification, and the body has no common one")
            }
            do {
                try PushSenderRoutes.check(notification)
            } catch {
                throw .badRequest("userNotifications[\(index)].notification: \(error.message)")
            }
            entries.append((user, notification))
        }
        return PushBulkBody(entries: entries)
    }
}
