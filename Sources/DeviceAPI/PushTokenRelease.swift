import HTTPTypes
import Logging
import MidtierCore
import MidtierHTTP
import MidtierStore
import Registrations

/// A push token belongs to one registration of an app at a time (docs/push.md, "Registering a
/// device"): when a registration takes a token — through SAP's push path or the Connection
/// entity — every other registration of the user's in the app that held it loses it. A token
/// another user's registration holds is not taken at all: the store refuses that in the write's
/// own transaction (`DeviceWrite.tokenHeldByAnotherUser`, `DeviceFields.tokenHeldByAnotherUser`),
/// else the phone's notifications would silently go to whoever named its token.
enum PushTokenRelease {
    static func release(_ registration: Registration, store: any StateStore, logger: Logger) async throws(Refusal) {
        guard let push = store.pushStore else { return }
        let held: [(PushProvider, String)] = [(.apns, registration.apnsDeviceToken), (.fcm, registration.androidGcmRegistrationId)]
        for (provider, token) in held where !token.isEmpty {
            let released = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await push.releasePushToken(token, provider: provider, app: registration.appId, keeping: registration.id)
            }
            if released > 0 {
                logger.info(
                    "push token taken from earlier registrations", metadata: ["registration": "\(registration.id)", "released": "\(released)"])
            }
        }
    }
}
