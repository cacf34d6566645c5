import HTTPTypes
import Logging
import MidtierCore
import MidtierHTTP
import MidtierStore
import Registrations

/// A push token belongs to one registration of an app at a time (docs/push.md, "Registering a
/// device"): when a registration takes a token — through SAP's push path or the Connection
/// entity — every other registration of the app that held it loses it. A token another user's
/// registration holds is not taken at all (``refuseTakingFromAnotherUser``): the phone's
/// notifications would silently go to whoever named its token.
enum PushTokenRelease {
    /// 409 when `apns` or `fcm` (either may be "") is held by a registration of `app` that is
    /// not `user`'s; checked before the registration is written.
    static func refuseTakingFromAnotherUser(
        apns: String, fcm: String, app: String, user: UserIdentity,
        store: any StateStore, logger: Logger
    ) async throws(Refusal) {
        guard let push = store.pushStore else { return }
        for (provider, token) in [(PushProvider.apns, apns), (.fcm, fcm)] where !token.isEmpty {
            let holders = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await push.pushTokenHolders(token, provider: provider, app: app)
            }
            if holders.contains(where: { $0 != user }) {
                logger.notice("push token held by another user's registration: refused", metadata: ["app": "\(app)", "user": "\(user)"])
                throw Refusal(
                    .conflict, code: "CONFLICT",
                    "the push token is held by another user's registration of this app; it moves only between one user's own registrations")
            }
        }
    }

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
