/// A registration's back-end session with one destination (its cookies) as the store keeps
/// it: sealed — encrypted and authenticated — by the caller, so the database never holds a
/// cookie in clear (docs/operations.md). A state change or deletion of the registration
/// removes its sessions in the same transaction.
package struct SealedBackendSession: Sendable, Equatable {
    package var registration: String
    package var destination: String
    package var sealed: [UInt8]
    /// Milliseconds since 1970 after which none of its cookies is valid; nil while it holds
    /// a session cookie (one that lives as long as the registration's session).
    package var expiresAt: Int64?
    /// Orders saves of the same session: a save older than the stored copy changes nothing.
    package var stamp: Int64

    package init(registration: String, destination: String, sealed: [UInt8], expiresAt: Int64?, stamp: Int64) {
        self.registration = registration
        self.destination = destination
        self.sealed = sealed
        self.expiresAt = expiresAt
        self.stamp = stamp
    }
}

/// What became of a back-end session saved to the store.
package enum BackendSessionSave: Sendable, Equatable {
    case saved
    /// The store holds a copy with a later stamp (another answer's): nothing changed.
    case stale
    /// The registration is not active (locked, wiped or gone since the call started): the
    /// store keeps no session for it.
    case inactive
}
