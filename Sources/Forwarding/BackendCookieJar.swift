import Dispatch
import Foundation
import Synchronization

/// The back ends' session cookies, kept by Midtier (SPEC §6): per registration and
/// destination, so a device's CSRF fetch-then-modify works as SAP Gateway requires while the
/// cookies never reach the device — and one registration's session never serves another's.
///
/// Only what a single back end needs: name, value, path and expiry. `Domain` is ignored (a
/// destination is one back end); `Max-Age`/`Expires` in the past delete a cookie. Bounded:
/// at most `capacity` jars and 50 cookies of at most 4 KiB per jar; the least recently used
/// jar goes first.
public final class BackendCookieJar: Sendable {
    public struct Key: Hashable, Sendable {
        public var registration: String
        public var destination: String
        public init(registration: String, destination: String) {
            self.registration = registration
            self.destination = destination
        }
    }

    struct Cookie: Sendable, Equatable {
        var value: String
        var path: String
        /// Monotonic nanoseconds; nil for a session cookie.
        var expiresAt: UInt64?
    }

    private struct Jar {
        var cookies: [String: Cookie] = [:]
        var lastUsed: UInt64 = 0
    }

    private struct State {
        var jars: [Key: Jar] = [:]
        /// When each registration's sessions were last ended, so that the answer of a call
        /// that started before cannot bring them back. Bounded like the jars.
        var endedAt: [String: UInt64] = [:]
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let now: @Sendable () -> UInt64

    public init(capacity: Int = 100_000, now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.capacity = capacity
        self.now = now
    }

    /// The `Cookie` header value for a request to `path`, or nil.
    public func cookieHeader(for key: Key, path: String) -> String? {
        let now = self.now()
        return state.withLock { state -> String? in
            guard var jar = state.jars[key] else { return nil }
            jar.cookies = jar.cookies.filter { $0.value.expiresAt.map { now < $0 } ?? true }
            jar.lastUsed = now
            state.jars[key] = jar
            let matching = jar.cookies.filter { Self.pathMatches(path, $0.value.path) }.sorted { $0.key < $1.key }
            return matching.isEmpty ? nil : matching.map { "\($0.key)=\($0.value.value)" }.joined(separator: "; ")
        }
    }

    /// Now, on the jar's clock: what `store(_:for:requestPath:startedAt:)` takes.
    public var clock: UInt64 { now() }

    /// Takes the `Set-Cookie` values of a back end's answer to a call that started at
    /// `startedAt` (`clock`); dropped when the registration's sessions ended since.
    public func store(_ setCookies: [String], for key: Key, requestPath: String, startedAt: UInt64) {
        guard !setCookies.isEmpty else { return }
        let now = self.now()
        state.withLock { state in
            if let ended = state.endedAt[key.registration], ended >= startedAt { return }
            var jar = state.jars[key] ?? Jar()
            for header in setCookies {
                guard let (name, cookie) = Self.parse(header, requestPath: requestPath, now: now) else { continue }
                if let expiry = cookie.expiresAt, expiry <= now {
                    jar.cookies[name] = nil
                } else if jar.cookies[name] != nil || jar.cookies.count < 50 {
                    jar.cookies[name] = cookie
                }
            }
            jar.lastUsed = now
            state.jars[key] = jar.cookies.isEmpty ? nil : jar
            if state.jars.count > capacity {
                let excess = state.jars.count - capacity + capacity / 10
                for (old, _) in state.jars.sorted(by: { $0.value.lastUsed < $1.value.lastUsed }).prefix(excess) { state.jars[old] = nil }
            }
        }
    }

    /// Ends every back-end session of a registration (it was wiped, locked or deleted): its
    /// jars go, and answers to calls already under way are not kept.
    public func remove(registration: String) {
        let now = self.now()
        state.withLock { state in
            for key in state.jars.keys where key.registration.utf8.elementsEqual(registration.utf8) { state.jars[key] = nil }
            state.endedAt[registration] = now
            if state.endedAt.count > capacity {
                let excess = state.endedAt.count - capacity + capacity / 10
                for (old, _) in state.endedAt.sorted(by: { $0.value < $1.value }).prefix(excess) { state.endedAt[old] = nil }
            }
        }
    }

    public var count: Int { state.withLock { $0.jars.count } }

    /// RFC 6265 §5.1.4 path-match.
    static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
        requestPath == cookiePath || (requestPath.hasPrefix(cookiePath) && (cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).first == "/"))
    }

    /// `name=value; Path=…; Max-Age=…; Expires=…` → (name, cookie); nil when unusable.
    static func parse(_ header: String, requestPath: String, now: UInt64) -> (String, Cookie)? {
        let parts = header.split(separator: ";", omittingEmptySubsequences: false)
        guard let first = parts.first, let equals = first.firstIndex(of: "=") else { return nil }
        let name = first[..<equals].trimmingCharacters(in: " \t")
        let value = first[first.index(after: equals)...].trimmingCharacters(in: " \t")
        guard !name.isEmpty, name.utf8.count + value.utf8.count <= 4096,
              !name.contains(where: { $0 == "=" || $0 == ";" || $0.isWhitespace }) else { return nil }
        // Default path: the request path up to its last slash (RFC 6265 §5.1.4).
        var path = String(requestPath.prefix { $0 != "?" })
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex { path = String(path[..<slash]) } else { path = "/" }
        var expiresAt: UInt64?
        for attribute in parts.dropFirst() {
            let pieces = attribute.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: " \t") }
            switch pieces.first?.lowercased() {
            case "path" where pieces.count == 2 && pieces[1].hasPrefix("/"):
                path = pieces[1]
            case "max-age" where pieces.count == 2:
                if let seconds = Int64(pieces[1]) {
                    expiresAt = seconds <= 0 ? 0 : now &+ UInt64(min(seconds, 10 * 365 * 86400)) * 1_000_000_000
                }
            case "expires" where pieces.count == 2 && expiresAt == nil:
                if let expiry = httpDate(pieces[1]) {
                    let remaining = expiry - Int64(time(nil))
                    expiresAt = remaining <= 0 ? 0 : now &+ UInt64(min(remaining, 10 * 365 * 86400)) * 1_000_000_000
                }
            default:
                break
            }
        }
        return (name, Cookie(value: value, path: path, expiresAt: expiresAt))
    }
}

/// Seconds since 1970 of an HTTP date as cookies write it (`Wed, 21 Oct 2015 07:28:00 GMT`,
/// `Wed, 21-Oct-2015 07:28:00 GMT`, `Wednesday, 21-Oct-15 07:28:00 GMT`); nil otherwise.
func httpDate(_ text: String) -> Int64? {
    let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    guard let comma = text.firstIndex(of: ",") else { return nil }
    let fields = text[text.index(after: comma)...].split(whereSeparator: { $0 == " " || $0 == "-" })
    guard fields.count == 5, fields[4].uppercased() == "GMT", let day = Int32(fields[0]),
          let month = months.firstIndex(of: fields[1].lowercased()), var year = Int32(fields[2]) else { return nil }
    if year < 100 { year += year < 70 ? 2000 : 1900 }
    let clock = fields[3].split(separator: ":").compactMap { Int32($0) }
    guard clock.count == 3, (1...31).contains(day), clock[0] < 24, clock[1] < 60, clock[2] < 61 else { return nil }
    var parts = tm()
    parts.tm_year = year - 1900
    parts.tm_mon = Int32(month)
    parts.tm_mday = day
    parts.tm_hour = clock[0]
    parts.tm_min = clock[1]
    parts.tm_sec = clock[2]
    return Int64(timegm(&parts))
}
