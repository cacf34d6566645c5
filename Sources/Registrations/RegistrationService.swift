import Foundation
package import MidtierCore
package import MidtierStore

/// The device-supplied fields of a new or updated registration.
package struct DeviceDetails: Sendable, Equatable {
    package var deviceType: String
    package var deviceModel: String
    package var deviceId: String
    package var formFactor: String
    /// The APNs device token in hexadecimal, kept in lower case: APNs reads the digits without
    /// regard to case, so `AB01` and `ab01` are one phone (docs/push.md, "Registering a device").
    package var apnsDeviceToken: String {
        get { apnsToken }
        set { apnsToken = Self.apnsToken(newValue) }
    }
    private var apnsToken: String
    package var androidGcmRegistrationId: String
    /// The Connection entity's other fields, by name (`Registration.details`).
    package var details: [String: String]

    package init(
        deviceType: String = "", deviceModel: String = "", deviceId: String = "", formFactor: String = "",
        apnsDeviceToken: String = "", androidGcmRegistrationId: String = "", details: [String: String] = [:]
    ) {
        self.deviceType = deviceType
        self.deviceModel = deviceModel
        self.deviceId = deviceId
        self.formFactor = formFactor
        self.apnsToken = Self.apnsToken(apnsDeviceToken)
        self.androidGcmRegistrationId = androidGcmRegistrationId
        self.details = details
    }

    /// An APNs token as Midtier keeps and compares it: ASCII lower case.
    package static func apnsToken(_ token: String) -> String {
        String(decoding: token.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    package init(of registration: Registration) {
        self.init(
            deviceType: registration.deviceType, deviceModel: registration.deviceModel, deviceId: registration.deviceId,
            formFactor: registration.formFactor, apnsDeviceToken: registration.apnsDeviceToken,
            androidGcmRegistrationId: registration.androidGcmRegistrationId, details: registration.details)
    }
}

/// Whether a proxied call on a registration may go ahead (docs/device-api.md, "Refusals"), in
/// the order the checks are made.
package enum Admission: Sendable, Equatable {
    case admitted
    /// No such registration, or not this user's: to the caller it does not exist.
    case unknown
    /// The user is blocked for traffic (`.traffic` or `.all`).
    case blocked(UserBlock.Kind)
    case wiped
    case locked
}

/// What an admin or a user may do to a registration.
package enum RegistrationAction: String, Sendable, CaseIterable {
    case lock, unlock, wipe

    var target: Registration.State {
        switch self {
        case .lock: .locked
        case .unlock: .active
        case .wipe: .wiped
        }
    }

    /// A wiped registration never comes back: only a wipe may start from one.
    var allowedFrom: Set<Registration.State> {
        switch self {
        case .lock, .unlock: [.active, .locked]
        case .wipe: [.active, .locked, .wiped]
        }
    }
}

/// The result of onboarding a device.
package enum Onboarding: Sendable, Equatable {
    case registered(Registration)
    /// The user already has `limit` registrations (`maxRegistrationsPerUser`).
    case limitReached(limit: Int)
    /// The user's registration of this device is locked or wiped (docs/identity.md, "The same
    /// device"): the device cannot onboard again until an admin unlocks or deletes it.
    case deviceHeld(Registration)
    /// The user is blocked from registering (a `registration` or `all` block, docs/identity.md).
    case blocked(UserBlock.Kind)
    /// A push token it names is another user's registration's (docs/push.md).
    case tokenHeldByAnotherUser
}

/// The result of a device's change to its registration's fields.
package enum DeviceUpdate: Sendable, Equatable {
    case updated(Registration)
    /// No such registration, or not the user's, or not of this app.
    case notFound
    /// The registration is locked or wiped, or the `DeviceId` it would take is that of the
    /// user's locked or wiped registration (the one given) of another device.
    case deviceHeld(Registration)
    /// A push token it names is another user's registration's (docs/push.md).
    case tokenHeldByAnotherUser
}

/// Onboarding, the ownership rules (a registration belongs to one user of one app; for anyone
/// else it does not exist), and the rules that decide whether a registration may call.
package struct RegistrationService: Sendable {
    package let store: any StateStore
    /// The server's clock (injectable for tests).
    package let clock: WallClock
    /// The most registrations one user may hold (`maxRegistrationsPerUser`; read per call, as
    /// a reload may change it).
    let maximumPerUser: @Sendable () -> Int?
    /// Told when a registration's back-end sessions must end: it was deleted, locked or wiped.
    let sessionsEnded: @Sendable (_ registrationID: String) -> Void
    /// Last contacts on their way to the store, in batches.
    package let contacts: ContactRecorder
    /// How often a registration's last contact is noted at most (once noted, it waits for the
    /// next batch; see ``ContactRecorder``).
    package static let contactResolutionMilliseconds: Int64 = 60_000
    static let dayMilliseconds: Int64 = 86_400_000

    package init(
        store: any StateStore, clock: WallClock = .system,
        maximumPerUser: @escaping @Sendable () -> Int? = { nil },
        sessionsEnded: @escaping @Sendable (_ registrationID: String) -> Void = { _ in }
    ) {
        self.store = store
        self.clock = clock
        self.maximumPerUser = maximumPerUser
        self.sessionsEnded = sessionsEnded
        self.contacts = ContactRecorder(store: store)
    }

    /// Whether a client-supplied registration id is acceptable: 1–128 characters of
    /// `A–Z a–z 0–9 . _ ~ -` (it travels in a cookie and in `Connections('…')`).
    package static func isAcceptableID(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count)
            && id.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }

    /// Creates a registration owned by `user`, unless the user is blocked from registering or
    /// the user's registration of the same device is locked or wiped (`heldRegistration`). A client-supplied id is kept when
    /// acceptable and free — never used before, by anyone —; otherwise a new UUID is given.
    /// `implicit`: made by a proxied call, not a Connections POST (the app's
    /// `implicitRegistration`, docs/device-api.md); the audit entry says so.
    package func register(
        app: String, user: UserIdentity, requestedID: String?, device: DeviceDetails, source: String,
        policy: BlockWipingPolicy = BlockWipingPolicy(), implicit: Bool = false
    ) async throws(StoreError) -> Onboarding {
        if let block = try await store.block(of: user), block.kind.blocksRegistration { return .blocked(block.kind) }
        if let held = try await heldRegistration(app: app, user: user, deviceId: device.deviceId, policy: policy) {
            return .deviceHeld(held)
        }
        let created = clock.now()
        var registration = Registration(
            id: "", appId: app, user: user,
            deviceType: device.deviceType, deviceModel: device.deviceModel, deviceId: device.deviceId,
            formFactor: device.formFactor, apnsDeviceToken: device.apnsDeviceToken,
            androidGcmRegistrationId: device.androidGcmRegistrationId, createdAt: created, details: device.details
        )
        func audit() -> AuditEntry {
            AuditEntry(
                at: created, actor: "user:\(user)", action: "registration.create", target: registration.id,
                detail: "app \(app), \(device.deviceType) \(device.deviceModel)\(implicit ? ", implicit (X-SMP-DEVICEID)" : "")", source: source)
        }
        let maximum = maximumPerUser()
        if let requestedID, Self.isAcceptableID(requestedID) {
            registration.id = requestedID
            switch try await store.insert(registration, maximumPerUser: maximum, audit: audit()) {
            case .inserted: return .registered(registration)
            case .limitReached(let limit): return .limitReached(limit: limit)
            case .deviceHeld(let id): return try await held(id, of: registration)
            case .tokenHeldByAnotherUser: return .tokenHeldByAnotherUser
            case .idTaken: break
            }
        }
        while true {
            registration.id = UUID().uuidString.lowercased()
            switch try await store.insert(registration, maximumPerUser: maximum, audit: audit()) {
            case .inserted: return .registered(registration)
            case .limitReached(let limit): return .limitReached(limit: limit)
            case .deviceHeld(let id): return try await held(id, of: registration)
            case .tokenHeldByAnotherUser: return .tokenHeldByAnotherUser
            case .idTaken: continue
            }
        }
    }

    /// The user's registration `id` that the store found holding the device as `onboarding`
    /// was inserted (a lock or wipe that committed after `heldRegistration` looked).
    private func held(_ id: String, of onboarding: Registration) async throws(StoreError) -> Onboarding {
        if let current = try await store.currentRegistration(id: id) { return .deviceHeld(current) }
        // Deleted since: the insert saw it held, so say so with what it held.
        var held = onboarding
        held.id = id
        held.state = .locked
        return .deviceHeld(held)
    }

    /// The registration if it exists, belongs to `user` and to `app`; nil otherwise. An id no
    /// registration can have (`isAcceptableID`: a NUL, say, which PostgreSQL cannot even be
    /// asked about) is nil without asking the store.
    package func owned(id: String, user: UserIdentity, app: String) async throws(StoreError) -> Registration? {
        guard Self.isAcceptableID(id), let registration = try await store.registration(id: id),
            registration.user == user, registration.appId == app
        else { return nil }
        return registration
    }

    /// Updates the device fields of an owned registration. A locked or wiped registration keeps
    /// its fields, and a registration cannot take the `DeviceId` of the user's locked or wiped
    /// registration of another device: either would let the device leave its lock behind. The
    /// state is judged on the durable store's registration, so a lock made through another
    /// instance holds at once.
    package func updateDevice(
        id: String, user: UserIdentity, app: String, source: String, policy: BlockWipingPolicy = BlockWipingPolicy(),
        _ change: (inout DeviceDetails) -> Void
    ) async throws(StoreError) -> DeviceUpdate {
        guard Self.isAcceptableID(id), var registration = try await store.currentRegistration(id: id), registration.user == user,
            UserIdentity.sameBytes(registration.appId, app)
        else { return .notFound }
        guard registration.state == .active else { return .deviceHeld(registration) }
        var device = DeviceDetails(of: registration)
        change(&device)
        if !DeviceIdentity.same(device.deviceId, registration.deviceId),
            let held = try await heldRegistration(app: app, user: user, deviceId: device.deviceId, policy: policy)
        {
            return .deviceHeld(held)
        }
        registration.deviceType = device.deviceType
        registration.deviceModel = device.deviceModel
        registration.deviceId = device.deviceId
        registration.formFactor = device.formFactor
        registration.apnsDeviceToken = device.apnsDeviceToken
        registration.androidGcmRegistrationId = device.androidGcmRegistrationId
        registration.details = device.details
        let audit = AuditEntry(at: clock.now(), actor: "user:\(user)", action: "registration.update", target: id, source: source)
        switch try await store.updateDevice(registration, audit: audit) {
        case .written: break
        case .notFound: return .notFound
        case .tokenHeldByAnotherUser: return .tokenHeldByAnotherUser
        }
        return .updated(registration)
    }

    /// The user's registration of the device `deviceId` in `app` that holds it — locked or
    /// wiped, a wiped one first — or nil (docs/identity.md, "The same device": app and user by
    /// exact bytes, the `DeviceId` by its normal form, ``DeviceIdentity``). An active registration of the device that the app's
    /// offline policy would lock or wipe is locked or wiped now, as the device's next call
    /// would do. A registration without a `DeviceId` names no device: nil.
    ///
    /// Read from the durable store, so a lock made through another instance holds at once.
    package func heldRegistration(
        app: String, user: UserIdentity, deviceId: String,
        policy: BlockWipingPolicy
    ) async throws(StoreError) -> Registration? {
        guard DeviceIdentity.namesADevice(deviceId) else { return nil }
        let sameDevice = try await store.registrations(matching: RegistrationFilter(user: user, app: app))
            .filter { DeviceIdentity.same($0.deviceId, deviceId) && $0.user == user }
        if let held = sameDevice.first(where: { $0.state == .wiped }) ?? sameDevice.first(where: { $0.state == .locked }) {
            return held
        }
        let now = clock.now()
        for registration in sameDevice {
            guard let (action, detail) = Self.offlineAction(offline: now - registration.lastContactAt, policy: policy) else { continue }
            switch try await apply(action, to: registration.id, by: .system, detail: detail) {
            case .changed(let changed): return changed
            case .refused(let current) where current != .active:
                var held = registration
                held.state = current
                return held
            case .refused, .notFound: continue
            }
        }
        return nil
    }

    /// Deletes an owned registration for its device: `.notFound` when it is not the user's,
    /// `.refused` when it is locked or wiped (its owner cannot escape a lock or wipe by
    /// deleting it and registering again).
    package func delete(id: String, user: UserIdentity, app: String, source: String) async throws(StoreError) -> DeleteOutcome {
        guard try await owned(id: id, user: user, app: app) != nil else { return .notFound }
        let audit = AuditEntry(at: clock.now(), actor: "user:\(user)", action: "registration.delete", target: id, source: source)
        let outcome = try await store.delete(id: id, allowedFrom: [.active], audit: audit)
        if case .deleted = outcome { sessionsEnded(id) }
        return outcome
    }

    /// Deletes a registration whatever its state (admin API).
    package func delete(id: String, by actor: AuditActor) async throws(StoreError) -> DeleteOutcome {
        let audit = AuditEntry(at: clock.now(), actor: actor.name, action: "registration.delete", target: id, source: actor.source)
        let outcome = try await store.delete(id: id, allowedFrom: Set(Registration.State.allCases), audit: audit)
        if case .deleted = outcome { sessionsEnded(id) }
        return outcome
    }

    /// Locks, unlocks or wipes a registration, with an audit entry in the same transaction.
    package func apply(
        _ action: RegistrationAction, to id: String, by actor: AuditActor, detail: String = ""
    ) async throws(StoreError) -> StateTransition {
        let audit = AuditEntry(
            at: clock.now(), actor: actor.name, action: "registration.\(action.rawValue)", target: id,
            detail: detail, source: actor.source)
        let result = try await store.transition(id: id, to: action.target, allowedFrom: action.allowedFrom, audit: audit)
        // A lock or wipe ends the back-end sessions; an unlock starts without them.
        if case .changed = result, action != .unlock { sessionsEnded(id) }
        return result
    }

    /// What the app's offline policy does to a registration last seen `offline` ms ago.
    static func offlineAction(offline: Int64, policy: BlockWipingPolicy) -> (RegistrationAction, String)? {
        guard policy.blockWipeEnabled else { return nil }
        if policy.wipeDisconnectedPeriod > 0, offline > Int64(policy.wipeDisconnectedPeriod) * dayMilliseconds {
            return (.wipe, "offline longer than wipeDisconnectedPeriod (\(policy.wipeDisconnectedPeriod) days)")
        }
        if policy.blockDisconnectedPeriod > 0, offline > Int64(policy.blockDisconnectedPeriod) * dayMilliseconds {
            return (.lock, "offline longer than blockDisconnectedPeriod (\(policy.blockDisconnectedPeriod) days)")
        }
        return nil
    }

    /// Decides whether `user` may make a proxied call with `found` (a registration and its
    /// owner's block, as read from the store), enforcing the app's offline policy server-side
    /// from the last contact, and records the contact.
    package func admit(
        _ found: RegistrationStanding?, user: UserIdentity,
        policy: BlockWipingPolicy
    ) async throws(StoreError) -> Admission {
        guard let registration = found, registration.user == user else { return .unknown }
        if let block = registration.block, block.kind.blocksTraffic { return .blocked(block.kind) }
        switch registration.state {
        case .wiped: return .wiped
        case .locked: return .locked
        case .active: break
        }
        let now = clock.now()
        if Self.offlineAction(offline: now - registration.lastContactAt, policy: policy) != nil {
            // Judged on the store's registration, not memory's: another instance may have
            // served the device (or deleted the registration) since, and every instance must
            // give the same answer.
            guard let current = try await store.currentRegistration(id: registration.id), current.user == user else { return .unknown }
            if let (action, detail) = Self.offlineAction(offline: now - current.lastContactAt, policy: policy) {
                _ = try await apply(action, to: registration.id, by: .system, detail: detail)
                return action == .wipe ? .wiped : .locked
            }
        }
        if now - registration.lastContactAt >= Self.contactResolutionMilliseconds {
            contacts.record(id: registration.id, at: now)
        }
        return .admitted
    }
}
