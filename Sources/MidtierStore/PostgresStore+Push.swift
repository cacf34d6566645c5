package import MidtierCore
import PostgresNIO

// Push notifications in the shared store (docs/push.md, "Delivery"). Several instances claim
// deliveries from the same table: a claim locks the rows it chooses with `FOR UPDATE SKIP
// LOCKED` and leases them in the same statement, so two claims never choose one row, and a
// leased row is not due again until its lease runs out. None of these writes is announced
// (every instance reads them from here) but clearing a token, which changes a registration.

extension PostgresStore: PushStore {
    static let notificationColumns = "n.id, n.app_id, n.sender, n.payload, n.created_at"

    package func enqueue(_ notification: PushNotificationRecord, registrations: [String]) async throws(StoreError) {
        try await write(lock: nil) { connection, logger in
            try await connection.query(
                """
                INSERT INTO midtier_push_notifications (id, app_id, sender, payload, created_at)
                VALUES (\(notification.id), \(notification.app), \(notification.sender), \(notification.payload), \(notification.createdAt))
                """, logger: logger)
            guard !registrations.isEmpty else { return }
            // One statement for all; the primary key (COLLATE "C": by bytes) keeps a registration
            // listed twice once.
            try await connection.query(
                """
                INSERT INTO midtier_push_deliveries (notification_id, registration_id, state, attempts, next_attempt_at, updated_at, reason)
                SELECT \(notification.id), r.id, 'pending', 0, \(notification.createdAt), \(notification.createdAt), ''
                FROM unnest(\(registrations)::text[]) AS r(id)
                ON CONFLICT (notification_id, registration_id) DO NOTHING
                """, logger: logger)
        }
    }

    package func claimPushDeliveries(
        owner: String, now: Int64, leaseUntil: Int64,
        limit: Int
    ) async throws(StoreError) -> [ClaimedPushDelivery] {
        guard limit > 0 else { return [] }
        return try await write(lock: nil) { connection, logger in
            let rows = try await connection.query(
                """
                WITH claimed AS (
                    UPDATE midtier_push_deliveries SET lease_owner = \(owner), lease_until = \(leaseUntil)
                    WHERE (notification_id, registration_id) IN (
                        SELECT notification_id, registration_id FROM midtier_push_deliveries
                        WHERE state = 'pending' AND next_attempt_at <= \(now) AND (lease_until IS NULL OR lease_until < \(now))
                        ORDER BY next_attempt_at, notification_id, registration_id LIMIT \(Int64(limit))
                        FOR UPDATE SKIP LOCKED)
                    RETURNING notification_id, registration_id, attempts, next_attempt_at
                )
                SELECT \(unescaped: Self.notificationColumns), c.registration_id, c.attempts
                FROM claimed c JOIN midtier_push_notifications n ON n.id = c.notification_id
                ORDER BY c.next_attempt_at, c.notification_id, c.registration_id
                """, logger: logger)
            var claimed: [ClaimedPushDelivery] = []
            for try await row in rows.decode((String, String, String, String, Int64, String, Int64).self) {
                claimed.append(
                    ClaimedPushDelivery(
                        notification: PushNotificationRecord(id: row.0, app: row.1, sender: row.2, payload: row.3, createdAt: row.4),
                        registration: row.5, attempts: Int(row.6)))
            }
            return claimed
        }
    }

    package func finishPushDelivery(
        notification: String, registration: String, owner: String, outcome: PushDeliveryOutcome,
        now: Int64
    ) async throws(StoreError) -> Bool {
        let recorded = outcome.recorded
        return try await write(lock: nil) { connection, logger in
            let rows = try await connection.query(
                """
                UPDATE midtier_push_deliveries SET state = \(recorded.state.rawValue), attempts = attempts + \(Int64(recorded.addedAttempts)),
                    next_attempt_at = COALESCE(\(recorded.nextAttemptAt)::int8, next_attempt_at), updated_at = \(now),
                    provider = COALESCE(\(recorded.provider?.rawValue)::text, provider), reason = \(recorded.reason),
                    lease_owner = NULL, lease_until = NULL
                WHERE notification_id = \(notification) AND registration_id = \(registration) AND state = 'pending'
                    AND lease_owner = \(owner)
                RETURNING 1
                """, logger: logger)
            var finished = false
            for try await _ in rows { finished = true }
            return finished
        }
    }

    package func pushNotification(id: String) async throws(StoreError) -> (PushNotificationRecord, [PushDeliveryRecord])? {
        let found: (PushNotificationRecord, [PushDeliveryRecord])? = try await read { client, logger in
            var notification: PushNotificationRecord?
            let rows = try await client.query(
                """
                SELECT \(unescaped: Self.notificationColumns) FROM midtier_push_notifications n WHERE n.id = \(id)
                """, logger: logger)
            for try await row in rows.decode((String, String, String, String, Int64).self) {
                notification = PushNotificationRecord(id: row.0, app: row.1, sender: row.2, payload: row.3, createdAt: row.4)
            }
            guard let notification else { return nil }
            var deliveries: [PushDeliveryRecord] = []
            let found = try await client.query(
                """
                SELECT registration_id, state, attempts, next_attempt_at, updated_at, provider, reason FROM midtier_push_deliveries
                WHERE notification_id = \(id) ORDER BY registration_id COLLATE "C"
                """, logger: logger)
            for try await row in found.decode((String, String, Int64, Int64, Int64, String?, String).self) {
                deliveries.append(
                    PushDeliveryRecord(
                        notification: id, registration: row.0,
                        // An unreadable state is shown as failed, never as pending again.
                        state: PushDeliveryState(rawValue: row.1) ?? .failed, attempts: Int(row.2), nextAttemptAt: row.3,
                        updatedAt: row.4, provider: row.5.flatMap(PushProvider.init(rawValue:)), reason: row.6))
            }
            return (notification, deliveries)
        }
        return found
    }

    package func recentPushNotifications(app: String?, limit: Int) async throws(StoreError) -> [PushNotificationRecord] {
        let limit = Int64(max(0, limit))
        return try await read { client, logger in
            let rows: PostgresRowSequence
            if let app {
                rows = try await client.query(
                    """
                    SELECT \(unescaped: Self.notificationColumns) FROM midtier_push_notifications n WHERE n.app_id = \(app)
                    ORDER BY n.created_at DESC, n.id DESC LIMIT \(limit)
                    """, logger: logger)
            } else {
                rows = try await client.query(
                    """
                    SELECT \(unescaped: Self.notificationColumns) FROM midtier_push_notifications n
                    ORDER BY n.created_at DESC, n.id DESC LIMIT \(limit)
                    """, logger: logger)
            }
            var notifications: [PushNotificationRecord] = []
            for try await row in rows.decode((String, String, String, String, Int64).self) {
                notifications.append(PushNotificationRecord(id: row.0, app: row.1, sender: row.2, payload: row.3, createdAt: row.4))
            }
            return notifications
        }
    }

    package func pendingPushDeliveries() async throws(StoreError) -> Int {
        try await read { client, logger in
            var count: Int64 = 0
            let rows = try await client.query("SELECT COUNT(*) FROM midtier_push_deliveries WHERE state = 'pending'", logger: logger)
            for try await (value) in rows.decode(Int64.self) { count = value }
            return Int(count)
        }
    }

    package func clearPushToken(registration: String, provider: PushProvider, token: String) async throws(StoreError) -> Bool {
        // An empty token is no token: there is nothing to clear.
        guard !token.isEmpty else { return false }
        let column = provider.tokenColumn
        // The write lock: the change is announced, so that other instances forget the
        // registration they keep in memory.
        return try await write { connection, logger in
            let rows = try await connection.query(
                """
                UPDATE midtier_registration SET \(unescaped: column) = '' WHERE id = \(registration)
                    AND \(unescaped: column) COLLATE "C" = \(token) RETURNING id
                """, logger: logger)
            var cleared = false
            for try await _ in rows { cleared = true }
            guard cleared else { return false }
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
        let column = provider.tokenColumn
        // The write lock: each change is announced, so that other instances forget the
        // registrations they keep in memory.
        return try await write { connection, logger in
            let rows = try await connection.query(
                """
                UPDATE midtier_registration SET \(unescaped: column) = '' WHERE app_id COLLATE "C" = \(app)
                    AND id COLLATE "C" <> \(keeping) AND \(unescaped: column) COLLATE "C" = \(token) RETURNING id
                """, logger: logger)
            var released: [String] = []
            for try await (id) in rows.decode(String.self) { released.append(id) }
            let at = self.clock.now()
            for id in released { try await Self.announce(.device(id: id), at: at, on: connection, logger: logger) }
            return released
        }
    }

    package func pushTokenHolders(_ token: String, provider: PushProvider, app: String) async throws(StoreError) -> [UserIdentity] {
        guard !token.isEmpty else { return [] }
        let column = provider.tokenColumn
        return try await read { client, logger in
            let rows = try await client.query(
                """
                SELECT DISTINCT user_realm, user_id FROM midtier_registration
                WHERE app_id COLLATE "C" = \(app) AND \(unescaped: column) COLLATE "C" = \(token)
                """, logger: logger)
            var users: [UserIdentity] = []
            for try await (realm, id) in rows.decode((String, String).self) { users.append(UserIdentity(realm: realm, id: id)) }
            return users
        }
    }

    package func purgePushNotifications(before: Int64) async throws(StoreError) -> Int {
        try await write(lock: nil) { connection, logger in
            let rows = try await connection.query(
                """
                WITH gone AS (
                    DELETE FROM midtier_push_notifications n WHERE n.created_at < \(before)
                        AND NOT EXISTS (SELECT 1 FROM midtier_push_deliveries d WHERE d.notification_id = n.id AND d.state = 'pending')
                    RETURNING n.id
                ), deliveries AS (
                    DELETE FROM midtier_push_deliveries WHERE notification_id IN (SELECT id FROM gone)
                )
                SELECT COUNT(*) FROM gone
                """, logger: logger)
            var purged: Int64 = 0
            for try await (count) in rows.decode(Int64.self) { purged = count }
            return Int(purged)
        }
    }
}
