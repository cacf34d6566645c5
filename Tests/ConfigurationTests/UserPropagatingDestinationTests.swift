import ConfigurationFiles
import Foundation
import MidtierCore
import Testing

/// The destination types that carry the user, and the technical ones beside Basic
/// (docs/forwarding.md): what each key becomes.
@Suite struct UserPropagatingDestinationTests {
    @Test func samlBearerForAnyTokenService() throws {
        let fixture = Fixture()
        let sf = "destinations/sf.json"
        fixture.remove(sf, "companyId")
        fixture.set(sf, "audience", #""https://my300117.s4hana.ondemand.com""#)
        fixture.set(sf, "tokenServiceUser", #""MOBILE_OAUTH""#)
        fixture.set(sf, "tokenServicePassword", #"{"env":"TEST_SF_KEY_PASSPHRASE"}"#)
        fixture.set(sf, "scope", #""ZAPI_0001 ZAPI_0002""#)
        fixture.set(sf, "nameQualifier", #""mobile.example.com""#)
        fixture.set(sf, "assertionAttributes", #"["mail", "department"]"#)
        let configuration = try fixture.load()
        guard case .samlBearer(let saml) = configuration.destinations["sf"]?.authentication else {
            Issue.record("sf should use OAuth2SAMLBearerAssertion")
            return
        }
        #expect(saml.companyId == nil)
        #expect(saml.audience == "https://my300117.s4hana.ondemand.com")
        #expect(saml.tokenServiceUser == "MOBILE_OAUTH")
        #expect(saml.tokenServicePassword == Values.keyPassphrase)
        #expect(saml.scope == "ZAPI_0001 ZAPI_0002")
        #expect(saml.nameQualifier == "mobile.example.com")
        #expect(saml.assertionAttributes == ["mail", "department"])
    }

    @Test func principalPropagationWithItsDefaults() throws {
        let fixture = Fixture()
        let sf = "destinations/sf.json"
        fixture.set(sf, "Authentication", #""PrincipalPropagation""#)
        fixture.set(sf, "ProxyType", #""OnPremise""#)
        fixture.set(sf, "principalPropagationMode", #""mutualTLS""#)
        fixture.set(sf, "caKey", "\"\(fixture.root)/certs/sf.key\"")
        fixture.set(sf, "caCertificate", "\"\(fixture.root)/certs/sf.crt\"")
        let configuration = try fixture.load()
        guard case .principalPropagation(let settings) = configuration.destinations["sf"]?.authentication else {
            Issue.record("sf should use PrincipalPropagation")
            return
        }
        #expect(settings.mode == .mutualTLS)
        #expect(settings.subjectPattern == .standard)
        #expect(settings.validityMinutes == 10)
        #expect(configuration.destinations["sf"]?.userIdSource == "sfUserId")
        #expect(configuration.destinations["sf"]?.clientIdentity == nil)
    }

    @Test func clientCertificateFromAPEMKeyStore() throws {
        let fixture = Fixture()
        let sf = "destinations/sf.json"
        fixture.writeText("certs/client.pem", Values.certificatePEM + Values.keyPEM)
        fixture.set(sf, "Authentication", #""ClientCertificateAuthentication""#)
        fixture.set(sf, "KeyStoreLocation", "\"\(fixture.root)/certs/client.pem\"")
        let configuration = try fixture.load()
        let destination = try #require(configuration.destinations["sf"])
        guard case .clientCertificate = destination.authentication, case .pem(let bytes, let passphrase)? = destination.clientIdentity else {
            Issue.record("sf should use ClientCertificateAuthentication with a PEM key store")
            return
        }
        #expect(bytes == Array((Values.certificatePEM + Values.keyPEM).utf8))
        #expect(passphrase == nil)
    }
}

/// The `OAuth2*` types, with BTP's property names.
@Suite struct OAuth2DestinationTests {
    @Test(arguments: [
        ("OAuth2ClientCredentials", OAuth2Grant.clientCredentials), ("OAuth2JWTBearer", .jwtBearer),
        ("OAuth2UserTokenExchange", .jwtBearer), ("OAuth2TokenExchange", .tokenExchange),
    ])
    func eachTypeReadsItsKeys(type: String, grant: OAuth2Grant) throws {
        let fixture = Fixture()
        let sf = "destinations/sf.json"
        fixture.set(sf, "Authentication", "\"\(type)\"")
        fixture.set(sf, "clientId", #""mobile-client""#)
        fixture.set(sf, "clientSecret", #"{"env":"TEST_SF_KEY_PASSPHRASE"}"#)
        fixture.set(sf, "scope", #""read""#)
        fixture.set(sf, "tokenService.addClientCredentialsInBody", #""false""#)
        fixture.set(sf, "tokenService.body.resource", #""https://api.example""#)
        fixture.set(sf, "tokenServiceURLType", #""Dedicated""#)
        let configuration = try fixture.load()
        guard case .oauth2(let settings) = configuration.destinations["sf"]?.authentication else {
            Issue.record("sf should be an OAuth2 destination")
            return
        }
        #expect(settings.type == type)
        #expect(settings.grant == grant)
        #expect(settings.tokenServiceURL == "https://api.sf.example/oauth/token?company_id=ACME")
        #expect(settings.clientId == "mobile-client")
        #expect(settings.clientSecret == Values.keyPassphrase)
        #expect(settings.scope == "read")
        #expect(settings.addClientCredentialsInBody == false)
        #expect(settings.extraBody.map(\.0) == ["resource"])
    }

    @Test func clientCredentialsNeedASecretAndNoFormKeyMidtierSets() throws {
        let fixture = Fixture()
        let sf = "destinations/sf.json"
        fixture.set(sf, "Authentication", #""OAuth2ClientCredentials""#)
        fixture.set(sf, "clientId", #""mobile-client""#)
        fixture.set(sf, "tokenService.body.grant_type", #""password""#)
        #expect {
            try fixture.load()
        } throws: { error in
            let problems = (error as? ConfigurationErrors)?.problems.map(\.description) ?? []
            return problems.count == 2 && problems.contains { $0.contains("sf.json: clientSecret: missing required key") }
                && problems.contains { $0.contains("tokenService.body.grant_type: grant_type is set by Midtier") }
        }
    }
}

/// What the outside review of these types found in the configuration (docs/reliability.md).
@Suite struct UserPropagatingConfigurationReviewTests {
    static let sf = "destinations/sf.json"

    static func problems(_ change: (Fixture) -> Void) -> [String] {
        let fixture = Fixture()
        change(fixture)
        do {
            _ = try fixture.load()
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    @Test func aBackendAppChecksPasswordsWithoutAClientCertificate() {
        let found = Self.problems { fixture in
            fixture.writeText("certs/client.pem", Values.certificatePEM + Values.keyPEM)
            fixture.set(Self.sf, "Authentication", #""ClientCertificateAuthentication""#)
            fixture.set(Self.sf, "KeyStoreLocation", "\"\(fixture.root)/certs/client.pem\"")
            fixture.files["apps/demo.json"] = [("authentication", #"{"type":"backend","destination":"sf"}"#), ("destinations", #"["sf"]"#)]
        }
        #expect(found.contains { $0.contains("apps/demo.json: authentication.destination") && $0.contains("client certificate") }, "\(found)")
    }

    @Test func aBackendAppsPathIsPlain() {
        let found = Self.problems { fixture in
            fixture.files["apps/demo.json"] = [("authentication", #"{"type":"backend","destination":"sf","path":"/a/%2e%2e/b"}"#)]
        }
        #expect(found.contains { $0.contains("apps/demo.json: authentication.path") }, "\(found)")
    }

    @Test func noIdentityProviderTakesARealmMidtierNames() {
        for issuer in ["backend:sf", "midtier:destination"] {
            let found = Self.problems { fixture in
                fixture.files["apps/corp.json"] = [("authentication", #"{"type":"jwt","issuer":"\#(issuer)","audience":"m","jwks":{"file":"/x"}}"#)]
            }
            #expect(
                found.contains { $0.contains("apps/corp.json: authentication.issuer") && $0.contains("a realm Midtier names itself") }, "\(found)")
        }
    }

    @Test func reservedTokenParametersInAnyCaseAndPlainHTTPTokenServices() {
        let found = Self.problems { fixture in
            fixture.set(Self.sf, "Authentication", #""OAuth2ClientCredentials""#)
            fixture.set(Self.sf, "clientId", #""c""#)
            fixture.set(Self.sf, "clientSecret", #""s-123456""#)
            fixture.set(Self.sf, "tokenService.body.GRANT_TYPE", #""password""#)
            fixture.set(Self.sf, "tokenServiceURL", #""http://idp.example.com/token""#)
        }
        #expect(found.contains { $0.contains("tokenService.body.GRANT_TYPE") }, "\(found)")
        #expect(found.contains { $0.contains("sf.json: tokenServiceURL") && $0.contains("must be https") }, "\(found)")
    }

    @Test func noFixedCertificateHeader() {
        for name in ["SSL_CLIENT_CERT", "ssl-client-cert", "Client-Cert"] {
            let found = Self.problems { fixture in fixture.set(Self.sf, "URL.headers.\(name)", #""MIIB""#) }
            #expect(found.contains { $0.contains("URL.headers.\(name)") }, "\(found)")
        }
    }
}
