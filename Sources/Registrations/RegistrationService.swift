import Foundation
@_exported import MidtierStore

/// The device-supplied fields of a new or updated registration.
public struct DeviceDetails: Sendable, Equatable {
    public var deviceType: String
    public var deviceModel: String
    public var deviceId: String
    public var formFactor: String
    public var apnsDeviceToken: String
    public var androidGcmRegistrationId: String

    public init(deviceType: String = "", deviceModel: String = "", deviceId: String = "", formFactor: String = "",
                apnsDeviceToken: String = "", androidGcmRegistrationId: String = "") {
        self.deviceType = deviceType
        self.deviceModel = deviceModel
        self.deviceId = deviceId
        self.formFactor = formFactor
        self.apnsDeviceToken = apnsDeviceToken
        self.androidGcmRegistrationId = androidGcmRegistrationId
    }
}

/// Whether a proxied call on a registration may go ahead (SPEC §4).
public enum Admission: Sendable, Equatable {
    case admitted(Registration)
    /// No such registration, or not this user's: to the caller it does not exist.
    case unknown
    case locked
    case wiped
}

/// Onboarding and the ownership rules: a registration belongs to one user of one app, and for
/// anyone else it does not exist.
public struct RegistrationService: Sendable {
    public let store: any RegistrationStore
    /// Milliseconds since 1970 (injectable for tests).
    let now: @Sendable () -> Int64
    /// How often a registration's last contact is written at most (a write per request would
    /// cost more than the request).
    public static let contactResolutionMilliseconds: Int64 = 60_000

    public init(store: any RegistrationStore, now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }) {
        self.store = store
        self.now = now
    }

    /// Whether a client-supplied registration id is acceptable: 1–128 characters of
    /// `A–Z a–z 0–9 . _ ~ -` (it travels in a cookie and in `Connections('…')`).
    public static func isAcceptableID(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count) && id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "-"): true
            default: false
            }
        }
    }

    /// Creates a registration owned by `user`. A client-supplied id is kept when acceptable and
    /// free; otherwise a new UUID is given.
    public func register(app: String, user: String, requestedID: String?, device: DeviceDetails) async throws(StoreError) -> Registration {
        let created = now()
        var registration = Registration(
            id: "", appId: app, userId: user,
            deviceType: device.deviceType, deviceModel: device.deviceModel, deviceId: device.deviceId,
            formFactor: device.formFactor, apnsDeviceToken: device.apnsDeviceToken,
            androidGcmRegistrationId: device.androidGcmRegistrationId, createdAt: created
        )
        if let requestedID, Self.isAcceptableID(requestedID) {
            registration.id = requestedID
            if try await store.insert(registration) { return registration }
        }
        while true {
            registration.id = UUID().uuidString.lowercased()
            if try await store.insert(registration) { return registration }
        }
    }

    /// The registration if it exists, belongs to `user` and to `app`; nil otherwise.
    public func owned(id: String, user: String, app: String) async throws(StoreError) -> Registration? {
        guard let registration = try await store.registration(id: id),
              registration.userId == user, registration.appId == app else { return nil }
        return registration
    }

    /// Updates the device fields of an owned registration; nil when it is not the user's.
    public func updateDevice(id: String, user: String, app: String, _ change: (inout DeviceDetails) -> Void) async throws(StoreError) -> Registration? {
        guard var registration = try await owned(id: id, user: user, app: app) else { return nil }
        var device = DeviceDetails(deviceType: registration.deviceType, deviceModel: registration.deviceModel,
                                   deviceId: registration.deviceId, formFactor: registration.formFactor,
                                   apnsDeviceToken: registration.apnsDeviceToken,
                                   androidGcmRegistrationId: registration.androidGcmRegistrationId)
        change(&device)
        registration.deviceType = device.deviceType
        registration.deviceModel = device.deviceModel
        registration.deviceId = device.deviceId
        registration.formFactor = device.formFactor
        registration.apnsDeviceToken = device.apnsDeviceToken
        registration.androidGcmRegistrationId = device.androidGcmRegistrationId
        guard try await store.update(registration) else { return nil }
        return registration
    }

    /// Deletes an owned registration; false when it is not the user's (or does not exist).
    public func delete(id: String, user: String, app: String) async throws(StoreError) -> Bool {
        guard try await owned(id: id, user: user, app: app) != nil else { return false }
        return try await store.delete(id: id)
    }

    /// Decides whether `user` may make a proxied call with `registration` (as read from the
    /// store), and records the contact (at most once per `contactResolutionMilliseconds`).
    public func admit(_ registration: Registration?, user: String) async throws(StoreError) -> Admission {
        guard let registration, registration.userId == user else { return .unknown }
        switch registration.state {
        case .wiped: return .wiped
        case .locked: return .locked
        case .active: break
        }
        let now = now()
        if now - registration.lastContactAt >= Self.contactResolutionMilliseconds {
            try await store.recordContact(id: registration.id, at: now)
        }
        return .admitted(registration)
    }
}
