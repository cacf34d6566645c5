/// The models of the self-service page (docs/console.md, "Lock my lost phone"), named as the
/// templates in `SelfServiceTemplates.swift` name their values.
enum SelfServicePage {
    /// What the layout's header shows: the signed-in user (none on an error page before
    /// sign-in), their CSRF token for the sign-out and every other form, and the one-time notice
    /// of their last change.
    struct Layout: Sendable {
        var user: String?
        var csrf: String?
        var notice: String?
    }

    struct SignIn: Sendable {
        /// Whether any app takes tokens: the token form is offered then.
        let tokenSignIn: Bool
        let problem: String?
        let signInToken: String
    }

    /// One of the user's registrations.
    struct Device: Sendable {
        let id: String
        let model: String
        let type: String
        let app: String
        let created: String
        let lastContact: String
        let state: String
        let actions: [RegistrationActionLink]
    }

    struct Devices: Sendable {
        let devices: [Device]
        let hasDevices: Bool
    }

    /// The confirmation step before a lock or wipe of one of the user's devices.
    struct Confirm: Sendable {
        let id: String
        let model: String
        let type: String
        let app: String
        let created: String
        let state: String
        let action: String
        let label: String
        let consequence: String
    }

    struct Problem: Sendable {
        let heading: String
        let message: String
    }
}
