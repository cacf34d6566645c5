import Foundation
import ConfigurationFiles
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
    @Test(arguments: [("OAuth2ClientCredentials", OAuth2Grant.clientCredentials), ("OAuth2JWTBearer", .jwtBearer),
                      ("OAuth2UserTokenExchange", .jwtBearer), ("OAuth2TokenExchange", .tokenExchange)])
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
