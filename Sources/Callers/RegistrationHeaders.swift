package import HTTPTypes
package import Hummingbird

/// The headers by which SAP's SDKs name the registration, app and device on a call
/// (docs/device-api.md): `X-SMP-APPCID` (or the cookie of that name Midtier sets at
/// onboarding), `X-SMP-APPID`, `X-SMP-DEVICEID`.
package enum RegistrationHeaders {
    package static let registration = HTTPField.Name("X-SMP-APPCID")!
    package static let app = HTTPField.Name("X-SMP-APPID")!
    package static let device = HTTPField.Name("X-SMP-DEVICEID")!

    /// `X-SMP-APPCID` from the header, else from the cookie of that name Midtier set at
    /// onboarding.
    package static func registrationID(of request: Request) -> String? {
        // Repeated, the header must say the same bytes each time.
        var first: String?
        for field in request.headers where field.name == registration {
            guard let seen = first else {
                first = field.value
                continue
            }
            guard seen.utf8.elementsEqual(field.value.utf8) else { return nil }
        }
        if let header = first, !header.isEmpty { return header }
        return request.cookies["X-SMP-APPCID"].flatMap { $0.value.isEmpty ? nil : $0.value }
    }
}
