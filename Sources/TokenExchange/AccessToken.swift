/// A back-end access token as the token service issued it. Never logged: `description` hides it.
package struct AccessToken: Sendable, Equatable, CustomStringConvertible {
    /// The token itself: goes into `Authorization: Bearer` and nowhere else.
    package let value: String
    /// `token_type`, normally `Bearer`.
    package let type: String
    /// `expires_in` as the service gave it, in seconds.
    package let lifetimeSeconds: Int

    package init(value: String, type: String = "Bearer", lifetimeSeconds: Int) {
        self.value = value
        self.type = type
        self.lifetimeSeconds = lifetimeSeconds
    }

    package var description: String { "AccessToken(type: \(type), lifetime: \(lifetimeSeconds)s, value: <redacted>)" }
}

/// Why an exchange failed. Messages are safe to show to a device and to log: they never carry
/// the assertion, the token, or anything the back end echoed that looks like one.
package enum TokenExchangeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The token service answered and refused (4xx/5xx), with its reason.
    case refused(status: Int, reason: String)
    /// The token service answered something that is not a usable token response.
    case invalidResponse(String)
    /// The token service could not be reached.
    case unreachable(String)
    /// The token service did not answer in time.
    case timedOut
    /// Midtier could not build or sign the assertion (a configuration problem).
    case assertionFailed(String)

    package var description: String {
        switch self {
        case .refused(let status, let reason): "the token service refused the exchange (HTTP \(status)): \(reason)"
        case .invalidResponse(let reason): "the token service answered with an unusable response: \(reason)"
        case .unreachable(let reason): "the token service is unreachable: \(reason)"
        case .timedOut: "the token service did not answer in time"
        case .assertionFailed(let reason): "the SAML assertion could not be made: \(reason)"
        }
    }

    /// What the device is told: what failed, in plain words — the back end's own reason for a
    /// refusal, but nothing about Midtier's internals (the HTTP client's errors, OpenSSL's),
    /// which go to the log with `description`.
    package var deviceMessage: String {
        switch self {
        case .refused: description
        case .invalidResponse: "the token service answered with an unusable response"
        case .unreachable: "the token service could not be reached"
        case .timedOut: description
        case .assertionFailed: "Midtier could not make the SAML assertion for this user"
        }
    }
}
