import MidtierCore

/// Push notifications and their deliveries, written once for both stores (``StoreQuery``;
/// docs/push.md, "Delivery"): a notification as its sender gave it, one delivery per
/// registration, each leased to one worker at a time.
enum PushRules {
    static let notificationColumns: StaticString = "n.id, n.app_id, n.sender, n.payload, n.created_at"

    static func notification(_ row: some StoreRow) throws -> PushNotificationRecord {
        PushNotificationRecord(
            id: try row.text("id"), app: try row.text("app_id"), sender: try row.text("sender"), payload: try row.text("payload"),
            createdAt: try row.integer("created_at"))
    }

    static func insert(_ notification: PushNotificationRecord) -> StoreQuery {
        "INSERT INTO \(table: "push_notifications") (id, app_id, sender, payload, created_at) VALUES (\(notification.id), "
            + "\(notification.app), \(notification.sender), \(notification.payload), \(notification.createdAt))"
    }

    /// How many deliveries one statement inserts at most.
    static let deliveriesPerInsert = 1_000

    /// One pending delivery of `notification`, due at once, per registration of `registrations`
    /// (at most ``deliveriesPerInsert``, at least one); a registration listed twice once (the
    /// primary key compares ids by their bytes).
    static func deliveries(of notification: PushNotificationRecord, to registrations: ArraySlice<String>) -> StoreQuery {
        var values: StoreQuery = ""
        for (index, registration) in registrations.enumerated() { values = values + (index == 0 ? "(\(registration))" : ", (\(registration))") }
        return "INSERT INTO \(table: "push_deliveries") (notification_id, registration_id, state, attempts, next_attempt_at, updated_at, reason) "
            + "SELECT \(notification.id), v.column1, 'pending', 0, \(notification.createdAt), \(notification.createdAt), '' "
            + "FROM (VALUES " + values + ") AS v WHERE TRUE ON CONFLICT (notification_id, registration_id) DO NOTHING"
    }

    /// Leases to `owner` until `leaseUntil` up to `limit` pending deliveries due at `now` whose
    /// lease ran out, oldest due first, passing over those another claim is taking (PostgreSQL);
    /// returns each leased delivery's keys, attempts and due time.
    static func claim(owner: String, now: Int64, leaseUntil: Int64, limit: Int) -> StoreQuery {
        "UPDATE \(table: "push_deliveries") SET lease_owner = \(owner), lease_until = \(leaseUntil) "
            + "WHERE (notification_id, registration_id) IN (SELECT notification_id, registration_id FROM \(table: "push_deliveries") "
            + "WHERE state = 'pending' AND next_attempt_at <= \(now) AND (lease_until IS NULL OR lease_until < \(now)) "
            + "ORDER BY next_attempt_at, notification_id, registration_id LIMIT \(limit)\(lock: .updateSkippingLocked)) "
            + "RETURNING notification_id, registration_id, attempts, next_attempt_at"
    }

    /// The notifications `ids` (at least one).
    static func notifications(_ ids: some Collection<String>) -> StoreQuery {
        "SELECT \(sql: notificationColumns) FROM \(table: "push_notifications") n WHERE n.id IN (\(list: ids))"
    }

    static func notification(id: String) -> StoreQuery {
        "SELECT \(sql: notificationColumns) FROM \(table: "push_notifications") n WHERE n.id = \(id)"
    }

    /// Ends the leases of `instance`'s earlier owners (`instance/…`, not `owner`); a row each.
    static func releaseLeases(ofInstance instance: String, keeping owner: String) -> StoreQuery {
        "UPDATE \(table: "push_deliveries") SET lease_owner = NULL, lease_until = NULL "
            + "WHERE state = 'pending' AND lease_owner IS NOT NULL AND lease_owner <> \(owner) "
            + "AND \(positionOf: instance + "/", in: "lease_owner") = 1 RETURNING registration_id"
    }

    /// What a delivery is checked against (``PushRecipient``), for the registrations `ids` (at
    /// least one): a few columns of each, and its owner's block's kind (null when not blocked).
    static func recipients(_ ids: some Collection<String>) -> StoreQuery {
        recipientColumns + " WHERE r.id IN (\(list: ids))"
    }

    private static var recipientColumns: StoreQuery {
        "SELECT r.id, r.app_id, r.state, r.apns_device_token, r.android_gcm_registration_id, b.kind AS b_kind "
            + "FROM \(table: "registration") r LEFT JOIN \(table: "user_block") b "
            + "ON b.user_realm = r.user_realm AND b.user_id = r.user_id"
    }

    static func recipient(_ row: some StoreRow) throws -> PushRecipient {
        PushRecipient(
            registration: try row.text("id"), app: try row.text("app_id"),
            // An unreadable state is treated as the safest one, as for a whole registration.
            state: Registration.State(rawValue: try row.text("state")) ?? .wiped,
            apnsToken: try row.text("apns_device_token"), fcmToken: try row.text("android_gcm_registration_id"),
            // An unreadable block kind is treated as a block of everything.
            block: try row.optionalText("b_kind").map { UserBlock.Kind(rawValue: $0) ?? .all })
    }

    /// `recipients` by their registration ids' bytes.
    static func byRegistration(_ recipients: [PushRecipient]) -> [ExactString: PushRecipient] {
        var byID: [ExactString: PushRecipient] = [:]
        for recipient in recipients { byID[ExactString(recipient.registration)] = recipient }
        return byID
    }

    /// The most outcomes ``finish(_:owner:now:)`` records in one statement (7 values each).
    static let outcomesPerStatement = 256

    /// Records outcomes (at least one, at most ``outcomesPerStatement``) at `now` and ends their
    /// leases, each if `owner` holds it; returns a row for each it recorded. One statement for
    /// all: a statement per outcome was a round trip each, and 256 of them took PostgreSQL past
    /// the store's deadline on a loaded machine.
    static func finish(_ batch: some Collection<FinishedPushDelivery>, owner: String, now: Int64) -> StoreQuery {
        var values: StoreQuery = ""
        for (index, finished) in batch.enumerated() {
            let recorded = finished.outcome.recorded
            values =
                values + (index == 0 ? "(" : ", (")
                + "CAST(\(finished.notification) AS TEXT), CAST(\(finished.registration) AS TEXT), CAST(\(recorded.state.rawValue) AS TEXT), "
                + "CAST(\(recorded.addedAttempts) AS BIGINT), CAST(\(recorded.nextAttemptAt) AS BIGINT), "
                + "CAST(\(recorded.provider?.rawValue) AS TEXT), CAST(\(recorded.reason) AS TEXT))"
        }
        // The outcome's columns are named apart from the table's: SQLite's RETURNING names the
        // table's columns unqualified, which PostgreSQL would find ambiguous otherwise.
        return "WITH outcome (o_notification, o_registration, o_state, o_added, o_next, o_provider, o_reason) AS (VALUES "
            + values + ") UPDATE \(table: "push_deliveries") AS d SET state = o_state, attempts = d.attempts + o_added, "
            + "next_attempt_at = COALESCE(o_next, d.next_attempt_at), updated_at = \(now), "
            + "provider = COALESCE(o_provider, d.provider), reason = o_reason, lease_owner = NULL, lease_until = NULL "
            + "FROM outcome WHERE d.notification_id = o_notification AND d.registration_id = o_registration "
            + "AND d.state = 'pending' AND d.lease_owner = \(owner) RETURNING registration_id"
    }

    /// A notification's deliveries, by registration id's bytes.
    static func deliveries(of notification: String) -> StoreQuery {
        "SELECT registration_id, state, attempts, next_attempt_at, updated_at, provider, reason FROM \(table: "push_deliveries") "
            + "WHERE notification_id = \(notification) ORDER BY \(bytewise: "registration_id")"
    }

    /// At most `limit` of a notification's deliveries after the registration id `after` (by
    /// bytes), by registration id's bytes: one range of the primary key (notification_id,
    /// registration_id), read in its order.
    static func deliveries(of notification: String, after: String?, limit: Int) -> StoreQuery {
        var query: StoreQuery =
            "SELECT registration_id, state, attempts, next_attempt_at, updated_at, provider, reason FROM \(table: "push_deliveries") "
            + "WHERE notification_id = \(notification)"
        if let after { query = query + " AND registration_id > \(after)" }
        return query + " ORDER BY \(bytewise: "registration_id") LIMIT \(max(0, limit))"
    }

    /// How many of a notification's deliveries are in each state (columns `state`, `count`):
    /// one range of `push_deliveries_states` (notification_id, state), the index alone.
    static func deliveryStates(of notification: String) -> StoreQuery {
        "SELECT state, COUNT(*) AS count FROM \(table: "push_deliveries") WHERE notification_id = \(notification) GROUP BY state"
    }

    /// The push services (column `provider`) that a delivery of `notification` went through:
    /// each looked for until one is found, within the primary key's range of the notification.
    static func providers(of notification: String) -> StoreQuery {
        var query: StoreQuery = ""
        for (index, provider) in PushProvider.allCases.enumerated() {
            query =
                query + (index == 0 ? "" : " UNION ALL ") + "SELECT \(provider.rawValue) AS provider WHERE EXISTS (SELECT 1 FROM "
                + "\(table: "push_deliveries") WHERE notification_id = \(notification) AND provider = \(provider.rawValue))"
        }
        return query
    }

    static func provider(_ row: some StoreRow) throws -> PushProvider? { PushProvider(rawValue: try row.text("provider")) }

    /// The counts of ``deliveryStates(of:)``'s rows; an unreadable state counts as failed, as
    /// ``delivery(_:of:)`` shows it.
    static func counts(_ rows: [(state: String, count: Int64)]) -> PushDeliveryCounts {
        var counts = PushDeliveryCounts()
        for row in rows { counts[PushDeliveryState(rawValue: row.state) ?? .failed] += Int(row.count) }
        return counts
    }

    static func stateCount(_ row: some StoreRow) throws -> (state: String, count: Int64) {
        (try row.text("state"), try row.integer("count"))
    }

    static func delivery(_ row: some StoreRow, of notification: String) throws -> PushDeliveryRecord {
        PushDeliveryRecord(
            notification: notification, registration: try row.text("registration_id"),
            // An unreadable state is shown as failed, never as pending again.
            state: PushDeliveryState(rawValue: try row.text("state")) ?? .failed, attempts: Int(try row.integer("attempts")),
            nextAttemptAt: try row.integer("next_attempt_at"), updatedAt: try row.integer("updated_at"),
            provider: try row.optionalText("provider").flatMap(PushProvider.init(rawValue:)), reason: try row.text("reason"))
    }

    /// The newest notifications first, of `app` or of all, after `before` in that order when
    /// given, at most `limit`: one range of `push_notifications_app` (app, created_at, id) or
    /// `push_notifications_created` (created_at, id), read backwards. The row value keeps the
    /// place a range both stores' planners use; ids compare by their bytes (BINARY, and
    /// PostgreSQL's column is `COLLATE "C"`).
    static func recent(app: String?, before: PushNotificationCursor? = nil, limit: Int) -> StoreQuery {
        var query: StoreQuery = "SELECT \(sql: notificationColumns) FROM \(table: "push_notifications") n WHERE TRUE"
        if let app { query = query + " AND n.app_id = \(app)" }
        if let before { query = query + " AND (n.created_at, n.id) < (\(before.createdAt), \(before.id))" }
        return query + " ORDER BY n.created_at DESC, n.id DESC LIMIT \(max(0, limit))"
    }

    /// How many deliveries are pending (column `count`).
    static let pending: StoreQuery = "SELECT COUNT(*) AS count FROM \(table: "push_deliveries") WHERE state = 'pending'"

    /// Clears `token` from the registration's `provider` token if it holds exactly that token;
    /// returns a row when it did.
    static func clear(_ token: String, provider: PushProvider, registration: String) -> StoreQuery {
        "UPDATE \(table: "registration") SET \(column: provider.tokenColumn) = '' WHERE id = \(registration) "
            + "AND \(bytewise: provider.tokenColumn) = \(token) RETURNING id"
    }

    /// Takes `token` from every registration of `app` but `keeping` that holds it
    /// (``holds(_:provider:)``); returns their ids.
    static func release(_ token: String, provider: PushProvider, app: String, keeping: String) -> StoreQuery {
        "UPDATE \(table: "registration") SET \(column: provider.tokenColumn) = '' WHERE \(bytewise: "app_id") = \(app) "
            + "AND \(bytewise: "id") <> \(keeping) AND " + holds(token, provider: provider) + " RETURNING id"
    }

    /// The users whose registrations of `app` hold `token` (``holds(_:provider:)``).
    static func holders(of token: String, provider: PushProvider, app: String) -> StoreQuery {
        "SELECT DISTINCT user_realm, user_id FROM \(table: "registration") WHERE \(bytewise: "app_id") = \(app) AND "
            + holds(token, provider: provider)
    }

    /// Whether a registration holds `token`: an FCM token by its exact bytes, an APNs token
    /// (hex digits, which APNs reads in either case) without regard to ASCII case, so that a
    /// token kept before Midtier kept them in lower case is one phone with its lower-case form.
    static func holds(_ token: String, provider: PushProvider) -> StoreQuery {
        switch provider {
        case .apns: "lower(\(column: provider.tokenColumn)) = lower(\(token))"
        case .fcm: "\(bytewise: provider.tokenColumn) = \(token)"
        }
    }

    /// Notifications created before `before` with no pending delivery (their `id`s).
    static func purgeable(before: Int64) -> StoreQuery {
        "SELECT id FROM \(table: "push_notifications") n WHERE created_at < \(before) AND NOT EXISTS "
            + "(SELECT 1 FROM \(table: "push_deliveries") d WHERE d.notification_id = n.id AND d.state = 'pending')"
    }

    /// Deletes the notifications `ids` (at least one) with their deliveries, in this order.
    static func delete(notifications ids: some Collection<String>) -> [StoreQuery] {
        [
            "DELETE FROM \(table: "push_deliveries") WHERE notification_id IN (\(list: ids))",
            "DELETE FROM \(table: "push_notifications") WHERE id IN (\(list: ids))",
        ]
    }

    /// The claimed deliveries of `leased` rows (`notification_id`, `registration_id`, `attempts`,
    /// `next_attempt_at`) with their `notifications`, oldest due first, then by the ids' bytes:
    /// the order a claim hands them out in.
    static func claimed(
        _ leased: [(notification: String, registration: String, attempts: Int, due: Int64)],
        notifications: [PushNotificationRecord], recipients: [PushRecipient]
    ) -> [ClaimedPushDelivery] {
        var byID: [ExactString: PushNotificationRecord] = [:]
        for notification in notifications { byID[ExactString(notification.id)] = notification }
        let recipientByID = byRegistration(recipients)
        let ordered = leased.sorted { a, b in
            if a.due != b.due { return a.due < b.due }
            if !UserIdentity.sameBytes(a.notification, b.notification) {
                return a.notification.utf8.lexicographicallyPrecedes(b.notification.utf8)
            }
            return a.registration.utf8.lexicographicallyPrecedes(b.registration.utf8)
        }
        return ordered.compactMap { delivery in
            byID[ExactString(delivery.notification)].map {
                ClaimedPushDelivery(
                    notification: $0, registration: delivery.registration, attempts: delivery.attempts,
                    recipient: recipientByID[ExactString(delivery.registration)])
            }
        }
    }

    static func leased(_ row: some StoreRow) throws -> (notification: String, registration: String, attempts: Int, due: Int64) {
        (try row.text("notification_id"), try row.text("registration_id"), Int(try row.integer("attempts")), try row.integer("next_attempt_at"))
    }
}

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
