import GRDB
package import MidtierCore

// Push notifications in the embedded store (docs/push.md, "Delivery"). SQLite has one writer
// at a time, so a claim — choosing the due deliveries and leasing them — is one write
// transaction that no other claim can interleave with.

extension PushDeliveryOutcome {
    /// What an outcome writes: the state, how many attempts it adds, when a retry is due (nil:
    /// the due time stays), the provider (nil: the one recorded stays) and the reason.
    var recorded: (state: PushDeliveryState, addedAttempts: Int, nextAttemptAt: Int64?, provider: PushProvider?, reason: String) {
        switch self {
        case .delivered(let provider): (.delivered, 1, nil, provider, "")
        case .retry(let at, let provider, let reason): (.pending, 1, at, provider, reason)
        case .failed(let provider, let reason): (.failed, 1, nil, provider, reason)
        case .skipped(let reason): (.skipped, 0, nil, nil, reason)
        case .putBack(let at, let reason): (.pending, 0, at, nil, reason)
        }
    }
}

extension PushProvider {
    /// The registration column holding this provider's token (a constant, never input).
    var tokenColumn: String {
        switch self {
        case .apns: "apns_device_token"
        case .fcm: "android_gcm_registration_id"
        }
    }
}

extension SQLiteStore: PushStore {
    private static func notification(_ row: Row) -> PushNotificationRecord {
        PushNotificationRecord(id: row["id"], app: row["app_id"], sender: row["sender"], payload: row["payload"], createdAt: row["created_at"])
    }

    package func enqueue(_ notification: PushNotificationRecord, registrations: [String]) async throws(StoreError) {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO push_notifications (id, app_id, sender, payload, created_at) VALUES (?,?,?,?,?)",
                arguments: [notification.id, notification.app, notification.sender, notification.payload, notification.createdAt])
            // The primary key keeps a registration listed twice once (BINARY: by its bytes).
            let insert = try db.cachedStatement(
                sql: """
                    INSERT OR IGNORE INTO push_deliveries (notification_id, registration_id, state, attempts, next_attempt_at, updated_at, reason)
                    VALUES (?, ?, 'pending', 0, ?, ?, '')
                    """)
            for registration in registrations {
                try insert.execute(arguments: [notification.id, registration, notification.createdAt, notification.createdAt])
            }
        }
    }

    package func claimPushDeliveries(
        owner: String, now: Int64, leaseUntil: Int64,
        limit: Int
    ) async throws(StoreError) -> [ClaimedPushDelivery] {
        guard limit > 0 else { return [] }
        return try await write { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT n.id, n.app_id, n.sender, n.payload, n.created_at, d.registration_id, d.attempts
                    FROM push_deliveries d JOIN push_notifications n ON n.id = d.notification_id
                    WHERE d.state = 'pending' AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until < ?)
                    ORDER BY d.next_attempt_at, d.notification_id, d.registration_id LIMIT ?
                    """, arguments: [now, now, limit])
            let lease = try db.cachedStatement(
                sql: """
                    UPDATE push_deliveries SET lease_owner = ?, lease_until = ? WHERE notification_id = ? AND registration_id = ?
                    """)
            return try rows.map { row in
                let claimed = ClaimedPushDelivery(
                    notification: Self.notification(row), registration: row["registration_id"],
                    attempts: row["attempts"])
                try lease.execute(arguments: [owner, leaseUntil, claimed.notification.id, claimed.registration])
                return claimed
            }
        }
    }

    package func finishPushDelivery(
        notification: String, registration: String, owner: String, outcome: PushDeliveryOutcome,
        now: Int64
    ) async throws(StoreError) -> Bool {
        let recorded = outcome.recorded
        return try await write { db in
            try db.execute(
                sql: """
                    UPDATE push_deliveries SET state = ?, attempts = attempts + ?, next_attempt_at = COALESCE(?, next_attempt_at),
                        updated_at = ?, provider = COALESCE(?, provider), reason = ?, lease_owner = NULL, lease_until = NULL
                    WHERE notification_id = ? AND registration_id = ? AND state = 'pending' AND lease_owner = ?
                    """,
                arguments: [
                    recorded.state.rawValue, recorded.addedAttempts, recorded.nextAttemptAt, now, recorded.provider?.rawValue,
                    recorded.reason, notification, registration, owner,
                ])
            return db.changesCount == 1
        }
    }

    package func pushNotification(id: String) async throws(StoreError) -> (PushNotificationRecord, [PushDeliveryRecord])? {
        let found: (PushNotificationRecord, [PushDeliveryRecord])? = try await read { db in
            guard
                let notification = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT id, app_id, sender, payload, created_at FROM push_notifications WHERE id = ?
                        """, arguments: [id]
                ).map(Self.notification)
            else { return nil }
            let deliveries = try Row.fetchAll(
                db,
                sql: """
                    SELECT registration_id, state, attempts, next_attempt_at, updated_at, provider, reason FROM push_deliveries
                    WHERE notification_id = ? ORDER BY registration_id
                    """, arguments: [id]
            ).map { row in
                PushDeliveryRecord(
                    notification: id, registration: row["registration_id"],
                    // An unreadable state is shown as failed, never as pending again.
                    state: PushDeliveryState(rawValue: row["state"]) ?? .failed, attempts: row["attempts"],
                    nextAttemptAt: row["next_attempt_at"], updatedAt: row["updated_at"],
                    provider: (row["provider"] as String?).flatMap(PushProvider.init(rawValue:)), reason: row["reason"])
            }
            return (notification, deliveries)
        }
        return found
    }

    package func recentPushNotifications(app: String?, limit: Int) async throws(StoreError) -> [PushNotificationRecord] {
        try await read { db in
            let columns = "id, app_id, sender, payload, created_at"
            if let app {
                return try Row.fetchAll(
                    db,
                    sql: """
                        SELECT \(columns) FROM push_notifications WHERE app_id = ? ORDER BY created_at DESC, id DESC LIMIT ?
                        """, arguments: [app, max(0, limit)]
                ).map(Self.notification)
            }
            return try Row.fetchAll(
                db, sql: "SELECT \(columns) FROM push_notifications ORDER BY created_at DESC, id DESC LIMIT ?",
                arguments: [max(0, limit)]
            ).map(Self.notification)
        }
    }

    package func pendingPushDeliveries() async throws(StoreError) -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_deliveries WHERE state = 'pending'") ?? 0 }
    }

    package func clearPushToken(registration: String, provider: PushProvider, token: String) async throws(StoreError) -> Bool {
        // An empty token is no token: there is nothing to clear.
        guard !token.isEmpty else { return false }
        let column = provider.tokenColumn
        return try await write { db in
            // BINARY: the token stored must be exactly these bytes.
            try db.execute(sql: "UPDATE registration SET \(column) = '' WHERE id = ? AND \(column) = ?", arguments: [registration, token])
            return db.changesCount == 1
        }
    }

    package func registrationsReleasingPushToken(
        _ token: String, provider: PushProvider, app: String,
        keeping: String
    ) async throws(StoreError) -> [String] {
        // An empty token is no token: no phone holds it.
        guard !token.isEmpty else { return [] }
        let column = provider.tokenColumn
        return try await write { db in
            // BINARY: the app id, the kept id and the token are compared by their exact bytes.
            let ids = try String.fetchAll(
                db, sql: "SELECT id FROM registration WHERE app_id = ? AND id <> ? AND \(column) = ?",
                arguments: [app, keeping, token])
            let clear = try db.cachedStatement(sql: "UPDATE registration SET \(column) = '' WHERE id = ? AND \(column) = ?")
            for id in ids { try clear.execute(arguments: [id, token]) }
            return ids
        }
    }

    package func pushTokenHolders(_ token: String, provider: PushProvider, app: String) async throws(StoreError) -> [UserIdentity] {
        guard !token.isEmpty else { return [] }
        let column = provider.tokenColumn
        return try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT DISTINCT user_realm, user_id FROM registration WHERE app_id = ? AND \(column) = ?",
                arguments: [app, token]
            ).map { UserIdentity(realm: $0["user_realm"], id: $0["user_id"]) }
        }
    }

    package func purgePushNotifications(before: Int64) async throws(StoreError) -> Int {
        try await write { db in
            let ids = try String.fetchAll(
                db,
                sql: """
                    SELECT id FROM push_notifications n WHERE created_at < ?
                        AND NOT EXISTS (SELECT 1 FROM push_deliveries d WHERE d.notification_id = n.id AND d.state = 'pending')
                    """, arguments: [before])
            let deleteDeliveries = try db.cachedStatement(sql: "DELETE FROM push_deliveries WHERE notification_id = ?")
            let deleteNotification = try db.cachedStatement(sql: "DELETE FROM push_notifications WHERE id = ?")
            for id in ids {
                try deleteDeliveries.execute(arguments: [id])
                try deleteNotification.execute(arguments: [id])
            }
            return ids.count
        }
    }
}
