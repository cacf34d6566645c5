import Foundation

/// What one push service said to one attempt (docs/push.md, "Delivery"). Reasons are the
/// service's status and reason code only: never a token, a key or the payload.
package enum PushAttemptResult: Sendable, Equatable {
    /// The service took the notification.
    case delivered
    /// Try again: after `after` seconds when the service said (`Retry-After`), by backoff
    /// otherwise.
    case retry(after: Int?, reason: String)
    /// The device token is gone for good (APNs `Unregistered`, `BadDeviceToken`; FCM
    /// `UNREGISTERED`): the registration's token is cleared.
    case tokenGone(reason: String)
    /// Refused for good: the notification or the app's push configuration is wrong.
    case refused(reason: String)
    /// Not sent: when its body was to go, the delivery was no longer wanted (its registration
    /// changed while the request waited; `PushRequestBody`).
    case withdrawn
}

/// A reason code from a push service as safe log and status text: letters, digits, `_` and
/// `-` only, at most 60 characters.
func reasonCode(_ text: String?) -> String {
    guard let text else { return "" }
    let kept = text.unicodeScalars.filter { $0.properties.isAlphabetic && $0.isASCII || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" }
    return String(String.UnicodeScalarView(kept.prefix(60)))
}

/// `Retry-After` as whole seconds (RFC 9110 also allows a date; that is taken as "soon").
func retryAfterSeconds(_ value: String?) -> Int? {
    guard let value else { return nil }
    if let seconds = Int(value.trimmingCharacters(in: .whitespaces)), seconds >= 0 { return min(seconds, 3600) }
    return 1
}
