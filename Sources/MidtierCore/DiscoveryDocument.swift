import Foundation

extension AppConfiguration {
    /// What an SAP SDK app reads to onboard (docs/device-api.md, "Onboarding a SAP SDK app"):
    /// `{"auth":[{"type":"basic","config":{},"requireOtp":false}],"host":..,"port":..,"protocol":..,"appID":..}`
    /// for a basic app; for a JWT app `"type":"oauth2"` with the IdP's endpoints in both the flat
    /// keys older SDK clients read and the `oauth2.clients` list newer ones read; plus the app's
    /// `discovery` members. Served at `/config/v1/{appId}` and offered by the console as
    /// `ConfigurationProvider.plist` (docs/console.md). No secrets: app developers get it.
    package func discoveryDocument(publicURL: String) -> [String: Any] {
        let url = URL(string: publicURL)
        let scheme = url?.scheme ?? "http"
        let auth: [String: Any]
        switch authentication {
        case .basic:
            auth = ["type": "basic", "config": [String: Any](), "requireOtp": false]
        case .jwt(let jwt):
            var config: [String: Any] = ["oauth2.grantType": "authorization_code"]
            if let oauth2 = jwt.oauth2 {
                config["oauth2.authorizationEndpoint"] = oauth2.authorizationEndpoint
                config["oauth2.tokenEndpoint"] = oauth2.tokenEndpoint
                config["oauth2.endUserUI"] = oauth2.endUserUI
                config["oauth2.clientID"] = oauth2.clients.first?.clientID
                config["oauth2.clients"] = oauth2.clients.map {
                    ["clientID": $0.clientID, "redirectURL": $0.redirectURL, "grantType": "authorization_code"]
                }
            }
            auth = ["type": "oauth2", "config": config, "requireOtp": false]
        }
        var document: [String: Any] = [
            "auth": [auth],
            "host": url?.host ?? "localhost",
            "port": url?.port ?? (scheme == "https" ? 443 : 80),
            "protocol": scheme,
            "appID": id,
        ]
        for (key, value) in discovery { document[key] = value.foundationValue }
        return document
    }
}

extension JSONValue {
    /// The value as `JSONSerialization` takes it.
    package var foundationValue: Any {
        switch self {
        case .null: NSNull()
        case .bool(let value): value
        case .number(let value): value.rounded() == value && abs(value) < 1e15 ? Int(value) as Any : value
        case .string(let value): value
        case .array(let values): values.map(\.foundationValue)
        case .object(let values): values.mapValues(\.foundationValue)
        }
    }
}
