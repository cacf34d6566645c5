import Logging
import MidtierCore
import MidtierHTTP
import MidtierStore
import Registrations

/// A push token belongs to one registration of an app at a time (docs/push.md, "Registering a
/// device"): when a registration takes a token — through SAP's push path or the Connection
/// entity — every other registration of the app that held it loses it, so a phone handed to
/// another user no longer gets the earlier user's notifications.
enum PushTokenRelease {
    static func release(_ registration: Registration, store: any StateStore, logger: Logger) async throws(Refusal) {
        guard let push = store as? any PushStore else { return }
        let held: [(PushProvider, String)] = [(.apns, registration.apnsDeviceToken), (.fcm, registration.androidGcmRegistrationId)]
        for (provider, token) in held where !token.isEmpty {
            let released = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await push.releasePushToken(token, provider: provider, app: registration.appId, keeping: registration.id)
            }
            if released > 0 {
                logger.info("push token taken from earlier registrations", metadata: ["registration": "\(registration.id)", "released": "\(released)"])
            }
        }
    }
}
