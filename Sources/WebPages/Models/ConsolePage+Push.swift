/// The console's Push pages (docs/console.md, "Push"). Ids, apps and senders come from the
/// configuration and the senders; reasons and the notification's text from senders and push
/// services: all escaped by the templates.
extension ConsolePage {
    struct Push: Sendable {
        struct Notification: Sendable {
            let id: String
            let link: String
            let app: String
            let sender: String
            let time: String
            let status: String
            let deliveries: Int
        }

        /// The test form's fields, as the admin typed them (kept after a refusal).
        struct TestForm: Sendable {
            let userId: String
            let alert: String
        }

        let realms: [Option]
        /// The apps with push, for the test form.
        let pushApps: [Option]
        let hasPushApps: Bool
        /// Every configured app, for the filter.
        let apps: [Option]
        let test: TestForm
        let maximumAlert: Int
        let notifications: [Notification]
        let hasNotifications: Bool
        let limit: Int
        /// The links to the newest notifications (when this is an older page) and to older ones
        /// (when more may follow), with the app chosen.
        let first: String?
        let next: String?
    }

    struct PushNotification: Sendable {
        struct Delivery: Sendable {
            let registration: String
            /// The registration's console page; nil when it no longer exists.
            let registrationLink: String?
            let state: String
            let attempts: Int
            let provider: String?
            let reason: String?
            let updated: String
        }

        let id: String
        let app: String
        let sender: String
        let time: String
        let status: String
        /// The notification object as the sender gave it (JSON text).
        let payload: String
        let deliveries: [Delivery]
        let hasDeliveries: Bool
        struct StateCount: Sendable {
            let state: String
            let count: Int
        }

        /// Whether the page shows only some of the deliveries.
        let truncated: Bool
        /// How many deliveries there are, and how many in each state.
        let total: Int
        let states: [StateCount]
        /// The links to the first deliveries (when this is a later page) and to the next ones.
        let first: String?
        let next: String?
        let back: String
    }
}
