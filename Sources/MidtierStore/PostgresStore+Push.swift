package import MidtierCore
import PostgresNIO

// Push notifications in the shared store (docs/push.md, "Delivery"; the statements:
// PushRules). Several instances claim deliveries from the same table: a claim locks the rows it
// chooses with `FOR UPDATE SKIP LOCKED` and leases them in the same statement, so two claims
// never choose one row, and a leased row is not due again until its lease runs out. None of
// these writes is announced (every instance reads them from here) but clearing a token, which
// changes a registration.

extension PostgresStore: PushStore {
    package func enqueue(_ notification: PushNotificationRecord, registrations: [String]) async throws(StoreError) {
        try await enqueue([(notification, registrations)])
    }

    package func enqueue(_ notifications: [(notification: PushNotificationRecord, registrations: [String])]) async throws(StoreError) {
        try await write(lock: nil) { connection, logger in
            for (notification, registrations) in notifications {
                try await connection.run(PushRules.insert(notification), logger: logger)
                for start in stride(from: 0, to: registrations.count, by: PushRules.deliveriesPerInsert) {
                    let chunk = registrations[start..<min(start + PushRules.deliveriesPerInsert, registrations.count)]
                    try await connection.run(PushRules.deliveries(of: notification, to: chunk), logger: logger)
                }
            }
        }
    }

    package func claimPushDeliveries(
        owner: String, now: Int64, leaseUntil: Int64,
        limit: Int
    ) async throws(StoreError) -> [ClaimedPushDelivery] {
        guard limit > 0 else { return [] }
        return try await write(lock: nil) { connection, logger in
            let leased = try await connection.rows(
                PushRules.claim(owner: owner, now: now, leaseUntil: leaseUntil, limit: limit), logger: logger, PushRules.leased)
            guard !leased.isEmpty else { return [] }
            let ids = Set(leased.map { ExactString($0.notification) }).map(\.value)
            let notifications = try await connection.rows(PushRules.notifications(ids), logger: logger, PushRules.notification)
            let recipients = Set(leased.map { ExactString($0.registration) }).map(\.value)
            return PushRules.claimed(
                leased, notifications: notifications,
                recipients: try await connection.rows(PushRules.recipients(recipients), logger: logger, PushRules.recipient))
        }
    }

    package func pushRecipients(registrations ids: [String]) async throws(StoreError) -> [ExactString: PushRecipient] {
        guard !ids.isEmpty else { return [:] }
        return PushRules.byRegistration(try await rows(PushRules.recipients(ids)) { try PushRules.recipient($0) })
    }

    package func finishPushDeliveries(_ finished: [FinishedPushDelivery], owner: String, now: Int64) async throws(StoreError) -> Int {
        guard !finished.isEmpty else { return 0 }
        return try await write(lock: nil) { connection, logger in
            var count = 0
            for start in stride(from: 0, to: finished.count, by: PushRules.outcomesPerStatement) {
                let chunk = finished[start..<min(start + PushRules.outcomesPerStatement, finished.count)]
                count += try await connection.rows(PushRules.finish(chunk, owner: owner, now: now), logger: logger) { try $0.text("registration_id") }
                    .count
            }
            return count
        }
    }

    package func pushNotification(id: String) async throws(StoreError) -> (PushNotificationRecord, [PushDeliveryRecord])? {
        guard let notification = try await rows(PushRules.notification(id: id), { try PushRules.notification($0) }).first else { return nil }
        return (notification, try await rows(PushRules.deliveries(of: id)) { try PushRules.delivery($0, of: id) })
    }

    package func pushNotification(id: String, deliveriesAfter after: String?, limit: Int) async throws(StoreError) -> PushNotificationSummary? {
        // One read-only transaction that sees one snapshot: the page and the counts at one moment.
        try await read { connection, logger in
            try await connection.withTransaction(logger: logger) { connection in
                try await connection.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
                guard let notification = try await connection.rows(PushRules.notification(id: id), logger: logger, PushRules.notification).first
                else { return nil }
                let deliveries = try await connection.rows(PushRules.deliveries(of: id, after: after, limit: limit), logger: logger) {
                    try PushRules.delivery($0, of: id)
                }
                let counts = PushRules.counts(try await connection.rows(PushRules.deliveryStates(of: id), logger: logger, PushRules.stateCount))
                let providers = try await connection.rows(PushRules.providers(of: id), logger: logger, PushRules.provider)
                return PushNotificationSummary(
                    notification: notification, deliveries: deliveries, counts: counts, providers: Set(providers.compactMap { $0 }))
            }
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
        // The write lock: the change is announced, so that other instances forget the
        // registration they keep in memory.
        return try await write { connection, logger in
            guard try await connection.finds(PushRules.clear(token, provider: provider, registration: registration), logger: logger) else {
                return false
            }
            try await Self.announce(.device(id: registration), at: self.clock.now(), on: connection, logger: logger)
            return true
        }
    }

    package func registrationsReleasingPushToken(
        _ token: String, provider: PushProvider, app: String,
        keeping: String
    ) async throws(StoreError) -> [String] {
        // An empty token is no token: no phone holds it.
        guard !token.isEmpty else { return [] }
        // The write lock: each change is announced, so that other instances forget the
        // registrations they keep in memory.
        return try await write { connection, logger in
            let released = try await connection.rows(PushRules.release(token, provider: provider, app: app, keeping: keeping), logger: logger) {
                try $0.text("id")
            }
            let at = self.clock.now()
            for id in released { try await Self.announce(.device(id: id), at: at, on: connection, logger: logger) }
            return released
        }
    }

    package func pushTokenHolders(_ token: String, provider: PushProvider, app: String) async throws(StoreError) -> [UserIdentity] {
        guard !token.isEmpty else { return [] }
        return try await rows(PushRules.holders(of: token, provider: provider, app: app)) {
            UserIdentity(realm: try $0.text("user_realm"), id: try $0.text("user_id"))
        }
    }

    package func releasePushLeases(ofInstance instance: String, keeping owner: String) async throws(StoreError) -> Int {
        try await write(lock: nil) { connection, logger in
            try await connection.rows(PushRules.releaseLeases(ofInstance: instance, keeping: owner), logger: logger) {
                try $0.text("registration_id")
            }.count
        }
    }

    package func purgePushNotifications(before: Int64) async throws(StoreError) -> Int {
        try await write(lock: nil) { connection, logger in
            let ids = try await connection.rows(PushRules.purgeable(before: before), logger: logger) { try $0.text("id") }
            for start in stride(from: 0, to: ids.count, by: PushRules.deliveriesPerInsert) {
                let chunk = ids[start..<min(start + PushRules.deliveriesPerInsert, ids.count)]
                for statement in PushRules.delete(notifications: chunk) { try await connection.run(statement, logger: logger) }
            }
            return ids.count
        }
    }
}
