package import MidtierHTTP
import Registrations

extension Admission {
    /// The device API's answer when a registration may not call: the same for the proxy and
    /// every device route that acts for a registration (docs/device-api.md, the refusals).
    package func refuseUnlessAdmitted() throws(Refusal) {
        switch self {
        case .admitted: return
        case .unknown: throw .forbidden("the registration id is not known")
        case .blocked(let kind): throw Refusal.userBlocked(kind)
        case .locked: throw .forbidden("the registration is locked", messageCode: "TRAFFIC_REG_LOCKED")
        case .wiped:
            throw .forbidden(
                "the registration is wiped; this device cannot onboard again until an admin deletes the wiped registration",
                messageCode: "TRAFFIC_REG_WIPED")
        }
    }
}
