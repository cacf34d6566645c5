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
