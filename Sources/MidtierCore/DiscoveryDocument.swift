import Foundation
package import MidtierJSON

extension AppConfiguration {
    /// What an SAP SDK app reads to onboard (docs/device-api.md, "Onboarding a SAP SDK app"):
    /// `{"auth":[{"type":"basic","config":{},"requireOtp":false}],"host":..,"port":..,"protocol":..,"appID":..}`
    /// for a basic app; for a JWT app `"type":"oauth2"` with the IdP's endpoints in both the flat
    /// keys older SDK clients read and the `oauth2.clients` list newer ones read; plus the app's
    /// `discovery` members. Served at `/config/v1/{appId}` and offered by the console as
    /// `ConfigurationProvider.plist` (docs/console.md). No secrets: app developers get it.
    /// Members are sorted by key, so the same configuration always gives the same text.
    package func discoveryDocument(publicURL: String) -> JSON {
        let url = URL(string: publicURL)
        let scheme = url?.scheme ?? "http"
        let auth: JSON
        switch authentication {
        case .basic, .backend:
            auth = ["config": [:], "requireOtp": false, "type": "basic"]
        case .jwt(let jwt):
            var config: [String: JSON] = ["oauth2.grantType": "authorization_code"]
            if let oauth2 = jwt.oauth2 {
                config["oauth2.authorizationEndpoint"] = .string(oauth2.authorizationEndpoint)
                config["oauth2.tokenEndpoint"] = .string(oauth2.tokenEndpoint)
                config["oauth2.endUserUI"] = .string(oauth2.endUserUI)
                if let first = oauth2.clients.first { config["oauth2.clientID"] = .string(first.clientID) }
                config["oauth2.clients"] = .array(
                    oauth2.clients.map {
                        ["clientID": .string($0.clientID), "grantType": "authorization_code", "redirectURL": .string($0.redirectURL)]
                    })
            }
            auth = ["config": .sortedObject(config), "requireOtp": false, "type": "oauth2"]
        }
        var document: [String: JSON] = [
            "auth": [auth],
            "host": .string(url?.host ?? "localhost"),
            "port": .number(url?.port ?? (scheme == "https" ? 443 : 80)),
            "protocol": .string(scheme),
            "appID": .string(id),
        ]
        for (key, value) in discovery { document[key] = value }
        return .sortedObject(document)
    }
}
