/// A device registration (an "application connection" in SAP Mobile Services terms).
public struct Registration: Sendable, Equatable {
    public enum State: String, Sendable, Equatable, CaseIterable {
        case active
        /// Locked by an admin or the user: traffic refused until unlocked.
        case locked
        /// Wiped: refused forever; the device must onboard anew.
        case wiped
    }

    /// `ApplicationConnectionId`.
    public var id: String
    public var appId: String
    /// The Midtier user who owns it (realm and id).
    public var user: UserIdentity
    public var deviceType: String
    public var deviceModel: String
    public var deviceId: String
    public var formFactor: String
    public var apnsDeviceToken: String
    public var androidGcmRegistrationId: String
    /// Milliseconds since 1970.
    public var createdAt: Int64
    /// Milliseconds since 1970 of the last successful contact.
    public var lastContactAt: Int64
    public var state: State
    /// The other fields of SAP's Connection entity the device sent (`DeviceSubType`, `Email`,
    /// `CustomCustom1`, …), by field name, as text (docs/device-api.md). Stored as one JSON
    /// object.
    public var details: [String: String]

    public init(
        id: String, appId: String, user: UserIdentity,
        deviceType: String = "", deviceModel: String = "", deviceId: String = "", formFactor: String = "",
        apnsDeviceToken: String = "", androidGcmRegistrationId: String = "",
        createdAt: Int64, lastContactAt: Int64? = nil, state: State = .active, details: [String: String] = [:]
    ) {
        self.id = id
        self.appId = appId
        self.user = user
        self.deviceType = deviceType
        self.deviceModel = deviceModel
        self.deviceId = deviceId
        self.formFactor = formFactor
        self.apnsDeviceToken = apnsDeviceToken
        self.androidGcmRegistrationId = androidGcmRegistrationId
        self.createdAt = createdAt
        self.lastContactAt = lastContactAt ?? createdAt
        self.state = state
        self.details = details
    }
}

/// A registration with its owner's block, as the request path reads them together.
public struct RegistrationAndBlock: Sendable, Equatable {
    public var registration: Registration
    /// The owner's block; nil when they are not blocked.
    public var block: UserBlock?

    public init(registration: Registration, block: UserBlock?) {
        self.registration = registration
        self.block = block
    }
}
