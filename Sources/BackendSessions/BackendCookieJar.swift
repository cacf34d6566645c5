import Dispatch
import Foundation
package import MidtierCore
import Synchronization

/// The back ends' session cookies in memory (docs/device-api.md, "Back-end sessions"): per
/// registration and destination, so a device's CSRF fetch-then-modify works as SAP Gateway
/// requires while the cookies never reach the device — and one registration's session never
/// serves another's. Keys compare registration ids and destination names by their bytes.
///
/// Only what a single back end needs: name, value, path and expiry. `Domain` is ignored (a
/// destination is one back end); `Max-Age`/`Expires` in the past delete a cookie. Bounded:
/// at most `capacity` jars and 50 cookies of at most 4 KiB per jar; when full, a jar not used
/// lately goes, a bounded look each time (a CLOCK cache, ``GroupedClockCache``, which also finds
/// a registration's jars without looking at the others').
///
/// A jar is either held (its cookies are known, possibly none) or not: ``BackendSessions`` loads
/// one that is not held from the store. Two clocks: the wall clock for expiry (as back ends
/// and the store write it), a monotonic one for ordering calls against ended sessions.
package final class BackendCookieJar: Sendable {
    package struct Key: GroupedKey, Sendable, CustomStringConvertible {
        package let registration: ExactString
        package let destination: ExactString
        package init(registration: String, destination: String) {
            self.registration = ExactString(registration)
            self.destination = ExactString(destination)
        }
        package var description: String { "\(registration)/\(destination)" }
        /// A registration's jars go together (``remove(registration:)``).
        package var group: ExactString { registration }
    }

    /// One cookie as kept; `Codable` for the sealed copy in the store.
    package struct Cookie: Sendable, Equatable {
        package var name: String
        package var value: String
        package var path: String
        /// Milliseconds since 1970; nil for a session cookie.
        package var expiresAt: Int64?

        package init(name: String, value: String, path: String, expiresAt: Int64?) {
            self.name = name
            self.value = value
            self.path = path
            self.expiresAt = expiresAt
        }
    }

    private struct Jar {
        var cookies: [String: Cookie] = [:]
        /// When an answer last changed it (`clock`), so that a store read that started before
        /// cannot replace it with what the store had then.
        var changedAt: UInt64 = 0
        /// The stamp of the session held: the store's when it was loaded, or this instance's
        /// last change. A change made on top of it gets a later stamp (`Change.stamp`).
        var stamp: Int64 = 0
    }

    private struct State {
        var jars: GroupedClockCache<Key, Jar>
        /// When each registration's sessions were last ended, so that the answer of a call
        /// that started before cannot bring them back. Bounded like the jars: past `capacity`,
        /// the marks set longest ago go first (one set again gets a second chance).
        var endedAt: ClockCache<ExactString, UInt64>
        /// When each jar was last forgotten because another instance changed it, so that a
        /// load from the store that started before cannot put back what it replaced.
        var forgottenAt: [Key: UInt64] = [:]
        /// When every jar was last forgotten (changes were missed).
        var allForgottenAt: UInt64 = 0
        /// Past this many marks, `forget` drops the ones old enough to guard nothing.
        var pruneForgottenAt = 10_000
        /// The last stamp handed out (`Change.stamp`).
        var lastStamp: Int64 = 0

        init(capacity: Int) {
            jars = GroupedClockCache(capacity: capacity)
            endedAt = ClockCache(capacity: capacity)
        }
    }

    /// What an answer changed, for the store: the jar's cookies after it, and a stamp that
    /// orders this instance's changes (strictly increasing), is later than the stamp of the
    /// session the change was made on (another instance's, read from the store, even within
    /// the same millisecond), and by the wall clock roughly orders changes against other
    /// instances'.
    package struct Change: Sendable, Equatable {
        package let cookies: [Cookie]
        package let stamp: Int64
    }

    /// A change worth writing to the store: expiry moves smaller than this are not.
    static let expiryTolerance: Int64 = 60_000

    private let state: Mutex<State>
    private let wallClock: WallClock

    /// `wallClock`: the server's clock (cookies' expiry).
    package init(capacity: Int = 100_000, wallClock: WallClock = .system) {
        state = Mutex(State(capacity: capacity))
        self.wallClock = wallClock
    }

    /// Now, on the monotonic clock: what `store` and `load` take as the start of a call.
    package var clock: UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Whether the jar of `key` is held in memory (its cookies, possibly none, are known).
    package func holds(_ key: Key) -> Bool {
        state.withLock { $0.jars.peek(key) != nil }
    }

    /// The `Cookie` header value for a request to `path`, or nil.
    package func cookieHeader(for key: Key, path: String) -> String? {
        cookies(for: key).flatMap { Self.header($0, path: path, now: wallClock.now()) }
    }

    /// The unexpired cookies of `key`'s jar, or nil when memory does not hold it.
    package func cookies(for key: Key) -> [Cookie]? { session(for: key)?.cookies }

    /// The unexpired cookies of `key`'s jar and the stamp of the session they belong to, or nil
    /// when memory does not hold it.
    package func session(for key: Key) -> (cookies: [Cookie], stamp: Int64)? {
        let now = wallClock.now()
        return state.withLock { state -> (cookies: [Cookie], stamp: Int64)? in
            guard var jar = state.jars.value(for: key) else { return nil }
            jar.cookies = jar.cookies.filter { $0.value.expiresAt.map { now < $0 } ?? true }
            state.jars.set(jar, for: key)
            return (Array(jar.cookies.values), jar.stamp)
        }
    }

    /// The `Cookie` header value of `cookies` for a request to `path` at `now`, or nil.
    package static func header(_ cookies: some Sequence<Cookie>, path: String, now: Int64) -> String? {
        let matching = cookies.filter { Self.pathMatches(path, $0.path) && ($0.expiresAt.map { now < $0 } ?? true) }.sorted { $0.name < $1.name }
        return matching.isEmpty ? nil : matching.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    /// What became of cookies read from the store.
    package enum Loading: Sendable, Equatable {
        /// In memory now.
        case kept
        /// Dropped: the registration's sessions ended since the read started.
        case ended
        /// Dropped: another instance changed the session since the read started (what was read
        /// may still be the newest; the next call reads again).
        case superseded
        /// Dropped: an answer on this instance changed the jar since the read started; memory
        /// is newer than what was read.
        case older
    }

    /// Puts the cookies a store read found (none: an empty jar) in memory, with the stamp they
    /// were stored with, unless the registration's sessions ended or the jar was forgotten
    /// since the read started.
    @discardableResult
    package func load(_ cookies: [Cookie], stamp: Int64 = 0, for key: Key, startedAt: UInt64) -> Loading {
        let now = wallClock.now()
        return state.withLock { state -> Loading in
            if let ended = state.endedAt.peek(key.registration), ended >= startedAt { return .ended }
            if state.allForgottenAt >= startedAt || (state.forgottenAt[key].map { $0 >= startedAt } ?? false) { return .superseded }
            if let held = state.jars.peek(key), held.changedAt >= startedAt { return .older }
            var jar = Jar(stamp: stamp)
            for cookie in cookies.prefix(50) where cookie.expiresAt.map({ now < $0 }) ?? true { jar.cookies[cookie.name] = cookie }
            state.jars.set(jar, for: key)
            return .kept
        }
    }

    /// Takes the `Set-Cookie` values of a back end's answer to a call that started at
    /// `startedAt` (`clock`) with the cookies `sent` (stored with `sentStamp`); dropped when
    /// the registration's sessions ended since. When memory no longer holds the jar (another
    /// instance's change, or eviction, while the call ran), the answer applies to the cookies
    /// the call was sent, so that an answer renewing one cookie does not lose the others.
    ///
    /// Returns the jar's cookies when they changed in a way the store should learn (a cookie
    /// set, changed or deleted, or an expiry moved by more than a minute); nil otherwise.
    @discardableResult
    package func store(
        _ setCookies: [String], for key: Key, requestPath: String, startedAt: UInt64,
        sent: [Cookie] = [], sentStamp: Int64 = 0
    ) -> Change? {
        guard !setCookies.isEmpty else { return nil }
        let now = wallClock.now()
        let tick = clock
        return state.withLock { state -> Change? in
            if let ended = state.endedAt.peek(key.registration), ended >= startedAt { return nil }
            var jar = state.jars.peek(key) ?? Jar(cookies: Dictionary(sent.map { ($0.name, $0) }, uniquingKeysWith: { $1 }), stamp: sentStamp)
            let before = jar.cookies
            for header in setCookies {
                guard let cookie = Self.parse(header, requestPath: requestPath, now: now) else { continue }
                if let expiry = cookie.expiresAt, expiry <= now {
                    jar.cookies[cookie.name] = nil
                } else if jar.cookies[cookie.name] != nil || jar.cookies.count < 50 {
                    jar.cookies[cookie.name] = cookie
                }
            }
            // Nothing new: memory keeps what it has (or, not holding the jar, reads it next time).
            guard Self.differ(before, jar.cookies) else { return nil }
            jar.changedAt = tick
            state.lastStamp = max(state.lastStamp + 1, now * 1000, jar.stamp + 1)
            jar.stamp = state.lastStamp
            state.jars.set(jar, for: key)
            return Change(cookies: jar.cookies.values.sorted { $0.name < $1.name }, stamp: state.lastStamp)
        }
    }

    /// Drops the jar of `key` from memory (another instance changed it); the next call loads
    /// it from the store.
    package func forget(_ key: Key) {
        let tick = clock
        state.withLock { state in
            state.jars.remove(key)
            state.forgottenAt[key] = tick
            // A load is bounded by the store's deadline (seconds): older marks guard nothing.
            if state.forgottenAt.count > state.pruneForgottenAt {
                state.forgottenAt = state.forgottenAt.filter { tick - $0.value < 60_000_000_000 }
                state.pruneForgottenAt = max(10_000, 2 * state.forgottenAt.count)
            }
        }
    }

    /// Ends every back-end session of a registration (it was wiped, locked or deleted): its
    /// jars go, and answers to calls already under way are not kept.
    package func remove(registration: String) {
        let registration = ExactString(registration)
        let tick = clock
        state.withLock { state in
            state.jars.remove(group: registration)
            state.endedAt.set(tick, for: registration)
        }
    }

    /// Drops every jar from memory (changes were missed); each loads again from the store.
    package func forgetAll() {
        let tick = clock
        state.withLock { state in
            state.allForgottenAt = tick
            state.jars.removeAll()
        }
    }

    package var count: Int { state.withLock { $0.jars.count } }

    /// Whether two cookie sets differ in more than small expiry moves.
    static func differ(_ before: [String: Cookie], _ after: [String: Cookie]) -> Bool {
        guard before.count == after.count else { return true }
        for (name, new) in after {
            guard let old = before[name], old.value == new.value, old.path == new.path else { return true }
            switch (old.expiresAt, new.expiresAt) {
            case (nil, nil): continue
            case (let a?, let b?) where abs(a - b) <= expiryTolerance: continue
            default: return true
            }
        }
        return false
    }

    /// RFC 6265 §5.1.4 path-match.
    static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        requestPath == cookiePath
            || (requestPath.hasPrefix(cookiePath) && (cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).first == "/"))
    }

    /// `name=value; Path=…; Max-Age=…; Expires=…` → a cookie (expiry on the wall clock `now`,
    /// in ms); nil when unusable.
    static func parse(_ header: String, requestPath: String, now: Int64) -> Cookie? {
        let parts = header.split(separator: ";", omittingEmptySubsequences: false)
        guard let first = parts.first, let equals = first.firstIndex(of: "=") else { return nil }
        let name = first[..<equals].trimmingCharacters(in: .whitespaces)
        let value = first[first.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.utf8.count + value.utf8.count <= 4096,
            !name.contains(where: { $0 == "=" || $0 == ";" || $0.isWhitespace })
        else { return nil }
        // Default path: the request path up to its last slash (RFC 6265 §5.1.4).
        var path = String(requestPath.prefix { $0 != "?" })
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex { path = String(path[..<slash]) } else { path = "/" }
        let longest: Int64 = 10 * 365 * 86400
        var expiresAt: Int64?
        for attribute in parts.dropFirst() {
            let pieces = attribute.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            switch pieces.first?.lowercased() {
            case "path" where pieces.count == 2 && pieces[1].hasPrefix("/"):
                path = pieces[1]
            case "max-age" where pieces.count == 2:
                if let seconds = Int64(pieces[1]) {
                    expiresAt = seconds <= 0 ? 0 : now + min(seconds, longest) * 1000
                }
            case "expires" where pieces.count == 2 && expiresAt == nil:
                if let expiry = HTTPTime.parse(pieces[1]) {
                    let remaining = expiry - now / 1000
                    expiresAt = remaining <= 0 ? 0 : now + min(remaining, longest) * 1000
                }
            default:
                break
            }
        }
        return Cookie(name: name, value: value, path: path, expiresAt: expiresAt)
    }
}
