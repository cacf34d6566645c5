/// Which registrations to list.
package struct RegistrationFilter: Sendable, Equatable {
    package var user: UserIdentity?
    package var app: String?
    package var state: Registration.State?
    package init(user: UserIdentity? = nil, app: String? = nil, state: Registration.State? = nil) {
        self.user = user
        self.app = app
        self.state = state
    }
}
