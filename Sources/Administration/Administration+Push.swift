import Foundation
import HTTPTypes
import Logging
package import MidtierCore
package import MidtierHTTP
import MidtierJSON
package import MidtierStore
import PushNotifications
package import Registrations

// Push notifications as an admin sees them (docs/console.md, "Push"): the recent notifications
// with each registration's delivery, and a test notification to one user, stored and woken as
// a back-end sender's call is (docs/push.md).
extension Administration {
    /// The longest test notification's alert, in characters.
    package static let maximumTestAlert = 200
    /// The most deliveries one notification shows (the admin API's and the console's pages of
    /// them); its counts count them all.
    package static let pushDeliveryPageMaximum = 500

    /// A notification with a page of its deliveries and how many it has in each state, as the
    /// console and the admin API show it.
    package struct PushNotificationDetail: Sendable {
        package var notification: PushNotificationRecord
        /// At most `pushDeliveryPageMaximum` of its deliveries, by registration id's bytes.
        package var deliveries: [PushDeliveryRecord]
        /// Every delivery counted, listed or not.
        package var counts: PushDeliveryCounts
        /// SAP's status of the whole notification: `QUEUED`, `SENT` or `ERROR`.
        package var overall: String
        /// What to pass as `after` for the deliveries after these (`RegistrationCursor`); nil
        /// when none may follow.
        package var deliveriesNext: String?

        init(_ summary: PushNotificationSummary, limit: Int) {
            notification = summary.notification
            counts = summary.counts
            overall = Administration.overallPushStatus(summary.counts)
            deliveries = Array(summary.deliveries.prefix(limit))
            // One more than shown was read to know whether more follow.
            deliveriesNext =
                summary.deliveries.count > limit && limit > 0 ? deliveries.last.map { RegistrationCursor.encode(after: $0.registration) } : nil
        }
    }

    /// SAP's status for the whole notification, as a sender's status call reports it:
    /// `QUEUED` while any delivery is pending, `SENT` when at least one was delivered, `ERROR`
    /// otherwise.
    package static func overallPushStatus(_ counts: PushDeliveryCounts) -> String {
        if counts.pending > 0 { return "QUEUED" }
        if counts.delivered > 0 { return "SENT" }
        return "ERROR"
    }

    /// SAP's status for the whole notification of `deliveries`, every one of them.
    package static func overallPushStatus(_ deliveries: [PushDeliveryRecord]) -> String {
        overallPushStatus(PushDeliveryCounts(deliveries))
    }

    /// The sender a test notification is stored under: `console:` and the admin. A sender's
    /// name never holds `:` (config/push-senders.json), so no sender can ask for its status.
    package static func testSender(_ actor: AuditActor) -> String { "console:\(actor.name)" }

    /// The newest notifications first, of `app` (by its bytes) or of every app.
    package func recentPushNotifications(app: String?, limit: Int) async throws(Refusal) -> [PushNotificationDetail] {
        try await pushNotificationPage(app: app, before: nil, limit: limit).notifications
    }

    /// A page of the notifications newest first, of `app` (by its bytes) or of every app, after
    /// `before` in that order (from the newest when nil), at most `limit`, each with its first
    /// `deliveries` deliveries (0 to `pushDeliveryPageMaximum`) and its counts; `next` is the
    /// cursor of the page after it (`PushNotificationCursorText`) when more may follow (one
    /// more is read to know). However many registrations each went to, a page reads at most
    /// `limit` × (`deliveries` + 1) deliveries and counts the others in an index.
    package func pushNotificationPage(
        app: String?, before: PushNotificationCursor?, limit: Int, deliveries: Int = pushDeliveryPageMaximum
    ) async throws(Refusal) -> (notifications: [PushNotificationDetail], next: String?) {
        let store = try pushEnabledStore()
        if let app { try Self.checkText(app, named: "the app") }
        var found = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await store.recentPushNotifications(app: app, before: before, limit: limit + 1)
        }
        var next: String?
        if found.count > limit {
            found.removeLast(found.count - limit)
            next = found.last.map { PushNotificationCursorText.encode(PushNotificationCursor(after: $0)) }
        }
        let shownDeliveries = min(max(deliveries, 0), Self.pushDeliveryPageMaximum)
        var shown: [PushNotificationDetail] = []
        for notification in found {
            let summary =
                try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                    // One more than shown, to know whether more follow; none when none are shown.
                    try await store.pushNotification(
                        id: notification.id, deliveriesAfter: nil, limit: shownDeliveries == 0 ? 0 : shownDeliveries + 1)
                } ?? PushNotificationSummary(notification: notification, deliveries: [], counts: PushDeliveryCounts())
            shown.append(PushNotificationDetail(summary, limit: shownDeliveries))
        }
        return (shown, next)
    }

    /// The notification `id` with at most `limit` of its deliveries (1 to
    /// `pushDeliveryPageMaximum`) after the registration id `after` (from the first when nil),
    /// and its counts; `404` when there is none.
    package func pushNotification(
        id: String, deliveriesAfter after: String? = nil, limit: Int = pushDeliveryPageMaximum
    ) async throws(Refusal) -> PushNotificationDetail {
        let store = try pushEnabledStore()
        let limit = min(max(limit, 1), Self.pushDeliveryPageMaximum)
        guard !StoredText.hasControlCharacters(id),
            let summary = try await Refusal.unlessStoreFails(
                logger,
                { () async throws(StoreError) in
                    try await store.pushNotification(id: id, deliveriesAfter: after, limit: limit + 1)
                })
        else {
            throw .notFound("notification \(Self.codePoints(id)) does not exist (it may have been purged)")
        }
        return PushNotificationDetail(summary, limit: limit)
    }

    /// Sends `alert` to `user`'s registrations in `app` as a back-end sender's call would: the
    /// notification is stored, with one delivery per active registration of the user in the app
    /// that holds a token for one of the app's push services, before this returns; the delivery
    /// worker is woken and the action audited (`push.test`, the user as target). `400` for an
    /// alert that is empty or too long; `404` for an app that is not configured, an app without
    /// push or a user without such a registration — as a sender hears for an app without push
    /// and for targets without a push token (docs/push.md).
    package func sendTestNotification(
        user: UserIdentity, app appID: String, alert: String,
        by actor: AuditActor
    ) async throws(Refusal) -> PushNotificationDetail {
        let store = try pushEnabledStore()
        try Self.checkText(user.id, named: "the user id")
        try Self.checkText(user.realm, named: "the realm")
        try Self.checkText(appID, named: "the app")
        guard !user.id.isEmpty else { throw .badRequest("the user id is missing") }
        let text = alert.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw .badRequest("the alert text is missing") }
        guard text.count <= Self.maximumTestAlert else {
            throw .badRequest("the alert text has \(text.count) characters; at most \(Self.maximumTestAlert)")
        }
        try Self.checkText(text, named: "the alert text")
        guard let app = apps().first(where: { UserIdentity.sameBytes($0.key, appID) })?.value else {
            throw .notFound("application \(appID) is not configured")
        }
        guard app.push.isEnabled else {
            throw .notFound("application \(app.id) has no push notifications (neither apns nor fcm in its push section)")
        }
        let notification: JSON = ["alert": .string(text)]
        do {
            let message = try PushMessage.read(notification)
            try message.checkSize()
        } catch {
            throw .badRequest(error.message)
        }
        let owned = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user, app: app.id, state: .active))
        }
        let targets = owned.filter { registration in
            UserIdentity.sameBytes(registration.user.realm, user.realm) && UserIdentity.sameBytes(registration.user.id, user.id)
                && UserIdentity.sameBytes(registration.appId, app.id)
                && ((app.push.apns != nil && !registration.apnsDeviceToken.isEmpty)
                    || (app.push.fcm != nil && !registration.androidGcmRegistrationId.isEmpty))
        }.map(\.id)
        guard !targets.isEmpty else {
            throw .notFound("user \(user) has no active registration in application \(app.id) with a push token for its push services")
        }
        let now = registrations.clock.now()
        let record = PushNotificationRecord(
            id: UUID().uuidString.lowercased(), app: app.id, sender: Self.testSender(actor),
            payload: notification.serialized(), createdAt: now)
        // The audit entry first: the store cannot take both in one transaction, and a test
        // notification that went out unaudited would be worse than an entry for one that a
        // failing store then did not keep (the admin sees that failure).
        let audit = AuditEntry(
            at: now, actor: actor.name, action: "push.test", target: user.description,
            detail: "notification \(record.id) in \(app.id) to \(targets.count) registration(s)", source: actor.source)
        try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await registrations.store.appendAudit(audit) }
        try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await store.enqueue(record, registrations: targets)
        }
        pushWakeUp?.nudge()
        logger.notice(
            "push test notification",
            metadata: [
                "notification": "\(record.id)", "app": "\(app.id)", "by": "\(actor.name)",
                "registrations": "\(targets.count)",
            ])
        return try await pushNotification(id: record.id)
    }

    private func pushEnabledStore() throws(Refusal) -> any PushStore {
        guard let pushStore else { throw Refusal(.serviceUnavailable, code: "PUSH_UNAVAILABLE", "this store keeps no push notifications") }
        return pushStore
    }
}

/// A push notifications page's `next`: `<createdAt>.<id>` of the last notification on the page
/// (docs/admin-api.yaml, `PushNotificationCursor`). Clients treat it as opaque; it names a place
/// in the newest-first order, so any well-formed one is a valid place to read on from.
package enum PushNotificationCursorText {
    /// The longest notification id a cursor carries; Midtier's ids are UUIDs.
    static let longestID = 128

    package static func encode(_ cursor: PushNotificationCursor) -> String { "\(cursor.createdAt).\(cursor.id)" }

    /// The cursor `text` spells, or nil for anything else: milliseconds (an optional minus and
    /// 1 to 18 digits), a dot, and 1 to 128 printable ASCII characters.
    package static func decode(_ text: String) -> PushNotificationCursor? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let time = parts[0].utf8.first == UInt8(ascii: "-") ? parts[0].utf8.dropFirst() : parts[0].utf8[...]
        guard (1...18).contains(time.count), time.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let createdAt = Int64(parts[0]), (1...longestID).contains(parts[1].utf8.count),
            parts[1].utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else { return nil }
        return PushNotificationCursor(createdAt: createdAt, id: String(parts[1]))
    }
}
