import ConfigurationFiles
import Foundation
import MidtierCore
import MidtierJSON
import Testing

@Suite struct ValidConfigurationTests {
    /// An admin token hash may come from a file, as a Kubernetes Secret or a systemd credential
    /// gives it (docs/configuration.md), beside inline ones.
    @Test func adminTokenHashesComeFromFilesToo() throws {
        let fixture = Fixture()
        fixture.writeText("admin-hash", Values.bobHash + "\n")
        fixture.set("midtier.json", "adminTokenHashes", "[\"\(Values.adminHash)\", {\"file\": \"\(fixture.root)/admin-hash\"}]")
        #expect(try fixture.load().server.adminTokenHashes == [Values.adminHash, Values.bobHash])
        fixture.writeText("admin-hash", "not a hash\n")
        #expect(fixture.problems().map(\.key) == ["adminTokenHashes[1]"])
    }

    @Test func completeSetLoadsIntoExpectedValues() throws {
        let fixture = Fixture()
        let configuration = try fixture.load()

        // midtier.json: given values, strings for numbers, defaults for the rest.
        let server = configuration.server
        #expect(server.listen == ListenAddress(host: "0.0.0.0", port: 8081))
        #expect(server.adminListen == ListenAddress(host: "::1", port: 9091))
        #expect(server.adminListen.description == "[::1]:9091")
        #expect(server.publicURL == "http://localhost:8081")
        #expect(server.store == .sqlite(path: "data/midtier.sqlite"))
        #expect(server.adminTokenHashes == [Values.adminHash])
        #expect(server.logLevel == "debug")
        #expect(server.maxRequestBodyBytes == 1_048_576)
        #expect(server.credentialCacheSeconds == 600)

        // The SAML destination, pasted BTP style.
        #expect(configuration.destinations.keys.sorted() == ["legacy", "public", "sf"])
        let sf = try #require(configuration.destinations["sf"])
        #expect(sf.name == "sf")
        #expect(sf.url == "https://api.sf.example/odata/v2")
        #expect(sf.userIdSource == "sfUserId")
        #expect(sf.timeoutMilliseconds == 45000)
        #expect(sf.extraHeaders.map(\.name) == ["X-Trace"])
        #expect(sf.extraHeaders.map(\.value) == ["on"])
        #expect(sf.extraQueries.map(\.name) == ["customPageSize"])
        #expect(sf.extraQueries.map(\.value) == ["100"])
        #expect(
            sf.metadataPatches == [
                MetadataPatch(entityType: "EmployeePayrollRunResultsItems", property: "amount", set: ["Precision": "15", "Scale": "2"])
            ])
        guard case .samlBearer(let saml) = sf.authentication else {
            Issue.record("sf should use OAuth2SAMLBearerAssertion")
            return
        }
        #expect(saml.tokenServiceURL == "https://api.sf.example/oauth/token?company_id=ACME")
        #expect(saml.clientKey == "API-KEY-123")
        #expect(saml.companyId == "ACME")
        #expect(saml.audience == "www.successfactors.com")
        #expect(saml.assertionIssuer == "API-KEY-123")
        #expect(saml.assertionRecipient == "https://api.sf.example/oauth/token")
        #expect(saml.nameIdFormat == "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress")
        #expect(saml.authnContextClassRef == "urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession")
        #expect(saml.assertionEncoding == .base64url)
        #expect(saml.signingKeyPEM == Array(Values.keyPEM.utf8))
        #expect(saml.signingCertificatePEM == Array(Values.certificatePEM.utf8))
        #expect(saml.signingKeyPassphrase == Values.keyPassphrase)

        // Basic, with the password from a file (trailing newline trimmed).
        let legacy = try #require(configuration.destinations["legacy"])
        #expect(legacy.url == "http://legacy.example:8000")
        #expect(legacy.timeoutMilliseconds == 30000)
        #expect(legacy.userIdSource == nil)
        guard case .basic(let user, let password) = legacy.authentication else {
            Issue.record("legacy should use BasicAuthentication")
            return
        }
        #expect(user == "techuser")
        #expect(password == Values.legacyPassword)

        // NoAuthentication; keys of other types are accepted and ignored.
        let open = try #require(configuration.destinations["public"])
        #expect(open.url == "http://localhost:8099")
        guard case .noAuthentication = open.authentication else {
            Issue.record("public should use NoAuthentication")
            return
        }

        // Apps.
        #expect(configuration.apps.keys.sorted() == ["com.example.jwt", "com.example.payroll"])
        let payroll = try #require(configuration.apps["com.example.payroll"])
        #expect(payroll.id == "com.example.payroll")
        #expect(payroll.authentication == .basic)
        #expect(payroll.destinations == ["sf", "legacy"])
        #expect(payroll.blockWipingPolicy == BlockWipingPolicy(blockWipeEnabled: true, blockDisconnectedPeriod: 30, wipeDisconnectedPeriod: 90))
        #expect(payroll.passwordPolicy == ["passwordPolicyEnabled": .bool(true), "passwordPolicyMinLength": .number(8)])
        #expect(payroll.logSettings == ["logLevel": .string("WARN")])
        #expect(payroll.discovery == ["note": .string("hello")])

        let jwtApp = try #require(configuration.apps["com.example.jwt"])
        #expect(
            jwtApp.authentication
                == .jwt(
                    JWTAuthentication(
                        issuer: "https://idp.example", audience: "midtier", jwks: .file(path: fixture.root + "/jwks.json"), userClaim: "sub"
                    )))
        #expect(jwtApp.destinations == ["public"])
        #expect(jwtApp.blockWipingPolicy == BlockWipingPolicy())
        #expect(jwtApp.passwordPolicy.isEmpty)

        // Users; a number attribute is kept as written.
        #expect(configuration.users.keys.sorted() == ["alice", "bob"])
        let alice = try #require(configuration.users["alice"])
        #expect(alice.passwordHash == Values.aliceHash)
        #expect(alice.attributes == ["sfUserId": "alice1", "employeeNumber": "1001"])
        #expect(configuration.users["bob"]?.attributes == [:])
    }

    @Test func minimalSetUsesDefaults() throws {
        let fixture = Fixture()
        fixture.files = ["midtier.json": []]
        let configuration = try fixture.load()
        let server = configuration.server
        #expect(server.listen == ListenAddress(host: "0.0.0.0", port: 8080))
        #expect(server.adminListen == ListenAddress(host: "127.0.0.1", port: 9090))
        #expect(server.publicURL == "http://localhost:8080")
        #expect(server.store == .sqlite(path: "data/midtier.sqlite"))
        #expect(server.adminTokenHashes == [])
        #expect(server.logLevel == "info")
        #expect(server.maxRequestBodyBytes == 10 * 1024 * 1024)
        #expect(server.credentialCacheSeconds == 300)
        #expect(configuration.apps.isEmpty)
        #expect(configuration.destinations.isEmpty)
        #expect(configuration.users.isEmpty)
    }

    @Test func publicURLDefaultFollowsListenPortAndGivenURLLosesTrailingSlash() throws {
        let fixture = Fixture()
        fixture.files = ["midtier.json": [("listen", #""127.0.0.1:8443""#)]]
        #expect(try fixture.load().server.publicURL == "http://localhost:8443")

        fixture.set("midtier.json", "publicURL", #""https://mobile.example.com/midtier/""#)
        fixture.set("midtier.json", "store", #""postgresql://midtier@db.example:5432/midtier""#)
        let server = try fixture.load().server
        #expect(server.publicURL == "https://mobile.example.com/midtier")
        #expect(server.store == .postgres(PostgresLocation(host: "db.example", user: "midtier", database: "midtier")))
    }

    /// The object form of a PostgreSQL store takes the password as a secret; the description
    /// that logs and errors show never carries it.
    @Test func postgresStorePasswordFromTheEnvironment() throws {
        let fixture = Fixture()
        fixture.environment["MIDTIER_DB_PASSWORD"] = "s3cret"
        fixture.set(
            "midtier.json", "store", #"{"url": "postgres://midtier@db.example/midtier?sslmode=require", "password": {"env": "MIDTIER_DB_PASSWORD"}}"#)
        let store = try fixture.load().server.store
        #expect(store == .postgres(PostgresLocation(host: "db.example", user: "midtier", password: "s3cret", database: "midtier", tls: .require)))
        guard case .postgres(let location) = store else { return }
        #expect(location.description == "postgres://midtier@db.example:5432/midtier?sslmode=require")

        fixture.set("midtier.json", "store", #"{"url": "postgres://midtier:inline@db.example/midtier", "password": {"env": "MIDTIER_DB_PASSWORD"}}"#)
        #expect(fixture.problems().map(\.key) == ["store.password"])
        fixture.set("midtier.json", "store", #"{"url": "postgres://midtier@db.example/midtier", "password": {"env": "MIDTIER_NOT_SET"}}"#)
        #expect(fixture.problems().map(\.key) == ["store.password"])
        fixture.set("midtier.json", "store", #"{"url": "sqlite:x"}"#)
        #expect(fixture.problems().map(\.key) == ["store.url"])
        fixture.set("midtier.json", "store", #"{"password": "x"}"#)
        #expect(fixture.problems().map(\.key) == ["store.url"])
    }

    /// Back-end session keys come inline, from the environment or from a file (a trailing
    /// newline dropped), in order; none of them shows in a description.
    @Test func backendSessionKeysLoadFromEverySecretSource() throws {
        let fixture = Fixture()
        #expect(try fixture.load().server.backendSessionKeys == [], "none by default: sessions stay in memory")
        fixture.environment["MIDTIER_SESSION_KEY"] = Data(repeating: 2, count: 32).base64EncodedString()
        fixture.writeText("secrets/session.key", Data(repeating: 3, count: 32).base64EncodedString() + "\n")
        fixture.set(
            "midtier.json", "backendSessionKeys",
            """
            ["\(Data(repeating: 1, count: 32).base64EncodedString())", {"env": "MIDTIER_SESSION_KEY"}, {"file": "\(fixture.root)/secrets/session.key"}]
            """)
        let keys = try fixture.load().server.backendSessionKeys
        #expect(keys.map(\.bytes) == [1, 2, 3].map { Array(repeating: UInt8($0), count: 32) })
        #expect(keys.allSatisfy { !"\($0)".contains("AQEB") && "\($0)".contains("not shown") })
    }

    /// The client policy groups in the SAP SDK's spelling; booleans and numbers as pasted
    /// settings carry them (strings) come out as JSON booleans and numbers.
    @Test func clientPolicyGroupsAreCheckedAndNormalized() throws {
        let fixture = Fixture()
        fixture.set(
            "apps/com.example.payroll.json", "passwordPolicy",
            #"{"passwordPolicyEnabled":"true","passwordPolicyMinLength":"10","passwordPolicyRetryLimit":5}"#)
        fixture.set(
            "apps/com.example.payroll.json", "usagePolicy",
            #"{"dataCollectionEnabled":false,"uploadDataAfterDays":"7","crashLogUploadEnabled":"FALSE"}"#)
        fixture.set(
            "apps/com.example.payroll.json", "featureVectorPolicies",
            #"{"featureVectorPolicyAllEnabled":false,"allowedPolicies":["camera"],"restrictedPolicies":[]}"#)
        let app = try #require(try fixture.load().apps["com.example.payroll"])
        #expect(
            app.passwordPolicy == [
                "passwordPolicyEnabled": .bool(true), "passwordPolicyMinLength": .number(10), "passwordPolicyRetryLimit": .number(5),
            ])
        #expect(app.usagePolicy == ["dataCollectionEnabled": .bool(false), "uploadDataAfterDays": .number(7), "crashLogUploadEnabled": .bool(false)])
        #expect(
            app.featureVectorPolicies == [
                "featureVectorPolicyAllEnabled": .bool(false), "allowedPolicies": .array([.string("camera")]),
                "restrictedPolicies": .array([]),
            ])
    }

    @Test func jwtAppAnnouncesItsOAuth2Clients() throws {
        let fixture = Fixture()
        fixture.set(
            "apps/com.example.jwt.json", "authentication",
            #"""
            {"type":"jwt","issuer":"https://idp.example","audience":"midtier","jwks":{"url":"https://idp.example/jwks"},
             "oauth2":{"authorizationEndpoint":"https://idp.example/auth","tokenEndpoint":"https://idp.example/token",
                       "clients":[{"clientID":"payroll-ios","redirectURL":"com.example.payroll:/oauth2redirect"},
                                  {"clientID":"payroll-android","redirectURL":"https://m.example/cb"}]}}
            """#)
        guard case .jwt(let jwt)? = try fixture.load().apps["com.example.jwt"]?.authentication else {
            Issue.record("not a jwt app")
            return
        }
        #expect(
            jwt.oauth2
                == OAuth2Discovery(
                    authorizationEndpoint: "https://idp.example/auth", tokenEndpoint: "https://idp.example/token",
                    clients: [
                        .init(clientID: "payroll-ios", redirectURL: "com.example.payroll:/oauth2redirect"),
                        .init(clientID: "payroll-android", redirectURL: "https://m.example/cb"),
                    ]))
        #expect(jwt.oauth2?.endUserUI == "https://idp.example/auth", "the sign-in page defaults to the authorization endpoint")
    }

    /// The endpoints may come from the issuer's OpenID Connect discovery document, saved to a file.
    @Test func oauth2EndpointsFromASavedDiscoveryDocument() throws {
        let fixture = Fixture()
        fixture.writeText(
            "openid-configuration.json",
            #"""
            {"issuer":"https://idp.example","authorization_endpoint":"https://idp.example/protocol/openid-connect/auth",
             "token_endpoint":"https://idp.example/protocol/openid-connect/token","jwks_uri":"https://idp.example/certs"}
            """#)
        fixture.set(
            "apps/com.example.jwt.json", "authentication",
            """
            {"type":"jwt","issuer":"https://idp.example","audience":"midtier","jwks":{"url":"https://idp.example/certs"},
             "oauth2":{"openidConfiguration":"\(fixture.root)/openid-configuration.json","clients":[{"clientID":"app","redirectURL":"com.example.app:/cb"}]}}
            """)
        guard case .jwt(let jwt)? = try fixture.load().apps["com.example.jwt"]?.authentication else {
            Issue.record("not a jwt app")
            return
        }
        #expect(jwt.oauth2?.authorizationEndpoint == "https://idp.example/protocol/openid-connect/auth")
        #expect(jwt.oauth2?.tokenEndpoint == "https://idp.example/protocol/openid-connect/token")
    }

    @Test func anHTTPSDestinationMayTrustItsOwnCertificates() throws {
        let fixture = Fixture()
        fixture.set("destinations/sf.json", "trustedCertificates", "\"\(fixture.root)/certs/sf.crt\"")
        let pem = try #require(try fixture.load().destinations["sf"]?.trustedCertificatesPEM)
        #expect(String(decoding: pem, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----"))
    }

    @Test func jwtAppWithURLAndUserClaimNeedsNoUsersFile() throws {
        let fixture = Fixture()
        fixture.files["apps/com.example.payroll.json"] = nil
        fixture.files["users.json"] = nil
        fixture.set(
            "apps/com.example.jwt.json", "authentication",
            #"{"type":"jwt","issuer":"https://idp.example","audience":"midtier","jwks":{"url":"https://idp.example/jwks"},"userClaim":"email"}"#)
        let configuration = try fixture.load()
        #expect(
            configuration.apps["com.example.jwt"]?.authentication
                == .jwt(
                    JWTAuthentication(
                        issuer: "https://idp.example", audience: "midtier", jwks: .url("https://idp.example/jwks"), userClaim: "email"
                    )))
        #expect(configuration.users.isEmpty)
    }

    /// Apps of one issuer that name users by the same claim (`sub` by default or written out)
    /// share a realm; another issuer may use another claim.
    @Test func jwtAppsOfOneIssuerWithTheSameUserClaimLoad() throws {
        let fixture = Fixture()
        fixture.files["apps/com.example.jwt2.json"] = [
            (
                "authentication",
                #"{"type":"jwt","issuer":"https://idp.example","audience":"other","userClaim":"sub","jwks":{"url":"https://idp.example/jwks"}}"#
            )
        ]
        fixture.files["apps/com.example.jwt3.json"] = [
            (
                "authentication",
                #"{"type":"jwt","issuer":"https://idp.example/other","audience":"midtier","userClaim":"email","jwks":{"url":"https://idp.example/jwks"}}"#
            )
        ]
        let configuration = try fixture.load()
        #expect(configuration.apps.count == 4)
    }

    /// A Scale alone may fit the Precision the back end's document carries: whether it does is
    /// judged on the patched document (`check-config --metadata`), not at load.
    @Test func metadataPatchSettingScaleAloneLoads() throws {
        let fixture = Fixture()
        fixture.set(
            "destinations/sf.json", "metadataPatches",
            #"[{"entityType":"EmployeePayrollRunResultsItems","property":"amount","set":{"Scale":"2"}}]"#)
        let configuration = try fixture.load()
        #expect(
            configuration.destinations["sf"]?.metadataPatches == [
                MetadataPatch(entityType: "EmployeePayrollRunResultsItems", property: "amount", set: ["Scale": "2"])
            ])
    }

    @Test func hiddenAndNonJSONFilesAreIgnored() throws {
        let fixture = Fixture()
        fixture.rawFiles["apps/.com.example.payroll.json.swp"] = "garbage"
        fixture.rawFiles["apps/README.md"] = "# apps"
        fixture.rawFiles["destinations/.hidden.json"] = "{ not json"
        fixture.rawFiles["destinations/sf.json.bak"] = "{ not json"
        let configuration = try fixture.load()
        #expect(configuration.apps.count == 2)
        #expect(configuration.destinations.count == 3)
    }

    @Test func inlineSecretsBOMAndBTPBooleansAreAccepted() throws {
        let fixture = Fixture()
        fixture.set("destinations/legacy.json", "Password", #""inline-password""#)
        fixture.set("apps/com.example.payroll.json", "blockWipingPolicy", #"{"blockWipeEnabled":"FALSE"}"#)
        fixture.write()
        // A byte order mark, as some editors write, is not an error.
        let path = fixture.path("midtier.json")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try Data([0xEF, 0xBB, 0xBF] + Array(text.utf8)).write(to: URL(fileURLWithPath: path))
        let configuration = try ConfigurationLoader(directory: fixture.config, environment: fixture.environment).load()
        guard case .basic(_, let password)? = configuration.destinations["legacy"]?.authentication else {
            Issue.record("legacy should use BasicAuthentication")
            return
        }
        #expect(password == "inline-password")
        #expect(configuration.apps["com.example.payroll"]?.blockWipingPolicy.blockWipeEnabled == false)
    }

    @Test func trailingSlashOnDirectoryIsNotDoubledInProblemPaths() {
        let fixture = Fixture()
        fixture.set("midtier.json", "logLevel", #""loud""#)
        fixture.write()
        do {
            _ = try ConfigurationLoader(directory: fixture.config + "/", environment: fixture.environment).load()
            Issue.record("expected a problem")
        } catch {
            #expect(
                error.problems == [
                    ConfigProblem(
                        file: fixture.path("midtier.json"), key: "logLevel",
                        message: #"must be one of "trace", "debug", "info", "notice", "warning", "error", "critical""#
                    )
                ])
        }
    }

    /// Relative paths resolve against the working directory of the process, not against the
    /// configuration directory (docs/configuration.md).
    @Test func relativePathsResolveAgainstWorkingDirectory() throws {
        let fixture = Fixture()
        let cwd = FileManager.default.currentDirectoryPath
        let ups = String(repeating: "../", count: cwd.split(separator: "/").count)
        let relativeKey = ups + fixture.root.dropFirst() + "/certs/sf.key"
        fixture.set("destinations/sf.json", "signingKey", "\"\(relativeKey)\"")
        #expect(try fixture.load().destinations["sf"] != nil)

        // The same relative path, present under the configuration directory only, is not found.
        let onlyInConfig = "certs/configtests-\(UUID().uuidString).key"
        fixture.rawFiles[onlyInConfig] = Values.keyPEM
        fixture.set("destinations/sf.json", "signingKey", "\"\(onlyInConfig)\"")
        let problems = fixture.problems()
        #expect(
            problems == [
                ConfigProblem(
                    file: fixture.path("destinations/sf.json"), key: "signingKey",
                    message: "cannot read file \(onlyInConfig): file not found"
                )
            ])
    }

    @Test func signingMaterialValidatorIsCalledPerSAMLDestinationAndReported() {
        let fixture = Fixture()
        let seen = Recorder()
        let validate: @Sendable (SAMLBearerSettings) -> (key: String, message: String)? = { settings in
            seen.record(settings.clientKey, settings.signingKeyPassphrase ?? "", settings.signingKeyPEM.count)
            return (key: "signingCertificate", message: "the certificate does not belong to the key")
        }
        do {
            _ = try fixture.load(validate: validate)
            Issue.record("expected a problem")
        } catch {
            #expect(
                error.problems == [
                    ConfigProblem(
                        file: fixture.path("destinations/sf.json"), key: "signingCertificate",
                        message: "the certificate does not belong to the key"
                    )
                ])
        }
        #expect(seen.calls == [["API-KEY-123", Values.keyPassphrase, "\(Values.keyPEM.utf8.count)"]])

        // A validator that accepts lets the load succeed.
        #expect((try? fixture.load(validate: { _ in nil })) != nil)
    }
}

final class Recorder: @unchecked Sendable {
    private let lock = NSLock()
    private var _calls: [[String]] = []
    var calls: [[String]] { lock.withLock { _calls } }
    func record(_ values: any CustomStringConvertible...) {
        lock.withLock { _calls.append(values.map(\.description)) }
    }
}
