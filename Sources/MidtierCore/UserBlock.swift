
/// An admin's block of a user (docs/admin.md, "Users: block").
public struct UserBlock: Sendable, Equatable {
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// Proxied calls refused (`TRAFFIC_BLOCKED`).
        case traffic
        /// New registrations refused (`REG_BLOCKED`).
        case registration
        /// Both (`TRAFFIC_REG_BLOCKED`).
        case all

        public var blocksTraffic: Bool { self != .registration }
        public var blocksRegistration: Bool { self != .traffic }
    }

    public var user: UserIdentity
    public var kind: Kind
    public var reason: String
    /// Milliseconds since 1970.
    public var since: Int64
    /// Who blocked (the audit actor).
    public var by: String

    public init(user: UserIdentity, kind: Kind, reason: String, since: Int64, by: String) {
        self.user = user
        self.kind = kind
        self.reason = reason
        self.since = since
        self.by = by
    }
}

/// One state change, for `GET /admin/v1/audit`: who did what to what, when, from where.
public struct AuditEntry: Sendable, Equatable {
    /// Increasing; assigned by the store.
    public var sequence: Int64
    /// Milliseconds since 1970.
    public var at: Int64
    /// `admin#<n>` (the n-th admin token), `user:<id>` or `user:<id>@<realm>` (self-service),
    /// or `system` (policy).
    public var actor: String
    /// e.g. `registration.lock`, `user.block`, `config.reload`.
    public var action: String
    /// What was changed: a registration id, a user id, …
    public var target: String
    /// Extra facts (block type and reason, the policy that fired, …).
    public var detail: String
    /// The client address the change came from, when there was one.
    public var source: String

    public init(sequence: Int64 = 0, at: Int64, actor: String, action: String, target: String, detail: String = "", source: String = "") {
        self.sequence = sequence
        self.at = at
        self.actor = actor
        self.action = action
        self.target = target
        self.detail = detail
        self.source = source
    }
}

/// What a reader of the audit trail wants to see entries of.
public enum AuditSubject: Sendable, Equatable {
    /// Changes to the user (blocks, token purges: the target) and changes the user made
    /// (onboarding, self-service: the actor `user:<user>`).
    case user(UserIdentity)
    /// Changes to one registration.
    case registration(String)

    /// The entries' `target` and `actor` values this subject selects (one of them must match).
    public var selection: (target: String, actor: String?) {
        switch self {
        case .user(let user): (user.description, "user:\(user)")
        case .registration(let id): (id, nil)
        }
    }
}

/// Which registrations to list.
public struct RegistrationFilter: Sendable, Equatable {
    public var user: UserIdentity?
    public var app: String?
    public var state: Registration.State?
    public init(user: UserIdentity? = nil, app: String? = nil, state: Registration.State? = nil) {
        self.user = user
        self.app = app
        self.state = state
    }
}
