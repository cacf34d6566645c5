/// The pages' templates (swift-mustache): one file per page set, each template a Swift string
/// so that the binary carries them. `{{value}}` is escaped for HTML; the templates never use
/// the unescaped `{{{value}}}` form. No inline script or style anywhere (the pages' Content
/// Security Policy forbids both): styles come from `stylesheet`.
enum Templates {
    static let all: [(name: String, text: String)] = [
        ("console-layout", consoleLayout),
        ("console-sign-in", consoleSignIn),
        ("console-overview", consoleOverview),
        ("console-users", consoleUsers),
        ("console-registration-table", consoleRegistrationTable),
        ("console-registrations", consoleRegistrations),
        ("console-confirm", consoleConfirm),
        ("console-audit", consoleAudit),
        ("console-destinations", consoleDestinations),
        ("console-problem", consoleProblem),
        ("me-layout", meLayout),
        ("me-sign-in", meSignIn),
        ("me-devices", meDevices),
        ("me-confirm", meConfirm),
        ("me-problem", meProblem),
    ]
}
