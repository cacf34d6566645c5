import Callers
import MidtierCore
package import MidtierHTTP

/// The function call in SAP's Discovery Service path (docs/device-api.md, "Discovery Service"):
/// `getApplicationConfiguration(AppConfigID='{appId}[:{version}]',EmailAddress='{email}')`,
/// parameters in OData v2 literal syntax (single quotes, `''` for a quote), in either order.
package struct DiscoveryServiceCall: Equatable {
    var appConfigID: String
    var emailAddress: String

    static let function = "getApplicationConfiguration"

    /// Reads the call from its path segment (already percent-decoded), or says what is wrong.
    package static func parse(_ segment: String) throws(Refusal) -> DiscoveryServiceCall {
        guard segment.hasPrefix(function + "("), segment.hasSuffix(")") else {
            throw .notFound("unknown function \(segment.prefix(80)); the Discovery Service answers \(function)(AppConfigID='…',EmailAddress='…')")
        }
        var rest = Substring(segment.dropFirst(function.count + 1).dropLast())
        var parameters: [String: String] = [:]
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "=") else { throw .badRequest("a parameter of \(function) has no value") }
            let name = String(rest[..<equals])
            rest = rest[rest.index(after: equals)...]
            guard rest.first == "'" else { throw .badRequest("\(name) must be a quoted string ('…')") }
            rest = rest.dropFirst()
            var value = ""
            var closed = false
            while let character = rest.first {
                rest = rest.dropFirst()
                if character == "'" {
                    if rest.first == "'" { value.append("'"); rest = rest.dropFirst(); continue }
                    closed = true
                    break
                }
                value.append(character)
            }
            guard closed else { throw .badRequest("\(name) has no closing quote") }
            guard parameters.updateValue(value, forKey: name) == nil else { throw .badRequest("\(name) is given twice") }
            if rest.first == "," {
                rest = rest.dropFirst(); guard !rest.isEmpty else { throw .badRequest("a parameter is missing after ','") }
            } else if !rest.isEmpty {
                throw .badRequest("parameters of \(function) are separated by ','")
            }
        }
        if let unknown = parameters.keys.first(where: { $0 != "AppConfigID" && $0 != "EmailAddress" }) {
            throw .badRequest("unknown parameter \(unknown.prefix(80)); \(function) takes AppConfigID and EmailAddress")
        }
        guard let appConfigID = parameters["AppConfigID"], !appConfigID.isEmpty else { throw .badRequest("AppConfigID is missing") }
        guard let email = parameters["EmailAddress"], !email.isEmpty else { throw .badRequest("EmailAddress is missing") }
        for (name, value) in [("AppConfigID", appConfigID), ("EmailAddress", email)] {
            guard value.utf8.count <= 256 else { throw .badRequest("\(name) is longer than 256 bytes") }
            guard !StoredText.hasControlCharacters(value) else { throw .badRequest("\(name) contains control characters") }
        }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { throw .badRequest("EmailAddress is not an email address") }
        return DiscoveryServiceCall(appConfigID: appConfigID, emailAddress: email)
    }

    /// The app `appConfigID` names: the app of that exact id, else the id before a last
    /// `:{version}` (SAP publishes configurations as `{appId}:1.0`).
    func app(in apps: [String: AppConfiguration]) -> AppConfiguration? {
        if let app = apps.first(where: { UserIdentity.sameBytes($0.key, appConfigID) })?.value { return app }
        guard let colon = appConfigID.lastIndex(of: ":") else { return nil }
        let id = String(appConfigID[..<colon])
        return apps.first(where: { UserIdentity.sameBytes($0.key, id) })?.value
    }
}
