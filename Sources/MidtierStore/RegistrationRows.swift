package import MidtierCore

/// Rows of one table that belong to a registration, as both stores name them: the table without
/// PostgreSQL's `midtier_` prefix, and how its rows point at the registration.
package enum RegistrationRows: Sendable, Equatable {
    /// The rows of `table` whose `registration_id` is the registration's id.
    case byRegistration(table: String)
    /// The rows of `table` whose `column` holds the `id` of a row of `parent` that belongs to
    /// the registration (`parent` by its `registration_id`).
    case through(table: String, column: String, parent: String)

    /// A registration's back-end sessions: any change of its state ends them (docs/operations.md).
    static let backendSessions = RegistrationRows.byRegistration(table: "backend_session")
    /// What a wipe deletes of the device's data (docs/device-api.md): its Storage service
    /// documents and its client log and usage uploads, entries first.
    static let deviceData: [RegistrationRows] = [
        .byRegistration(table: "user_storage"),
        .through(table: "client_log_entries", column: "upload_id", parent: "client_uploads"),
        .byRegistration(table: "client_uploads"),
    ]

    /// What goes, in this order and in the same transaction, when a registration's state changes
    /// to `state`: its back-end sessions always; the device's data too when it is wiped.
    package static func deleted(changingTo state: Registration.State) -> [RegistrationRows] {
        [backendSessions] + (state == .wiped ? deviceData : [])
    }

    /// What goes with a deleted registration, besides its own row (its id is retired).
    package static let deletedWithTheRegistration: [RegistrationRows] = [backendSessions] + deviceData

    /// The statement that deletes these rows of registration `id`.
    package func deletion(of id: String) -> StoreQuery {
        switch self {
        case .byRegistration(let table):
            "DELETE FROM \(table: table) WHERE registration_id = \(id)"
        case .through(let table, let column, let parent):
            "DELETE FROM \(table: table) WHERE \(column: column) IN (SELECT id FROM \(table: parent) WHERE registration_id = \(id))"
        }
    }
}
