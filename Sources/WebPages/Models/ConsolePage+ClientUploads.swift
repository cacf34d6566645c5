/// The console's client logs and usage reports pages. Everything in them but the links is
/// device-supplied text.
extension ConsolePage {
    /// The filter form's fields as the admin typed them.
    struct UploadQuery: Sendable {
        let registration: String
        let userId: String
        let from: String
        let until: String
        let text: String
    }

    struct ClientLogs: Sendable {
        struct Entry: Sendable {
            let time: String
            let severity: String
            let registration: String
            let registrationLink: String
            let user: String
            let app: String
            let source: String
            let location: String
            let message: String
            /// `nil` for none (an empty string would still show its section).
            let correlationId: String?
        }

        let query: UploadQuery
        let realms: [Option]
        let apps: [Option]
        let levels: [Option]
        let entries: [Entry]
        let hasEntries: Bool
        /// The "Newest" and "Older" links.
        let first: String?
        let next: String?
    }

    struct ClientUsage: Sendable {
        struct Report: Sendable {
            let time: String
            let registration: String
            let registrationLink: String
            let user: String
            let app: String
            let size: Int
            /// The report's start, whether there is more, and the link to all of it.
            let preview: String
            let truncated: Bool
            let full: String
        }

        let query: UploadQuery
        let realms: [Option]
        let apps: [Option]
        let reports: [Report]
        let hasReports: Bool
        let first: String?
        let next: String?
    }

    /// One usage report whole.
    struct ClientUsageReport: Sendable {
        struct Report: Sendable {
            let time: String
            let registration: String
            let registrationLink: String
            let user: String
            let app: String
            let size: Int
            let text: String
            let deviceId: String
        }

        let report: Report
        let back: String
    }
}
