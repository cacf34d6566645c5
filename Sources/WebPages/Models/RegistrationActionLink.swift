/// A link to the confirmation of an action on a registration, in the console's registrations
/// table and on the self-service page.
struct RegistrationActionLink: Sendable {
    /// The action's name in the path (`lock`, `wipe`, …) and on its button.
    let action: String
    let label: String
    /// The registration's id, percent-encoded for the link's query.
    let registrationID: String
}
