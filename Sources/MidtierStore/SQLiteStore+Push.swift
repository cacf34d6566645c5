import GRDB
package import MidtierCore

// Push notifications in the embedded store (docs/push.md, "Delivery"; the statements:
// PushRules). SQLite has one writer at a time, so a claim — choosing the due deliveries and
// leasing them — is one write transaction that no other claim can interleave with.

extension SQLiteStore: PushStore {
    package func enqueue(_ notification: PushNotificationRecord, registrations: [String]) async throws(StoreError) {
        try await enqueue([(notification, registrations)])
    }

    package func enqueue(_ notifications: [(notification: PushNotificationRecord, registrations: [String])]) async throws(StoreError) {
        try await write { db in
            for (notification, registrations) in notifications {
                try db.run(PushRules.insert(notification))
                for start in stride(from: 0, to: registrations.count, by: PushRules.deliveriesPerInsert) {
                    let chunk = registrations[start..<min(start + PushRules.deliveriesPerInsert, registrations.count)]
                    try db.run(PushRules.deliveries(of: notification, to: chunk), cached: false)
                }
            }
        }
    }

    package func claimPushDeliveries(
        owner: String, now: Int64, leaseUntil: Int64,
        limit: Int
    ) async throws(StoreError) -> [ClaimedPushDelivery] {
        guard limit > 0 else { return [] }
        return try await write { db in
            let leased = try db.rows(PushRules.claim(owner: owner, now: now, leaseUntil: leaseUntil, limit: limit), PushRules.leased)
            guard !leased.isEmpty else { return [] }
            let ids = Set(leased.map { ExactString($0.notification) }).map(\.value)
            let recipients = Set(leased.map { ExactString($0.registration) }).map(\.value)
            return PushRules.claimed(
                leased, notifications: try db.rows(PushRules.notifications(ids), PushRules.notification),
                recipients: try db.rows(PushRules.recipients(recipients), PushRules.recipient))
        }
    }

    package func pushRecipients(registrations ids: [String]) async throws(StoreError) -> [ExactString: PushRecipient] {
        guard !ids.isEmpty else { return [:] }
        return PushRules.byRegistration(try await rows(PushRules.recipients(ids)) { try PushRules.recipient($0) })
    }

    package func finishPushDeliveries(_ finished: [FinishedPushDelivery], owner: String, now: Int64) async throws(StoreError) -> Int {
        guard !finished.isEmpty else { return 0 }
        return try await write { db in
            try stride(from: 0, to: finished.count, by: PushRules.outcomesPerStatement).reduce(0) { count, start in
                let chunk = finished[start..<min(start + PushRules.outcomesPerStatement, finished.count)]
                return count + (try db.rows(PushRules.finish(chunk, owner: owner, now: now)) { try $0.text("registration_id") }.count)
            }
        }
    }

    package func pushNotification(id: String) async throws(StoreError) -> (PushNotificationRecord, [PushDeliveryRecord])? {
        let found: (PushNotificationRecord, [PushDeliveryRecord])? = try await read { db in
            guard let notification = try db.rows(PushRules.notification(id: id), PushRules.notification).first else { return nil }
            return (notification, try db.rows(PushRules.deliveries(of: id)) { try PushRules.delivery($0, of: id) })
        }
        return found
    }

    package func pushNotification(id: String, deliveriesAfter after: String?, limit: Int) async throws(StoreError) -> PushNotificationSummary? {
        // One read transaction: the page and the counts at one moment.
        try await read { db in
            guard let notification = try db.rows(PushRules.notification(id: id), PushRules.notification).first else { return nil }
            let deliveries = try db.rows(PushRules.deliveries(of: id, after: after, limit: limit)) { try PushRules.delivery($0, of: id) }
            let counts = PushRules.counts(try db.rows(PushRules.deliveryStates(of: id), PushRules.stateCount))
            let providers = try db.rows(PushRules.providers(of: id), PushRules.provider).compactMap { $0 }
            return PushNotificationSummary(notification: notification, deliveries: deliveries, counts: counts, providers: Set(providers))
        }
    }

    package func recentPushNotifications(
        app: String?, before: PushNotificationCursor?, limit: Int
    ) async throws(StoreError) -> [PushNotificationRecord] {
        try await rows(PushRules.recent(app: app, before: before, limit: limit)) { try PushRules.notification($0) }
    }

    package func pendingPushDeliveries() async throws(StoreError) -> Int {
        Int(try await rows(PushRules.pending) { try $0.integer("count") }.first ?? 0)
    }

    package func clearPushToken(registration: String, provider: PushProvider, token: String) async throws(StoreError) -> Bool {
        // An empty token is no token: there is nothing to clear.
        guard !token.isEmpty else { return false }
        return try await write { db in try db.finds(PushRules.clear(token, provider: provider, registration: registration)) }
    }

    package func registrationsReleasingPushToken(
        _ token: String, provider: PushProvider, app: String,
        keeping: String
    ) async throws(StoreError) -> [String] {
        // An empty token is no token: no phone holds it.
        guard !token.isEmpty else { return [] }
        return try await write { db in
            try db.rows(PushRules.release(token, provider: provider, app: app, keeping: keeping)) { try $0.text("id") }
        }
    }

    package func pushTokenHolders(_ token: String, provider: PushProvider, app: String) async throws(StoreError) -> [UserIdentity] {
        guard !token.isEmpty else { return [] }
        return try await rows(PushRules.holders(of: token, provider: provider, app: app)) {
            UserIdentity(realm: try $0.text("user_realm"), id: try $0.text("user_id"))
        }
    }

    package func releasePushLeases(ofInstance instance: String, keeping owner: String) async throws(StoreError) -> Int {
        try await write { db in try db.rows(PushRules.releaseLeases(ofInstance: instance, keeping: owner)) { try $0.text("registration_id") }.count }
    }

    package func purgePushNotifications(before: Int64) async throws(StoreError) -> Int {
        try await write { db in
            let ids = try db.rows(PushRules.purgeable(before: before)) { try $0.text("id") }
            for start in stride(from: 0, to: ids.count, by: PushRules.deliveriesPerInsert) {
                let chunk = ids[start..<min(start + PushRules.deliveriesPerInsert, ids.count)]
                for statement in PushRules.delete(notifications: chunk) { try db.run(statement, cached: false) }
            }
            return ids.count
        }
    }
}
