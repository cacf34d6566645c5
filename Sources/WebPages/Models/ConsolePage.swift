/// The models of the console's pages (docs/console.md), one a page, named as the templates in
/// `ConsoleTemplates.swift` name their values. Everything shown is escaped for HTML by the
/// templates; a value that is `nil` shows nothing (and its section is left out).
enum ConsolePage {
    /// What the layout's header shows on every console page: the signed-in admin (none on an
    /// error page before sign-in), their CSRF token for the sign-out and every other form, the
    /// one-time notice of their last change and which navigation entry is the page's.
    struct Layout: Sendable {
        var admin: String?
        var csrf: String?
        var notice: String?
        var nav: Nav?
    }

    /// The navigation entry of the page shown, `true` for that one only.
    struct Nav: Sendable {
        enum Entry { case overview, users, registrations, audit, clientLogs, clientUsage, push, destinations }

        let overview: Bool
        let users: Bool
        let registrations: Bool
        let audit: Bool
        let clientLogs: Bool
        let clientUsage: Bool
        let push: Bool
        let destinations: Bool

        init(_ entry: Entry) {
            overview = entry == .overview
            users = entry == .users
            registrations = entry == .registrations
            audit = entry == .audit
            clientLogs = entry == .clientLogs
            clientUsage = entry == .clientUsage
            push = entry == .push
            destinations = entry == .destinations
        }
    }

    /// One option of a filter's `<select>`.
    struct Option: Sendable {
        let value: String
        let label: String
        let selected: Bool

        init(value: String, label: String? = nil, selected: Bool) {
            self.value = value
            self.label = label ?? value
            self.selected = selected
        }
    }

    struct SignIn: Sendable {
        let idleMinutes: Int
        let problem: String?
        let signInToken: String
    }

    /// What went wrong, and the way back.
    struct Problem: Sendable {
        let heading: String
        let message: String
        let back: String
    }

    struct Overview: Sendable {
        struct Exchanges: Sendable {
            let destination: String
            let total: Int
            let failures: Int
            let failed: Bool
        }

        /// An app's onboarding configuration files.
        struct OnboardingApp: Sendable {
            struct Download: Sendable {
                let href: String
                let label: String
            }

            let app: String
            let downloads: [Download]
        }

        let storeReachable: Bool
        let storeKind: String
        let apps: Int
        let destinations: Int
        let users: Int
        let exchanges: [Exchanges]
        let hasExchanges: Bool
        let onboardingApps: [OnboardingApp]
    }

    struct Destinations: Sendable {
        /// A destination as configured, without its secrets.
        struct Destination: Sendable {
            let name: String
            let url: String
            let authentication: String
            let timeout: Int
            let headers: String
            let cookies: String
            let user: String?
            let tokenService: String?
        }

        let destinations: [Destination]
    }
}
