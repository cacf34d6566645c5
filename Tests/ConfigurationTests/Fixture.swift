import ConfigurationFiles
import Foundation
import MidtierCore

/// Values the fixture's files carry, so tests can compare and look for leaks.
enum Values {
    static let adminHash = "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW"
    static let aliceHash = "$2y$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"
    static let bobHash = "$2a$04$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234"
    static let keyPEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDfake\n-----END PRIVATE KEY-----\n"
    static let certificatePEM = "-----BEGIN CERTIFICATE-----\nMIIDazCCAlOgAwIBAgIUfake\n-----END CERTIFICATE-----\n"
    static let keyPassphrase = "key-passphrase-from-env-7f3a"
    static let legacyPassword = "legacy-password-from-file-91c2"
    static let environment = ["TEST_SF_KEY_PASSPHRASE": keyPassphrase]
}

/// A configuration directory in a fresh temporary folder: `root/config/…` plus key,
/// certificate, secret and JWKS files under `root/`. Files are kept as ordered lists of
/// (key, raw JSON) so a test can change one key and write them again.
final class Fixture {
    let root: String
    var config: String { root + "/config" }
    /// Files under `config/`, by relative path.
    var files: [String: [(String, String)]] = [:]
    /// Files under `config/` written as raw text instead.
    var rawFiles: [String: String] = [:]
    /// Files under `config/` written as raw bytes.
    var rawBytes: [String: [UInt8]] = [:]
    var environment = Values.environment

    init() {
        root = FileManager.default.temporaryDirectory.path + "/midtier-config-tests-" + UUID().uuidString
        try! FileManager.default.createDirectory(atPath: root + "/certs", withIntermediateDirectories: true)
        try! FileManager.default.createDirectory(atPath: root + "/secrets", withIntermediateDirectories: true)
        writeText("certs/sf.key", Values.keyPEM)
        writeText("certs/sf.crt", Values.certificatePEM)
        writeText("secrets/legacy-password", Values.legacyPassword + "\n")
        writeText("jwks.json", #"{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}"#)

        files["midtier.json"] = [
            ("listen", #""0.0.0.0:8081""#),
            ("adminListen", #""[::1]:9091""#),
            ("adminTokenHashes", "[\"\(Values.adminHash)\"]"),
            ("logLevel", #""debug""#),
            ("maxRequestBodyBytes", "1048576"),
            ("credentialCacheSeconds", #""600""#),
        ]
        // As pasted from SAP BTP: strings for numbers, BTP-only keys, keys of other types.
        files["destinations/sf.json"] = [
            ("Name", #""sf""#),
            ("Type", #""HTTP""#),
            ("URL", #""https://api.sf.example/odata/v2/""#),
            ("Authentication", #""OAuth2SAMLBearerAssertion""#),
            ("ProxyType", #""Internet""#),
            ("Description", #""SuccessFactors payroll""#),
            ("tokenServiceURL", #""https://api.sf.example/oauth/token?company_id=ACME""#),
            ("clientKey", #""API-KEY-123""#),
            ("companyId", #""ACME""#),
            ("nameIdFormat", #""urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress""#),
            ("userIdSource", #""sfUserId""#),
            ("samlAssertionEncoding", #""base64url""#),
            ("signingKey", "\"\(root)/certs/sf.key\""),
            ("signingKeyPassphrase", #"{"env":"TEST_SF_KEY_PASSPHRASE"}"#),
            ("signingCertificate", "\"\(root)/certs/sf.crt\""),
            ("timeout", #""45000""#),
            ("URL.headers.X-Trace", #""on""#),
            ("URL.queries.customPageSize", #""100""#),
            ("metadataPatches", #"[{"entityType":"EmployeePayrollRunResultsItems","property":"amount","set":{"Precision":15,"Scale":"2"}}]"#),
            ("User", #""not-used-for-saml""#),
        ]
        files["destinations/legacy.json"] = [
            ("Name", #""legacy""#),
            ("URL", #""http://legacy.example:8000""#),
            ("Authentication", #""BasicAuthentication""#),
            ("User", #""techuser""#),
            ("Password", "{\"file\":\"\(root)/secrets/legacy-password\"}"),
        ]
        files["destinations/public.json"] = [
            ("Name", #""public""#),
            ("URL", #""http://localhost:8099/""#),
            ("Authentication", #""NoAuthentication""#),
            ("Password", #""not-used""#),
            ("clientKey", #""not-used""#),
        ]
        files["apps/com.example.payroll.json"] = [
            ("authentication", #"{"type":"basic"}"#),
            ("destinations", #"["sf","legacy"]"#),
            ("blockWipingPolicy", #"{"blockWipeEnabled":"true","blockDisconnectedPeriod":"30","wipeDisconnectedPeriod":90}"#),
            ("passwordPolicy", #"{"passwordPolicyEnabled":true,"passwordPolicyMinLength":8}"#),
            ("logSettings", #"{"logLevel":"WARN"}"#),
            ("discovery", #"{"note":"hello"}"#),
        ]
        files["apps/com.example.jwt.json"] = [
            (
                "authentication",
                "{\"type\":\"jwt\",\"issuer\":\"https://idp.example\",\"audience\":\"midtier\",\"jwks\":{\"file\":\"\(root)/jwks.json\"}}"
            ),
            ("destinations", #"["public"]"#),
        ]
        files["users.json"] = [
            (
                "users",
                """
                [{"id":"alice","passwordHash":"\(Values.aliceHash)","attributes":{"sfUserId":"alice1","employeeNumber":1001}},
                 {"id":"bob","passwordHash":"\(Values.bobHash)"}]
                """
            )
        ]
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// The path of a file under `config/` as problems name it.
    func path(_ relative: String) -> String { config + "/" + relative }

    /// Sets (or adds) one key of a file, as raw JSON.
    func set(_ file: String, _ key: String, _ rawJSON: String) {
        var members = files[file] ?? []
        if let index = members.firstIndex(where: { $0.0 == key }) {
            members[index].1 = rawJSON
        } else {
            members.append((key, rawJSON))
        }
        files[file] = members
    }

    func remove(_ file: String, _ key: String) {
        files[file]?.removeAll { $0.0 == key }
    }

    /// Writes a file under `root/`.
    func writeText(_ relative: String, _ text: String) {
        let path = root + "/" + relative
        try! FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true
        )
        try! Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Writes every file of `files` and `rawFiles` under `config/`.
    func write() {
        try? FileManager.default.removeItem(atPath: config)
        try! FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        for (relative, members) in files {
            let body = members.map { "  \"\($0.0)\": \($0.1)" }.joined(separator: ",\n")
            writeText("config/" + relative, "{\n\(body)\n}\n")
        }
        for (relative, text) in rawFiles {
            writeText("config/" + relative, text)
        }
        for (relative, bytes) in rawBytes {
            try! Data(bytes).write(to: URL(fileURLWithPath: path(relative)))
        }
    }

    /// Writes the files and loads them.
    func load(
        validate: (@Sendable (SAMLBearerSettings) -> (key: String, message: String)?)? = nil
    ) throws(ConfigurationErrors) -> MidtierConfiguration {
        write()
        return try ConfigurationLoader(directory: config, environment: environment, validateSigningMaterial: validate).load()
    }

    /// Writes the files, loads them, and returns the problems (none if the load succeeded).
    func problems() -> [ConfigProblem] {
        do {
            _ = try load()
            return []
        } catch {
            return error.problems
        }
    }
}
