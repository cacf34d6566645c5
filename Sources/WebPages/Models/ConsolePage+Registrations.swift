/// The console's pages about users and their registrations, and the audit trail.
extension ConsolePage {
    /// A row of the registrations table (the users and registrations pages).
    struct RegistrationRow: Sendable {
        let id: String
        let user: String
        let app: String
        let deviceType: String
        let deviceModel: String
        let created: String
        let lastContact: String
        let state: String
        /// Its audit trail and its client logs.
        let history: String
        let clientLogs: String
        let actions: [RegistrationActionLink]
    }

    struct Users: Sendable {
        struct Query: Sendable {
            let id: String
        }

        /// The user found.
        struct User: Sendable {
            struct Block: Sendable {
                let type: String
                let since: String
                let by: String
                let reason: String?
            }

            let id: String
            /// The id and realm percent-encoded, as the block and unblock forms carry them.
            let carriedID: String
            let carriedRealm: String
            let known: Bool
            /// The realm, for a user of an identity provider.
            let realmLabel: String?
            let history: String
            let registrationsPage: String
            let block: Block?
            let registrations: [RegistrationRow]
            let hasRegistrations: Bool
        }

        /// A `users.json` id starting like the one asked for.
        struct Suggestion: Sendable {
            let id: String
            let urlID: String
        }

        let query: Query
        let realms: [Option]
        var user: User?
        /// The user asked for, when nothing is known of them.
        var missing: String?
        var suggestions: [Suggestion] = []
        var hasSuggestions = false
    }

    struct Registrations: Sendable {
        struct Query: Sendable {
            let user: String
        }

        let query: Query
        let realms: [Option]
        let apps: [Option]
        let states: [Option]
        let registrations: [RegistrationRow]
        let hasRegistrations: Bool
        /// The links to the first page (when this is a later one) and to the next (when more
        /// may follow), with the same filters.
        let first: String?
        let next: String?
    }

    /// The confirmation step before a lock, unlock, wipe or delete.
    struct Confirm: Sendable {
        let action: String
        let label: String
        let consequence: String
        let id: String
        let user: String
        let app: String
        let deviceType: String
        let deviceModel: String
        let state: String
        let back: String
    }

    struct Audit: Sendable {
        struct Query: Sendable {
            let user: String
            let registration: String
        }

        struct Entry: Sendable {
            let sequence: Int64
            let at: String
            let actor: String
            let action: String
            let target: String
            let detail: String
            let source: String
        }

        let query: Query
        let realms: [Option]
        let entries: [Entry]
        let hasEntries: Bool
        /// The links to the newest entries and to older ones.
        let newer: String?
        let older: String?
    }
}
