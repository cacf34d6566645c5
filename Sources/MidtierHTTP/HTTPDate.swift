import Foundation
import MidtierCore
import Synchronization

/// The `Date` header's value (RFC 9110 §5.6.7, IMF-fixdate: ``HTTPTime``), formatted once a second.
package enum HTTPDate {
    private static let cache = Mutex<(second: Int, text: String)>((-1, ""))

    /// Now, as `Sun, 06 Nov 1994 08:49:37 GMT`.
    package static var now: String {
        let second = time(nil)
        return cache.withLock { cached in
            if cached.second == second { return cached.text }
            let text = HTTPTime.format(seconds: second)
            cached = (second, text)
            return text
        }
    }
}
