/// One state change, for `GET /admin/v1/audit`: who did what to what, when, from where.
package struct AuditEntry: Sendable, Equatable {
    /// Increasing; assigned by the store.
    package var sequence: Int64
    /// Milliseconds since 1970.
    package var at: Int64
    /// `admin#<n>` (the n-th admin token), `user:<id>` or `user:<id>@<realm>` (self-service),
    /// or `system` (policy).
    package var actor: String
    /// e.g. `registration.lock`, `user.block`, `config.reload`.
    package var action: String
    /// What was changed: a registration id, a user id, …
    package var target: String
    /// Extra facts (block type and reason, the policy that fired, …).
    package var detail: String
    /// The client address the change came from, when there was one.
    package var source: String

    package init(sequence: Int64 = 0, at: Int64, actor: String, action: String, target: String, detail: String = "", source: String = "") {
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
package enum AuditSubject: Sendable, Equatable {
    /// Changes to the user (blocks, token purges: the target) and changes the user made
    /// (onboarding, self-service: the actor `user:<user>`).
    case user(UserIdentity)
    /// Changes to one registration.
    case registration(String)

    /// The entries' `target` and `actor` values this subject selects (one of them must match).
    package var selection: (target: String, actor: String?) {
        switch self {
        case .user(let user): (user.description, "user:\(user)")
        case .registration(let id): (id, nil)
        }
    }
}
