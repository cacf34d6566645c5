package import MidtierCore

/// The result of inserting a registration.
package enum InsertOutcome: Sendable, Equatable {
    case inserted
    /// The id is in use, or was used before: ids are never handed out twice.
    case idTaken
    /// The user already has `limit` registrations.
    case limitReached(limit: Int)
    /// The user's registration `id` of the same device (app, `DeviceId`, user) is locked or
    /// wiped: the device cannot onboard again (docs/identity.md, "The same device"). Judged in
    /// the insert's own transaction, so a lock committed just before is always seen.
    case deviceHeld(id: String)
    /// A push token of the registration is held by another user's registration of the app:
    /// tokens move only between one user's own registrations (docs/push.md). Judged in the
    /// insert's own transaction, so two users naming one token at once never both get it.
    case tokenHeldByAnotherUser
}

/// What became of a change to a registration's device fields.
package enum DeviceWrite: Sendable, Equatable {
    case written
    /// There is no registration with that id.
    case notFound
    /// A push token it names is held by another user's registration of the app (judged in the
    /// write's own transaction).
    case tokenHeldByAnotherUser
}

/// A registration's successful contact at `at` (ms since 1970), for the offline policy.
package struct Contact: Sendable, Equatable {
    package var id: String
    package var at: Int64
    package init(id: String, at: Int64) {
        self.id = id
        self.at = at
    }
}

/// The result of deleting a registration.
package enum DeleteOutcome: Sendable, Equatable {
    case deleted(Registration)
    case notFound
    /// Its state is not one the caller may delete from (a device cannot delete its locked or
    /// wiped registration).
    case refused(current: Registration.State)
}

/// The result of a registration state change.
package enum StateTransition: Sendable, Equatable {
    case changed(Registration)
    case notFound
    /// The registration is in a state the change may not start from (a wiped one never
    /// comes back).
    case refused(current: Registration.State)
}
