import DeviceProxy
import Hummingbird
import Logging
import MidtierCore
import MidtierHTTP
import MidtierStore
import Registrations

/// The caller's own registration that a device path names (the Storage service's
/// `device/{id}`, the push registration's `devices/{id}`; docs/device-api.md): in the app,
/// the signed-in user's registration whose id is `{id}` (`X-SMP-APPCID`) or, failing that,
/// whose `DeviceId` is `{id}` (the `X-SMP-DEVICEID` the SAP SDK sends); when the call also
/// names a registration, it must be that one. Admitted as the proxy admits a call: a locked or
/// wiped registration and a blocked user are refused.
enum CallerRegistration {
    static func named(
        _ device: String, request: Request, app: AppConfiguration, user: UserIdentity, registrations: RegistrationService,
        logger: Logger
    ) async throws(Refusal) -> String {
        let named = ProxyHandler.registrationID(of: request)
        let candidates = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user, app: app.id))
        }
        var matching = candidates.filter { UserIdentity.sameBytes($0.id, device) }
        if matching.isEmpty { matching = candidates.filter { DeviceIdentity.namesADevice($0.deviceId) && DeviceIdentity.same($0.deviceId, device) } }
        if let named { matching = matching.filter { UserIdentity.sameBytes($0.id, named) } }
        guard let only = matching.first else {
            if named != nil { throw .forbidden("the device \(device) is not the registration the call names (X-SMP-APPCID)") }
            throw .forbidden("the registration id is not known")
        }
        guard matching.count == 1 else {
            throw .forbidden("the user has more than one registration of device \(device) in this app; send X-SMP-APPCID")
        }
        try await admit(only.id, app: app, user: user, registrations: registrations, logger: logger)
        return only.id
    }

    /// Refuses the call unless `user` may reach registration `id` of `app`, as the proxy decides it.
    static func admit(
        _ id: String, app: AppConfiguration, user: UserIdentity, registrations: RegistrationService,
        logger: Logger
    ) async throws(Refusal) {
        let admission: Admission
        do {
            admission = try await self.admission(of: id, app: app, user: user, registrations: registrations)
        } catch {
            throw Refusal.storeFailed(error, logger)
        }
        try admission.refuseUnlessAdmitted()
    }

    private static func admission(
        of id: String, app: AppConfiguration, user: UserIdentity,
        registrations: RegistrationService
    ) async throws(StoreError) -> Admission {
        guard RegistrationService.isAcceptableID(id), let found = try await registrations.store.registrationAndBlock(id: id),
            UserIdentity.sameBytes(found.registration.appId, app.id)
        else { return .unknown }
        return try await registrations.admit(found, user: user, policy: app.blockWipingPolicy)
    }
}
