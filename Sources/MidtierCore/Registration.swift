/// A device registration (an "application connection" in SAP Mobile Services terms).
package struct Registration: Sendable, Equatable {
    package enum State: String, Sendable, Equatable, CaseIterable {
        case active
        /// Locked by an admin or the user: traffic refused until unlocked.
        case locked
        /// Wiped: refused forever; the device must onboard anew.
        case wiped
    }

    /// `ApplicationConnectionId`.
    package var id: String
    package var appId: String
    /// The Midtier user who owns it (realm and id).
    package var user: UserIdentity
    package var deviceType: String
    package var deviceModel: String
    package var deviceId: String
    package var formFactor: String
    package var apnsDeviceToken: String
    package var androidGcmRegistrationId: String
    /// Milliseconds since 1970.
    package var createdAt: Int64
    /// Milliseconds since 1970 of the last successful contact.
    package var lastContactAt: Int64
    package var state: State
    /// The other fields of SAP's Connection entity the device sent (`DeviceSubType`, `Email`,
    /// `CustomCustom1`, …), by field name, as text (docs/device-api.md). Stored as one JSON
    /// object.
    package var details: [String: String]

    package init(
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
package struct RegistrationAndBlock: Sendable, Equatable {
    package var registration: Registration
    /// The owner's block; nil when they are not blocked.
    package var block: UserBlock?

    package init(registration: Registration, block: UserBlock?) {
        self.registration = registration
        self.block = block
    }
}

/// What decides whether a call with a registration goes through — its app, owner, state and
/// last contact, and the owner's block —, without the device fields: what the request path
/// reads, and all the memory cache keeps of a registration (docs/operations.md, "Memory").
package struct RegistrationStanding: Sendable, Equatable {
    package var id: String
    package var appId: String
    package var user: UserIdentity
    package var state: Registration.State
    /// Milliseconds since 1970 of the last successful contact.
    package var lastContactAt: Int64
    /// The owner's block; nil when they are not blocked.
    package var block: UserBlock?

    package init(id: String, appId: String, user: UserIdentity, state: Registration.State, lastContactAt: Int64, block: UserBlock?) {
        (self.id, self.appId, self.user, self.state, self.lastContactAt, self.block) = (id, appId, user, state, lastContactAt, block)
    }

    package init(_ registration: Registration, block: UserBlock?) {
        self.id = registration.id
        self.appId = registration.appId
        self.user = registration.user
        self.state = registration.state
        self.lastContactAt = registration.lastContactAt
        self.block = block
    }
}
