import MidtierCore

/// Registrations and their owners' blocks, written once for both stores (``StoreQuery``): how a
/// registration is read, found, inserted, changed and retired (docs/identity.md, "Registration
/// ids"), and a user's block (docs/admin.md, "Blocks").
enum RegistrationRules {
    static let columns: StaticString =
        "id, app_id, user_realm, user_id, device_type, device_model, device_id, form_factor, apns_device_token, android_gcm_registration_id, created_at, last_contact_at, state, details"

    static func registration(_ row: some StoreRow) throws -> Registration {
        Registration(
            id: try row.text("id"), appId: try row.text("app_id"),
            user: UserIdentity(realm: try row.text("user_realm"), id: try row.text("user_id")),
            deviceType: try row.text("device_type"), deviceModel: try row.text("device_model"), deviceId: try row.text("device_id"),
            formFactor: try row.text("form_factor"), apnsDeviceToken: try row.text("apns_device_token"),
            androidGcmRegistrationId: try row.text("android_gcm_registration_id"),
            createdAt: try row.integer("created_at"), lastContactAt: try row.integer("last_contact_at"),
            // An unreadable state is treated as the safest one.
            state: Registration.State(rawValue: try row.text("state")) ?? .wiped,
            details: Registration.details(from: try row.text("details")))
    }

    /// The registration `id`; with `lock`, locked until the transaction ends.
    static func registration(id: String, lock: StoreQuery.RowLock? = nil) -> StoreQuery {
        let query: StoreQuery = "SELECT \(sql: columns) FROM \(table: "registration") WHERE id = \(id)"
        return lock.map { query + "\(lock: $0)" } ?? query
    }

    /// The registration `id` with its owner's block (`b_` columns, null without one), in one read.
    /// Its columns are named and qualified, not `r.*`: PostgreSQL keeps it prepared
    /// (PostgresPreparedReads.swift), and a prepared `*` fails once a later migration adds a
    /// column (a rolling upgrade), an unqualified name once the block gains a column of that name.
    static func registrationAndBlock(id: String) -> StoreQuery {
        "SELECT \(column: registrationColumns), b.kind AS b_kind, b.reason AS b_reason, b.since AS b_since, b.blocked_by AS b_blocked_by "
            + "FROM \(table: "registration") r LEFT JOIN \(table: "user_block") b "
            + "ON b.user_realm = r.user_realm AND b.user_id = r.user_id WHERE r.id = \(id)"
    }

    /// `columns`, each of the registration `r`.
    static let registrationColumns = "\(columns)".split(separator: ", ").map { "r.\($0)" }.joined(separator: ", ")

    static func registrationAndBlock(_ row: some StoreRow) throws -> RegistrationAndBlock {
        let registration = try registration(row)
        guard let kind = try row.optionalText("b_kind") else { return RegistrationAndBlock(registration: registration, block: nil) }
        return RegistrationAndBlock(
            registration: registration,
            block: UserBlock(
                user: registration.user, kind: UserBlock.Kind(rawValue: kind) ?? .all, reason: try row.text("b_reason"),
                since: try row.integer("b_since"), by: try row.text("b_blocked_by")))
    }

    /// The registrations `filter` selects, oldest first.
    static func registrations(matching filter: RegistrationFilter) -> StoreQuery {
        var query: StoreQuery = "SELECT \(sql: columns) FROM \(table: "registration") WHERE TRUE"
        if let user = filter.user { query = query + " AND user_realm = \(user.realm) AND user_id = \(user.id)" }
        if let app = filter.app { query = query + " AND app_id = \(app)" }
        if let state = filter.state { query = query + " AND state = \(state.rawValue)" }
        return query + " ORDER BY created_at, id"
    }

    /// A page of the registrations `filter` selects, by the bytes of their ids: those after
    /// `after` (all when nil), at most `limit`. Each filter has its index, whose last column is
    /// the id (SQLite: `registration_by_*`, PostgreSQL: `midtier_registration_by_*`, the primary
    /// key without a filter), so a page is one index range scan: a user's registrations by
    /// (realm, user, id) whatever else is asked, an app's by (app, id) or (app, state, id), a
    /// state's by (state, id).
    static func registrations(matching filter: RegistrationFilter, after: String?, limit: Int) -> StoreQuery {
        var query: StoreQuery = "SELECT \(sql: columns) FROM \(table: "registration") WHERE TRUE"
        if let user = filter.user { query = query + " AND user_realm = \(user.realm) AND user_id = \(user.id)" }
        if let app = filter.app { query = query + " AND app_id = \(app)" }
        if let state = filter.state { query = query + " AND state = \(state.rawValue)" }
        if let after { query = query + " AND id > \(after)" }
        return query + " ORDER BY \(bytewise: "id") LIMIT \(max(0, limit))"
    }

    /// A page of the ids of `app`'s active registrations holding a token for one of
    /// `providers` (at least one), by the bytes of their ids: one range of (app, state, id).
    static func pushTargets(app: String, providers: [PushProvider], after: String?, limit: Int) -> StoreQuery {
        var query: StoreQuery = "SELECT id FROM \(table: "registration") WHERE app_id = \(app) AND state = 'active' AND ("
        for (index, provider) in providers.enumerated() {
            query = query + (index == 0 ? "" : " OR ") + "\(column: provider.tokenColumn) <> ''"
        }
        query = query + ")"
        if let after { query = query + " AND id > \(after)" }
        return query + " ORDER BY \(bytewise: "id") LIMIT \(max(0, limit))"
    }

    /// Whether the registration `id` is active (and, when given, of `app` and `user`); with
    /// `lock`, it stays so until the transaction ends.
    static func active(id: String, app: String? = nil, user: UserIdentity? = nil, lock: StoreQuery.RowLock? = nil) -> StoreQuery {
        var query: StoreQuery = "SELECT 1 FROM \(table: "registration") WHERE id = \(id) AND state = 'active'"
        if let app { query = query + " AND app_id = \(app)" }
        if let user { query = query + " AND user_realm = \(user.realm) AND user_id = \(user.id)" }
        return lock.map { query + "\(lock: $0)" } ?? query
    }

    /// Whether `id` was ever used and retired (deleted ids are never handed out again).
    static func retired(id: String) -> StoreQuery { "SELECT 1 FROM \(table: "retired_registration") WHERE id = \(id)" }

    /// How many registrations `user` has (column `count`).
    static func count(of user: UserIdentity) -> StoreQuery {
        "SELECT COUNT(*) AS count FROM \(table: "registration") WHERE user_realm = \(user.realm) AND user_id = \(user.id)"
    }

    /// A registration of the same app, user and device that is not active (a wiped one first,
    /// then the oldest): the device must be re-activated, not registered anew.
    static func heldDevice(of registration: Registration) -> StoreQuery {
        "SELECT id FROM \(table: "registration") WHERE app_id = \(registration.appId) AND user_realm = \(registration.user.realm) "
            + "AND user_id = \(registration.user.id) AND device_id = \(registration.deviceId) AND state <> 'active' "
            + "ORDER BY state = 'wiped' DESC, created_at LIMIT 1"
    }

    /// Inserts `r` unless its id is taken; returns its id when it did.
    static func insert(_ r: Registration) -> StoreQuery {
        "INSERT INTO \(table: "registration") (\(sql: columns)) VALUES (\(r.id), \(r.appId), \(r.user.realm), \(r.user.id), "
            + "\(r.deviceType), \(r.deviceModel), \(r.deviceId), \(r.formFactor), \(r.apnsDeviceToken), "
            + "\(r.androidGcmRegistrationId), \(r.createdAt), \(r.lastContactAt), \(r.state.rawValue), \(r.detailsText)) "
            + "ON CONFLICT (id) DO NOTHING RETURNING id"
    }

    /// A registration of `r`'s app, of another user, that holds one of `r`'s push tokens
    /// (``PushRules/holds(_:provider:)``); nil when `r` has none.
    static func tokenHeldByAnotherUser(_ r: Registration) -> StoreQuery? {
        let tokens = [(PushProvider.apns, r.apnsDeviceToken), (.fcm, r.androidGcmRegistrationId)].filter { !$0.1.isEmpty }
        guard !tokens.isEmpty else { return nil }
        var held: StoreQuery = ""
        for (index, (provider, token)) in tokens.enumerated() {
            held = held + (index == 0 ? "" : " OR ") + PushRules.holds(token, provider: provider)
        }
        return "SELECT 1 FROM \(table: "registration") WHERE \(bytewise: "app_id") = \(r.appId) "
            + "AND NOT (user_realm = \(r.user.realm) AND user_id = \(r.user.id)) AND (" + held + ") LIMIT 1"
    }

    /// Replaces the device fields of the registration with `r`'s id; returns its id when there is one.
    static func updateDevice(_ r: Registration) -> StoreQuery {
        "UPDATE \(table: "registration") SET device_type = \(r.deviceType), device_model = \(r.deviceModel), "
            + "device_id = \(r.deviceId), form_factor = \(r.formFactor), apns_device_token = \(r.apnsDeviceToken), "
            + "android_gcm_registration_id = \(r.androidGcmRegistrationId), details = \(r.detailsText) WHERE id = \(r.id) RETURNING id"
    }

    static func setState(_ state: Registration.State, id: String) -> StoreQuery {
        "UPDATE \(table: "registration") SET state = \(state.rawValue) WHERE id = \(id)"
    }

    static func delete(id: String) -> StoreQuery { "DELETE FROM \(table: "registration") WHERE id = \(id)" }

    /// Retires `id` for good, at `at` (ms).
    static func retire(id: String, at: Int64) -> StoreQuery {
        "INSERT INTO \(table: "retired_registration") (id, retired_at) VALUES (\(id), \(at)) ON CONFLICT (id) DO NOTHING"
    }

    /// One successful contact; monotonic: a last contact never moves back in time.
    static func contact(_ contact: Contact) -> StoreQuery {
        "UPDATE \(table: "registration") SET last_contact_at = \(contact.at) WHERE id = \(contact.id) AND last_contact_at < \(contact.at)"
    }

    // MARK: Blocks

    static func block(of user: UserIdentity) -> StoreQuery {
        "SELECT kind, reason, since, blocked_by FROM \(table: "user_block") WHERE user_realm = \(user.realm) AND user_id = \(user.id)"
    }

    static func block(_ row: some StoreRow, of user: UserIdentity) throws -> UserBlock {
        UserBlock(
            user: user, kind: UserBlock.Kind(rawValue: try row.text("kind")) ?? .all, reason: try row.text("reason"),
            since: try row.integer("since"), by: try row.text("blocked_by"))
    }

    /// Sets (or replaces) the user's block.
    static func setBlock(_ block: UserBlock) -> StoreQuery {
        "INSERT INTO \(table: "user_block") (user_realm, user_id, kind, reason, since, blocked_by) "
            + "VALUES (\(block.user.realm), \(block.user.id), \(block.kind.rawValue), \(block.reason), \(block.since), \(block.by)) "
            + "ON CONFLICT (user_realm, user_id) DO UPDATE SET kind = excluded.kind, reason = excluded.reason, "
            + "since = excluded.since, blocked_by = excluded.blocked_by"
    }

    /// Removes the user's block; returns a row when there was one.
    static func removeBlock(of user: UserIdentity) -> StoreQuery {
        "DELETE FROM \(table: "user_block") WHERE user_realm = \(user.realm) AND user_id = \(user.id) RETURNING user_id"
    }
}
