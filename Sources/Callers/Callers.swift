package import DeviceAuthentication
package import Hummingbird
package import Logging
package import MidtierCore
package import MidtierHTTP
import MidtierJSON
import MidtierStore
package import Registrations
import RequestTracing

/// Which registration a device's call acts for, and whether its caller may use it
/// (docs/identity.md, docs/device-api.md): one place for the proxy and every device route that
/// acts for a registration, so each refuses the same calls with the same answers.
package struct Callers: Sendable {
    package let registrations: RegistrationService
    let logger: Logger

    package init(registrations: RegistrationService, logger: Logger) {
        self.registrations = registrations
        self.logger = logger
    }

    /// A call the proxy may forward: its registration, the registration's app, the signed-in
    /// caller.
    package struct AdmittedCall: Sendable {
        /// What was read of the registration (its id, app, owner, state).
        package let registration: RegistrationStanding
        package let app: AppConfiguration
        package let user: AuthenticatedUser
    }

    /// Who calls, and with which registration (the request path's steps 3 and 4,
    /// docs/architecture.md). A caller without valid credentials is refused before anything is
    /// read about the id, so neither the answer nor its time tells whether the id exists
    /// (docs/identity.md). Then the registration names the app, the app's own sign-in must take
    /// the caller too, and only the owner's registration — not blocked, locked, wiped nor
    /// offline longer than the app allows — lets the call through.
    package func admit(_ request: Request, signIn: CallerSignIn, client: String?) async throws(Refusal) -> AdmittedCall {
        guard request.headers.count(of: RegistrationHeaders.registration) <= 1 else {
            throw .badRequest("the request has more than one X-SMP-APPCID header")
        }
        guard request.headers.count(of: RegistrationHeaders.app) <= 1, request.headers.count(of: RegistrationHeaders.device) <= 1 else {
            throw .badRequest("the request has more than one X-SMP-APPID or X-SMP-DEVICEID header")
        }
        let registrationID: String
        let caller: AuthenticatedUser?
        if let id = RegistrationHeaders.registrationID(of: request) {
            caller = try await RequestTrace.span("authenticate") { span throws(Refusal) in
                let scheme = request.headers[.authorization].map { $0.prefix(7).lowercased() == "bearer " ? "jwt" : "basic" } ?? "none"
                span.set("midtier.authentication", scheme)
                return try await signIn.authenticateInAnyRealm(request, client: client)
            }
            registrationID = id
        } else {
            caller = nil
            registrationID = try await registrationOfDevice(request, signIn: signIn, client: client)
        }
        // Ids Midtier hands out are of a plain alphabet; anything else is unknown, without a lookup.
        let found: RegistrationStanding? = try await RequestTrace.span("registration lookup") { _ throws(Refusal) in
            try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                RegistrationService.isAcceptableID(registrationID) ? try await registrations.store.standing(ofRegistration: registrationID) : nil
            }
        }
        guard let found, let app = signIn.configuration.apps[found.appId] else {
            throw .forbidden("the registration id is not known")
        }
        RequestTrace.requestSpan.set("midtier.app", app.id)
        let user: AuthenticatedUser
        let isBasic = request.headers[.authorization].map { $0.prefix(6).lowercased() == "basic " } ?? false
        if let caller, case .basic = app.authentication, isBasic {
            // Basic callers are checked against the one users.json every basic app shares.
            user = caller
        } else {
            do {
                user = try await RequestTrace.span("app sign-in") { span throws(Refusal) in
                    span.set("midtier.authentication", app.authentication == .basic ? "basic" : "jwt")
                    return try await signIn.authenticate(request, app: app, client: client)
                }
            } catch {
                // Signed in, but not as this app signs its users in (another issuer or
                // audience, Basic for a jwt app): answered as for an unknown id.
                throw .forbidden("the registration id is not known")
            }
        }
        try await RequestTrace.span("admission") { span throws(Refusal) in
            let admission = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await registrations.admit(found, user: user.identity, policy: app.blockWipingPolicy)
            }
            try admission.refuseUnlessAdmitted()
        }
        // The SDK names its app on every call; it must be the registration's.
        if let named = request.headers[RegistrationHeaders.app], !UserIdentity.sameBytes(named, found.appId) {
            throw .forbidden("X-SMP-APPID names another app than the registration's")
        }
        return AdmittedCall(registration: found, app: app, user: user)
    }

    /// For a call without `X-SMP-APPCID`: with `X-SMP-APPID` (a configured app) and
    /// `X-SMP-DEVICEID`, which SAP SDK clients send on every call, the signed-in user's one
    /// registration of that device in that app (docs/device-api.md). The caller signs in with
    /// the app's own method first, so nothing is learnt about other users' devices.
    private func registrationOfDevice(_ request: Request, signIn: CallerSignIn, client: String?) async throws(Refusal) -> String {
        guard let appID = request.headers[RegistrationHeaders.app], let deviceID = request.headers[RegistrationHeaders.device],
            !deviceID.isEmpty, let app = signIn.configuration.apps[appID], UserIdentity.sameBytes(app.id, appID)
        else {
            throw .forbidden("the request has no X-SMP-APPCID registration id")
        }
        let user = try await signIn.authenticate(request, app: app, client: client)
        let candidates = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user.identity, app: app.id))
        }
        let matching = candidates.filter { DeviceIdentity.namesADevice($0.deviceId) && DeviceIdentity.same($0.deviceId, deviceID) }
        guard let only = matching.first else {
            guard app.implicitRegistration else {
                throw .forbidden("the user has no registration of this device (X-SMP-DEVICEID) in this app")
            }
            // The app's `implicitRegistration` (docs/device-api.md, "Implicit registration"):
            // the device onboards as through a Connections POST, with only the `DeviceId` the
            // call names (SAP SDK clients send no device type or model on data calls).
            let device = try DeviceFields.read(["DeviceId": .string(deviceID)], existing: DeviceDetails())
            let made = try await onboard(app: app, user: user.identity, requestedID: nil, device: device, source: client ?? "", implicit: true)
            logger.info("device registered implicitly", metadata: ["app": "\(app.id)", "user": "\(user.identity)", "registration": "\(made.id)"])
            return made.id
        }
        guard matching.count == 1 else {
            throw .forbidden("the user has more than one registration of this device in this app; send X-SMP-APPCID")
        }
        return only.id
    }

    /// Onboards the signed-in user's device (a Connections POST or an implicit registration,
    /// docs/device-api.md, "Onboarding"): the registration block, the per-user limit, the
    /// held-device rule and the audit entry, refused with the device API's answers.
    package func onboard(
        app: AppConfiguration, user: UserIdentity, requestedID: String?, device: DeviceDetails, source: String, implicit: Bool = false
    ) async throws(Refusal) -> Registration {
        let outcome = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.register(
                app: app.id, user: user, requestedID: requestedID, device: device, source: source,
                policy: app.blockWipingPolicy, implicit: implicit)
        }
        switch outcome {
        case .registered(let made): return made
        case .blocked(let kind): throw Refusal.userBlocked(kind)
        case .limitReached(let limit): throw DeviceFields.overLimit(limit)
        case .deviceHeld(let held): throw DeviceFields.held(held, "this device cannot onboard again")
        case .tokenHeldByAnotherUser: throw DeviceFields.tokenHeldByAnotherUser
        }
    }

    /// The caller's own registration that a device path names (the Storage service's
    /// `device/{id}`, the push registration's `devices/{id}`; docs/device-api.md): in the app,
    /// the signed-in user's registration whose id is `{id}` (`X-SMP-APPCID`) or, failing that,
    /// whose `DeviceId` is `{id}` (the `X-SMP-DEVICEID` the SAP SDK sends); when the call also
    /// names a registration, it must be that one. Admitted as the proxy admits a call: a locked
    /// or wiped registration and a blocked user are refused.
    package func registration(
        namedByDevicePath device: String, request: Request, app: AppConfiguration, user: UserIdentity
    ) async throws(Refusal) -> String {
        let named = RegistrationHeaders.registrationID(of: request)
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
        try await admit(registration: only.id, app: app, user: user)
        return only.id
    }

    /// The detail that keeps the push device id a device chose for its registration.
    package static let pushDeviceIdDetail = "PushDeviceId"

    /// The caller's own registration a push registration path's `{deviceId}` names, and whether
    /// that id is new to it (docs/push.md, "Registering a device"). As SAP's push API lets a
    /// device choose its own device id, an id that names none of the user's registrations of the
    /// app (by id, `DeviceId` or a push device id chosen before) is bound to the call's own
    /// registration: the one `X-SMP-APPCID` names, else the user's only active registration of
    /// the app. It never reaches another user's registration, nor another of the user's than the
    /// call's own.
    package func pushRegistration(
        namedByDevicePath device: String, request: Request, app: AppConfiguration, user: UserIdentity
    ) async throws(Refusal) -> (id: String, isNewDeviceId: Bool) {
        guard !device.isEmpty, device.utf8.count <= 256, !StoredText.hasControlCharacters(device) else {
            throw .badRequest("the device id must be 1 to 256 bytes without control characters")
        }
        let named = RegistrationHeaders.registrationID(of: request)
        let candidates = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user, app: app.id))
        }
        var matching = Self.registrations(candidates, namedByPushDeviceId: device)
        if !matching.isEmpty {
            if let named { matching = matching.filter { UserIdentity.sameBytes($0.id, named) } }
            guard let only = matching.first else {
                throw .forbidden("the device \(device) is another of the user's registrations than the one the call names (X-SMP-APPCID)")
            }
            guard matching.count == 1 else {
                throw .forbidden("the user has more than one registration of device \(device) in this app; send X-SMP-APPCID")
            }
            try await admit(registration: only.id, app: app, user: user)
            return (only.id, false)
        }
        let own: Registration
        if let named {
            guard let found = candidates.first(where: { UserIdentity.sameBytes($0.id, named) }) else {
                throw .forbidden("the registration the call names (X-SMP-APPCID) is not the user's in this app")
            }
            own = found
        } else {
            // Only a user's one registration of the app goes without saying: with another one,
            // even a locked or wiped one, the call could come from that other phone.
            guard candidates.count == 1, let only = candidates.first else {
                throw .forbidden(
                    candidates.isEmpty
                        ? "the user has no registration of this app to register the device \(device) for; onboard first"
                        : "the user has more than one registration of this app; send X-SMP-APPCID to name the one device \(device) is")
            }
            own = only
        }
        try await admit(registration: own.id, app: app, user: user)
        return (own.id, true)
    }

    /// After `device` was bound to registration `id` as a new push device id: when another of
    /// the user's registrations of the app holds it too — two of the user's phones bound it at
    /// the same moment, each having seen it free —, this one lets go of it and the call is
    /// refused with `409`. A device id names one registration: of two at once at most one keeps
    /// it (both may let go, and the devices register again), never both, which would let a
    /// sender's device path reach two phones.
    package func settlePushDeviceId(
        _ device: String, boundTo id: String, app: AppConfiguration, user: UserIdentity, source: String
    )
        async throws(Refusal)
    {
        let owned = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user, app: app.id))
        }
        let holds = { (registration: Registration) in
            registration.details[Self.pushDeviceIdDetail].map { UserIdentity.sameBytes($0, device) } ?? false
        }
        guard owned.contains(where: { holds($0) && !UserIdentity.sameBytes($0.id, id) }) else { return }
        _ = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.updateDevice(id: id, user: user, app: app.id, source: source, policy: app.blockWipingPolicy) { fields in
                if let held = fields.details[Self.pushDeviceIdDetail], UserIdentity.sameBytes(held, device) {
                    fields.details[Self.pushDeviceIdDetail] = nil
                }
            }
        }
        throw Refusal(
            .conflict, code: "CONFLICT",
            "another of the user's registrations took the device id \(device) at the same moment; register again (with X-SMP-APPCID)")
    }

    /// The registrations of `candidates` (one user's of one app) a push device id names, the
    /// same way for a device and a sender (docs/push.md): by registration id, else by the push
    /// device id a device chose (its bytes), else by `DeviceId` (as device ids compare).
    package static func registrations(_ candidates: [Registration], namedByPushDeviceId device: String) -> [Registration] {
        let byID = candidates.filter { UserIdentity.sameBytes($0.id, device) }
        if !byID.isEmpty { return byID }
        let chosen = candidates.filter { $0.details[pushDeviceIdDetail].map { UserIdentity.sameBytes($0, device) } ?? false }
        if !chosen.isEmpty { return chosen }
        return candidates.filter { DeviceIdentity.namesADevice($0.deviceId) && DeviceIdentity.same($0.deviceId, device) }
    }

    /// Refuses the call unless `user` may reach registration `id` of `app`, as the proxy decides it.
    package func admit(registration id: String, app: AppConfiguration, user: UserIdentity) async throws(Refusal) {
        let admission = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) -> Admission in
            guard RegistrationService.isAcceptableID(id), let found = try await registrations.store.standing(ofRegistration: id),
                UserIdentity.sameBytes(found.appId, app.id)
            else { return .unknown }
            return try await registrations.admit(found, user: user, policy: app.blockWipingPolicy)
        }
        try admission.refuseUnlessAdmitted()
    }
}
