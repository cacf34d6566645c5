import Foundation

/// The server's wall clock: now, as milliseconds since 1970 (UTC), the unit the store, the
/// audit trail and the wire formats keep. `MidtierServer` makes one and hands the same clock to
/// every part that asks for the time, so that tests can stand it or move it forward
/// (`WallClock { 1_800_000_000_000 }`). Monotonic time (timeouts, throttles, cache lifetimes)
/// is not wall-clock time and does not come from here; nor are the times of credentials that
/// another party checks against its own clock (SAML assertions, users' certificates, APNs and
/// FCM tokens, a token's remaining life): those stay on the system's time.
package struct WallClock: Sendable {
    private let milliseconds: @Sendable () -> Int64

    /// A clock that reads `milliseconds` (since 1970) whenever it is asked.
    package init(_ milliseconds: @escaping @Sendable () -> Int64) {
        self.milliseconds = milliseconds
    }

    /// The system's clock.
    package static let system = WallClock { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Milliseconds since 1970, now.
    package func now() -> Int64 { milliseconds() }
}
