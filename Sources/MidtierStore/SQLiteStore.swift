import Foundation
import GRDB

/// The embedded store: one SQLite file in WAL mode through GRDB. Writes are transactions that
/// are committed (and synced per SQLite's `synchronous=FULL`) before they return.
public final class SQLiteStore: RegistrationStore {
    private let database: DatabasePool

    /// Opens (creating if needed) the database at `path`, and its directory.
    public init(path: String) throws(StoreError) {
        do {
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                // FULL: a committed transaction is on disk before the commit returns, so an
                // acknowledged change survives power loss as well as a crash.
                try db.execute(sql: "PRAGMA synchronous = FULL")
            }
            configuration.busyMode = .timeout(5)
            database = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(database)
        } catch {
            throw StoreError("cannot open the SQLite store at \(path): \(error)")
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: registrations") { db in
            try db.execute(sql: """
                CREATE TABLE registration (
                    id TEXT PRIMARY KEY NOT NULL,
                    app_id TEXT NOT NULL,
                    user_id TEXT NOT NULL,
                    device_type TEXT NOT NULL,
                    device_model TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    form_factor TEXT NOT NULL,
                    apns_device_token TEXT NOT NULL,
                    android_gcm_registration_id TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    last_contact_at INTEGER NOT NULL,
                    state TEXT NOT NULL
                );
                CREATE INDEX registration_user ON registration(user_id);
                """)
        }
        return migrator
    }

    private static let columns = "id, app_id, user_id, device_type, device_model, device_id, form_factor, apns_device_token, android_gcm_registration_id, created_at, last_contact_at, state"

    private static func arguments(_ r: Registration) -> StatementArguments {
        [r.id, r.appId, r.userId, r.deviceType, r.deviceModel, r.deviceId, r.formFactor, r.apnsDeviceToken,
         r.androidGcmRegistrationId, r.createdAt, r.lastContactAt, r.state.rawValue]
    }

    private static func registration(_ row: Row) -> Registration {
        Registration(
            id: row["id"], appId: row["app_id"], userId: row["user_id"],
            deviceType: row["device_type"], deviceModel: row["device_model"], deviceId: row["device_id"],
            formFactor: row["form_factor"], apnsDeviceToken: row["apns_device_token"],
            androidGcmRegistrationId: row["android_gcm_registration_id"],
            createdAt: row["created_at"], lastContactAt: row["last_contact_at"],
            state: Registration.State(rawValue: row["state"]) ?? .wiped
        )
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do {
            return try await database.write(body)
        } catch {
            throw StoreError("SQLite write failed: \(error)")
        }
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do {
            return try await database.read(body)
        } catch {
            throw StoreError("SQLite read failed: \(error)")
        }
    }

    public func insert(_ registration: Registration) async throws(StoreError) -> Bool {
        try await write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO registration (\(Self.columns)) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                           arguments: Self.arguments(registration))
            return db.changesCount == 1
        }
    }

    public func registration(id: String) async throws(StoreError) -> Registration? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.columns) FROM registration WHERE id = ?", arguments: [id]).map(Self.registration)
        }
    }

    public func registrations(user: String) async throws(StoreError) -> [Registration] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.columns) FROM registration WHERE user_id = ? ORDER BY created_at, id", arguments: [user])
                .map(Self.registration)
        }
    }

    public func update(_ registration: Registration) async throws(StoreError) -> Bool {
        try await write { db in
            try db.execute(sql: """
                UPDATE registration SET app_id = ?, user_id = ?, device_type = ?, device_model = ?, device_id = ?,
                    form_factor = ?, apns_device_token = ?, android_gcm_registration_id = ?, created_at = ?,
                    last_contact_at = ?, state = ? WHERE id = ?
                """, arguments: [registration.appId, registration.userId, registration.deviceType, registration.deviceModel,
                                 registration.deviceId, registration.formFactor, registration.apnsDeviceToken,
                                 registration.androidGcmRegistrationId, registration.createdAt, registration.lastContactAt,
                                 registration.state.rawValue, registration.id])
            return db.changesCount == 1
        }
    }

    public func delete(id: String) async throws(StoreError) -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM registration WHERE id = ?", arguments: [id])
            return db.changesCount == 1
        }
    }

    public func recordContact(id: String, at milliseconds: Int64) async throws(StoreError) {
        try await write { db in
            try db.execute(sql: "UPDATE registration SET last_contact_at = ? WHERE id = ? AND last_contact_at < ?",
                           arguments: [milliseconds, id, milliseconds])
        }
    }

    public func ping() async -> Bool {
        (try? await read { db in try Int.fetchOne(db, sql: "SELECT 1") }) == 1
    }
}
