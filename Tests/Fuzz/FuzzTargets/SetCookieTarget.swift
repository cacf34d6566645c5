import BackendSessions
import MidtierCore

/// `set-cookie`: a back end's `Set-Cookie` values, one a line, stored in the cookie jar as a
/// proxied answer's are (BackendCookieJar.store), then the `Cookie` header the next call would
/// send. A first line starting with `/` is the request path.
enum SetCookieTarget {
    static func run(_ bytes: [UInt8]) {
        var lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var requestPath = "/sap/opu/odata/sap/ZFUZZ/Items"
        if let first = lines.first, first.hasPrefix("/") {
            requestPath = first
            lines.removeFirst()
        }
        let jar = BackendCookieJar(capacity: 4, wallClock: WallClock { 1_800_000_000_000 })
        let key = BackendCookieJar.Key(registration: "fuzz", destination: "backend")
        jar.store(lines, for: key, requestPath: requestPath, startedAt: jar.clock)
        _ = jar.cookieHeader(for: key, path: requestPath)
        _ = jar.cookieHeader(for: key, path: "/")
    }
}
