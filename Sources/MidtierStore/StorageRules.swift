package import MidtierCore

/// The Storage service's reads, written once for both stores (``StoreQuery``): one document, a
/// level's documents by name, and everything a user stored for an admin (docs/device-api.md,
/// "Storage"). Names, apps and registration ids are ordered by their bytes in both stores.
enum StorageRules {
    /// The document at `key`; with `lock`, locked until the transaction ends.
    static func document(_ key: StorageKey, lock: StoreQuery.RowLock? = nil) -> StoreQuery {
        let query = "SELECT document FROM \(table: "user_storage") WHERE " + at(key)
        return lock.map { query + "\(lock: $0)" } ?? query
    }

    /// The condition that selects the document at `key`.
    static func at(_ key: StorageKey) -> StoreQuery {
        "user_realm = \(key.user.realm) AND user_id = \(key.user.id) AND app_id = \(key.app) "
            + "AND registration_id = \(key.level.storedRegistration) AND name = \(key.name)"
    }

    static func remove(_ key: StorageKey) -> StoreQuery { "DELETE FROM \(table: "user_storage") WHERE " + at(key) }

    /// The size of the user's other documents (column `size`), as the user's limit counts them.
    static func sizeBeside(_ key: StorageKey) -> StoreQuery {
        "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS size FROM \(table: "user_storage") "
            + "WHERE user_realm = \(key.user.realm) AND user_id = \(key.user.id) AND NOT (app_id = \(key.app) "
            + "AND registration_id = \(key.level.storedRegistration) AND name = \(key.name))"
    }

    /// Sets the document at `key` to `text` at `now`, counting its name and text (``StorageKey/storedSize(of:)``).
    static func set(_ key: StorageKey, to text: String, now: Int64) -> StoreQuery {
        "INSERT INTO \(table: "user_storage") (user_realm, user_id, app_id, registration_id, name, document, size, updated_at) "
            + "VALUES (\(key.user.realm), \(key.user.id), \(key.app), \(key.level.storedRegistration), \(key.name), \(text), "
            + "\(key.storedSize(of: text)), \(now)) ON CONFLICT (user_realm, user_id, app_id, registration_id, name) "
            + "DO UPDATE SET document = excluded.document, size = excluded.size, updated_at = excluded.updated_at"
    }

    static func documents(app: String, user: UserIdentity, level: StorageLevel) -> StoreQuery {
        "SELECT name, document FROM \(table: "user_storage") WHERE user_realm = \(user.realm) AND user_id = \(user.id) "
            + "AND app_id = \(app) AND registration_id = \(level.storedRegistration) ORDER BY \(bytewise: "name")"
    }

    static func storedDocument(_ row: some StoreRow) throws -> StoredDocument {
        StoredDocument(name: try row.text("name"), text: try row.text("document"))
    }

    static func entries(of user: UserIdentity) -> StoreQuery {
        "SELECT app_id, registration_id, name, size, updated_at FROM \(table: "user_storage") "
            + "WHERE user_realm = \(user.realm) AND user_id = \(user.id) "
            + "ORDER BY \(bytewise: "app_id"), \(bytewise: "registration_id"), \(bytewise: "name")"
    }

    static func entry(_ row: some StoreRow, of user: UserIdentity) throws -> StorageEntry {
        StorageEntry(
            key: StorageKey(
                app: try row.text("app_id"), user: user, level: StorageLevel(storedRegistration: try row.text("registration_id")),
                name: try row.text("name")),
            size: Int(try row.integer("size")), updatedAt: try row.integer("updated_at"))
    }
}
