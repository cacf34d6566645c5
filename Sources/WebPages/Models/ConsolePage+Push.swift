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
        let truncated: Bool
        let total: Int
        let back: String
    }
}
