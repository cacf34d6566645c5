/// A device registration (an "application connection" in SAP Mobile Services terms), as stored.
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
    /// The Midtier user who owns it.
    public var userId: String
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

    public init(
        id: String, appId: String, userId: String,
        deviceType: String = "", deviceModel: String = "", deviceId: String = "", formFactor: String = "",
        apnsDeviceToken: String = "", androidGcmRegistrationId: String = "",
        createdAt: Int64, lastContactAt: Int64? = nil, state: State = .active
    ) {
        self.id = id
        self.appId = appId
        self.userId = userId
        self.deviceType = deviceType
        self.deviceModel = deviceModel
        self.deviceId = deviceId
        self.formFactor = formFactor
        self.apnsDeviceToken = apnsDeviceToken
        self.androidGcmRegistrationId = androidGcmRegistrationId
        self.createdAt = createdAt
        self.lastContactAt = lastContactAt ?? createdAt
        self.state = state
    }
}

/// The store is unreachable or failed; the request can be retried.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Durable registration state. Every write is committed before it returns: a change that was
/// acknowledged survives a crash.
public protocol RegistrationStore: Sendable {
    /// Inserts `registration`; false (and nothing written) when its id is taken.
    func insert(_ registration: Registration) async throws(StoreError) -> Bool
    func registration(id: String) async throws(StoreError) -> Registration?
    func registrations(user: String) async throws(StoreError) -> [Registration]
    /// Replaces the stored registration with the same id; false when there is none.
    func update(_ registration: Registration) async throws(StoreError) -> Bool
    /// Deletes; false when there was none.
    func delete(id: String) async throws(StoreError) -> Bool
    /// Records a successful contact (monotonic: never moves back in time).
    func recordContact(id: String, at milliseconds: Int64) async throws(StoreError)
    /// Whether the store answers (for `/readyz`).
    func ping() async -> Bool
}
