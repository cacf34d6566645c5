package import AsyncHTTPClient
package import MidtierCore
import NIOCore

/// The OAuth 2.0 grants of `OAuth2ClientCredentials`, `OAuth2JWTBearer` (RFC 7523),
/// `OAuth2UserTokenExchange` and `OAuth2TokenExchange` (RFC 8693) (docs/forwarding.md): the
/// form each sends, with the client's credentials where BTP puts them.
package struct OAuth2Exchange: Sendable {
    package let settings: OAuth2Settings
    let httpClient: HTTPClient
    let timeout: TimeAmount

    package init(settings: OAuth2Settings, httpClient: HTTPClient, timeoutMilliseconds: Int) {
        self.settings = settings
        self.httpClient = httpClient
        self.timeout = .milliseconds(Int64(timeoutMilliseconds))
    }

    /// The token request's form for `userToken` (the user's identity-provider JWT; nil for
    /// client credentials), without the client's credentials.
    package func grant(userToken: String?) -> [(String, String)] {
        switch settings.grant {
        case .clientCredentials:
            return [("grant_type", "client_credentials")]
        case .jwtBearer:
            return [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", userToken ?? "")]
        case .tokenExchange:
            return [
                ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("subject_token", userToken ?? ""),
                ("subject_token_type", "urn:ietf:params:oauth:token-type:jwt"),
                ("requested_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ]
        }
    }

    /// The whole form and the Basic credentials, as BTP sends them: `client_id` and
    /// `client_secret` in the body (`tokenService.addClientCredentialsInBody`, default true),
    /// else as Basic; `tokenServiceUser`/`tokenServicePassword`, when given, as Basic in any
    /// case (and the client id alone stays in the body). Then `scope`, then `tokenService.body.*`,
    /// which replace a parameter of the same name.
    package func request(userToken: String?) -> (form: [(String, String)], basic: (user: String, password: String)?) {
        var form = grant(userToken: userToken)
        var basic: (user: String, password: String)?
        if let user = settings.tokenServiceUser, let password = settings.tokenServicePassword {
            basic = (user, password)
            form.append(("client_id", settings.clientId))
        } else if settings.addClientCredentialsInBody {
            form.append(("client_id", settings.clientId))
            if let secret = settings.clientSecret { form.append(("client_secret", secret)) }
        } else {
            basic = (settings.clientId, settings.clientSecret ?? "")
        }
        if let scope = settings.scope { form.append(("scope", scope)) }
        for (name, value) in settings.extraBody {
            form.removeAll { $0.0 == name }
            form.append((name, value))
        }
        return (form, basic)
    }

    /// A token for `userToken` (nil for client credentials).
    package func exchange(userToken: String?) async throws(TokenExchangeError) -> AccessToken {
        let (form, basic) = request(userToken: userToken)
        return try await TokenServiceRequest.post(
            form, to: settings.tokenServiceURL, basic: basic, httpClient: httpClient, timeout: timeout,
            secrets: [userToken ?? "", settings.clientSecret ?? "", settings.tokenServicePassword ?? ""]
                .filter { !$0.isEmpty })
    }
}
