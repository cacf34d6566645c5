import Foundation
package import Logging
package import MidtierCore
package import MidtierStore
import Synchronization

/// The back-end sessions of every registration: the cookie jar in memory and, with
/// `backendSessionKeys` configured, a sealed copy in the store, so that every instance sharing
/// the store continues a session another one started — a CSRF token fetched through one
/// instance is accepted on a write through another (docs/operations.md).
///
/// - A call reads memory. A jar memory does not hold is loaded from the store once (an empty
///   one too); a modifying call (anything but GET, HEAD and OPTIONS) always reads the store's
///   copy, so it sees a session another instance started a moment ago.
/// - An answer whose cookies change the session writes the sealed copy before the device sees
///   the answer; other instances drop their copy through the store's change feed. Saves carry
///   a stamp, so an older answer saved late does not replace a newer one.
/// - Ending a registration's sessions (lock, wipe, delete) happens in the store with the state
///   change, and here through `ended(registration:)`.
///
/// With the store unavailable, memory serves: a call goes on with what this instance holds,
/// and for `quietPeriod` after a store error calls do not wait for the store at all.
/// Cookie values never reach a log.
package final class BackendSessions: Sendable {
    package typealias Key = BackendCookieJar.Key
    package typealias Cookie = BackendCookieJar.Cookie

    /// What a call took from the jar, to hand back with the answer's cookies.
    package struct Call: Sendable {
        package let key: Key
        let path: String
        let startedAt: UInt64
        /// Every cookie of the session the call went with (not only those its path matched).
        let sent: [Cookie]
        /// The stamp of the session `sent` belongs to.
        let sentStamp: Int64
        /// The `Cookie` header for the back end, or nil.
        package let cookieHeader: String?
    }

    package let jar: BackendCookieJar
    private let store: any StateStore
    private let sealer: SessionSealer?
    private let logger: Logger
    private let wallClock: WallClock
    /// Until when calls leave the store alone after it failed.
    private let quietUntil = Mutex<ContinuousClock.Instant?>(nil)
    static let quietPeriod = Duration.seconds(5)

    /// Without `keys`, sessions stay in this instance's memory. `wallClock`: the server's clock.
    package init(store: any StateStore, keys: [BackendSessionKey], logger: Logger, wallClock: WallClock = .system) {
        self.jar = BackendCookieJar(wallClock: wallClock)
        self.store = store
        self.sealer = SessionSealer(keys: keys)
        self.logger = logger
        self.wallClock = wallClock
    }

    /// The cookies for a call of `registration` to `destination` at back-end path `path`.
    package func begin(registration: String, destination: String, path: String, modifying: Bool) async -> Call {
        let key = Key(registration: registration, destination: destination)
        let startedAt = jar.clock
        if sealer != nil, modifying || !jar.holds(key), let read = await read(key),
            jar.load(read.cookies, stamp: read.stamp, for: key, startedAt: startedAt) == .superseded
        {
            // Another instance changed the session while it was read (its notice came in
            // between): this call goes with what was read, the next one reads again.
            return Call(
                key: key, path: path, startedAt: startedAt, sent: read.cookies, sentStamp: read.stamp,
                cookieHeader: BackendCookieJar.header(read.cookies, path: path, now: wallClock.now()))
        }
        let held = jar.session(for: key) ?? ([], 0)
        return Call(
            key: key, path: path, startedAt: startedAt, sent: held.cookies, sentStamp: held.stamp,
            cookieHeader: BackendCookieJar.header(held.cookies, path: path, now: wallClock.now()))
    }

    /// Takes the `Set-Cookie` values of the back end's answer to `call`.
    package func finish(_ call: Call, setCookies: [String]) async {
        guard
            let change = jar.store(
                setCookies, for: call.key, requestPath: call.path, startedAt: call.startedAt,
                sent: call.sent, sentStamp: call.sentStamp),
            let sealer, storeAnswers
        else { return }
        let registration = call.key.registration.value
        let destination = call.key.destination.value
        do {
            let plaintext = SealedCookies.text(change.cookies)
            let sealed = try sealer.seal(plaintext, registration: registration, destination: destination)
            // A session cookie keeps the row until the registration's session ends; a session
            // with no cookies left expires at once.
            let now = wallClock.now()
            let expiresAt =
                change.cookies.isEmpty
                ? now
                : change.cookies.contains { $0.expiresAt == nil } ? nil : change.cookies.compactMap(\.expiresAt).max()
            let session = SealedBackendSession(
                registration: registration, destination: destination, sealed: sealed,
                expiresAt: expiresAt, stamp: change.stamp)
            switch try await store.saveBackendSession(session, now: now) {
            case .saved: break
            case .stale: jar.forget(call.key)  // another answer's newer copy is in the store: read it next time
            case .inactive: jar.remove(registration: registration)
            }
        } catch {
            storeFailed()
            logger.warning(
                "back-end session not kept in the store; this instance continues it from memory",
                metadata: ["registration": "\(registration)", "destination": "\(destination)", "error": "\(error)"])
        }
    }

    /// A registration's sessions ended (locked, wiped or deleted, here or on another instance).
    package func ended(registration: String) { jar.remove(registration: registration) }

    /// Another instance changed a session: the next call reads it from the store.
    package func changed(registration: String, destination: String) {
        jar.forget(Key(registration: registration, destination: destination))
    }

    /// Changes were missed: every session is read from the store again.
    package func forgetAll() { jar.forgetAll() }

    /// The session's cookies as the store has them, with their stamp (none when it has none,
    /// or when what it has does not open); nil when the store did not answer (memory serves
    /// then).
    private func read(_ key: Key) async -> (cookies: [Cookie], stamp: Int64)? {
        guard let sealer, storeAnswers else { return nil }
        let registration = key.registration.value
        let destination = key.destination.value
        let found: SealedBackendSession?
        do {
            found = try await store.backendSession(registration: registration, destination: destination, now: wallClock.now())
        } catch {
            // Memory serves while the store is away; an instance that holds nothing sends none.
            storeFailed()
            logger.warning(
                "back-end session not read from the store; using this instance's memory",
                metadata: ["registration": "\(registration)", "destination": "\(destination)", "error": "\(error)"])
            return nil
        }
        guard let found else { return ([], 0) }
        do {
            let plaintext = try sealer.open(found.sealed, registration: registration, destination: destination)
            return (try SealedCookies.cookies(plaintext), found.stamp)
        } catch {
            // The back end starts a new session (a device fetches a new CSRF token).
            logger.warning(
                "a stored back-end session does not open; starting without it",
                metadata: ["registration": "\(registration)", "destination": "\(destination)", "reason": "\(error)"])
            return ([], found.stamp)
        }
    }

    /// Whether to ask the store: not within `quietPeriod` of its last failure.
    private var storeAnswers: Bool {
        quietUntil.withLock { until in
            guard let quiet = until else { return true }
            if ContinuousClock.now < quiet { return false }
            until = nil
            return true
        }
    }

    private func storeFailed() {
        quietUntil.withLock { $0 = ContinuousClock.now + Self.quietPeriod }
    }
}
