import AsyncHTTPClient
import MidtierCore
import Testing
import TokenExchange

/// What each `OAuth2*` grant sends, and where the client's credentials go (docs/forwarding.md,
/// as BTP's destination service does it).
@Suite struct OAuth2RequestTests {
    static func exchange(
        _ grant: OAuth2Grant, secret: String? = "s3cret", user: String? = nil, password: String? = nil,
        inBody: Bool = true, scope: String? = nil, body: [(String, String)] = []
    ) -> OAuth2Exchange {
        OAuth2Exchange(
            settings: OAuth2Settings(
                type: "OAuth2JWTBearer", grant: grant, tokenServiceURL: "https://idp.example/token",
                clientId: "mobile", clientSecret: secret, tokenServiceUser: user, tokenServicePassword: password,
                addClientCredentialsInBody: inBody, scope: scope, extraBody: body),
            httpClient: HTTPClient.shared, timeoutMilliseconds: 1000)
    }

    static func names(_ form: [(String, String)]) -> [String] { form.map(\.0) }
    static func value(_ form: [(String, String)], _ name: String) -> String? { form.first { $0.0 == name }?.1 }

    @Test func clientCredentialsInTheBodyByDefault() {
        let (form, basic) = Self.exchange(.clientCredentials, scope: "read write").request(userToken: nil)
        #expect(Self.names(form) == ["grant_type", "client_id", "client_secret", "scope"])
        #expect(Self.value(form, "grant_type") == "client_credentials")
        #expect(Self.value(form, "client_secret") == "s3cret")
        #expect(Self.value(form, "scope") == "read write")
        #expect(basic == nil)
    }

    @Test func clientCredentialsAsBasicWhenNotInTheBody() {
        let (form, basic) = Self.exchange(.clientCredentials, inBody: false).request(userToken: nil)
        #expect(Self.names(form) == ["grant_type"])
        #expect(basic?.user == "mobile" && basic?.password == "s3cret")
    }

    @Test func tokenServiceUserWinsAndTheClientIdStays() {
        let (form, basic) = Self.exchange(.jwtBearer, user: "oauth-user", password: "pw").request(userToken: "eyJ.user.token")
        #expect(Self.names(form) == ["grant_type", "assertion", "client_id"])
        #expect(Self.value(form, "grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        #expect(Self.value(form, "assertion") == "eyJ.user.token")
        #expect(basic?.user == "oauth-user" && basic?.password == "pw")
    }

    @Test func tokenExchangeNamesTheSubjectToken() {
        let (form, _) = Self.exchange(.tokenExchange).request(userToken: "eyJ.user.token")
        #expect(Self.value(form, "grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange")
        #expect(Self.value(form, "subject_token") == "eyJ.user.token")
        #expect(Self.value(form, "subject_token_type") == "urn:ietf:params:oauth:token-type:jwt")
        #expect(Self.value(form, "requested_token_type") == "urn:ietf:params:oauth:token-type:access_token")
    }

    @Test func bodyParametersReplaceTheirNamesakes() {
        let (form, _) = Self.exchange(
            .tokenExchange, body: [("resource", "https://api.example"), ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token")]
        )
        .request(userToken: "t")
        #expect(Self.value(form, "resource") == "https://api.example")
        #expect(form.filter { $0.0 == "subject_token_type" }.map(\.1) == ["urn:ietf:params:oauth:token-type:id_token"])
    }
}
