/// An admin's block of a user (docs/admin.md, "Users: block").
package struct UserBlock: Sendable, Equatable {
    package enum Kind: String, Sendable, Equatable, CaseIterable {
        /// Proxied calls refused (`TRAFFIC_BLOCKED`).
        case traffic
        /// New registrations refused (`REG_BLOCKED`).
        case registration
        /// Both (`TRAFFIC_REG_BLOCKED`).
        case all

        package var blocksTraffic: Bool { self != .registration }
        package var blocksRegistration: Bool { self != .traffic }
    }

    package var user: UserIdentity
    package var kind: Kind
    package var reason: String
    /// Milliseconds since 1970.
    package var since: Int64
    /// Who blocked (the audit actor).
    package var by: String

    package init(user: UserIdentity, kind: Kind, reason: String, since: Int64, by: String) {
        self.user = user
        self.kind = kind
        self.reason = reason
        self.since = since
        self.by = by
    }
}
