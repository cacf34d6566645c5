import ConfigurationFiles
import Crypto
import CryptoExtras
import Foundation
import MidtierCore
import Testing

/// Keys made when the tests run (none is committed), and the other values of a valid push
/// configuration.
enum PushValues {
    static let apnsKey = P256.Signing.PrivateKey().pemRepresentation
    static let otherCurveKey = P384.Signing.PrivateKey().pemRepresentation
    // swift-crypto refuses to make smaller keys, and Google's are 2048 bits too.
    // swiftlint:disable:next force_try
    static let rsaKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation
    static let clientEmail = "midtier-push@demo-project.iam.gserviceaccount.com"
    static let accountTokenURI = "https://oauth2.googleapis.com/token"
    /// Inline secrets that are wrong, which problems must not repeat either.
    static let wrongSecret = "AuthKey-WRONG-SECRET-7f3a9c"

    /// Every secret a test writes, as fragments no problem may contain: each base64 line of
    /// each key, and the wrong inline secret.
    static var secretFragments: [String] {
        [apnsKey, otherCurveKey, rsaKey].flatMap { pem in
            pem.split(separator: "\n").filter { !$0.hasPrefix("-----") && $0.count >= 16 }.map(String.init)
        } + [wrongSecret]
    }

    /// The service account's members, as raw JSON.
    static var account: [(String, String)] {
        [
            ("type", #""service_account""#),
            ("project_id", #""demo-project""#),
            ("private_key_id", #""0123456789abcdef""#),
            ("private_key", jsonString(rsaKey)),
            ("client_email", jsonString(clientEmail)),
            ("client_id", #""123456789""#),
            ("auth_uri", #""https://accounts.google.com/o/oauth2/auth""#),
            ("token_uri", jsonString(accountTokenURI)),
        ]
    }

    static func apns(_ root: String) -> [(String, String)] {
        [
            ("teamId", #""ABCDE12345""#),
            ("keyId", #""KEY1234567""#),
            ("key", "{\"file\": \(jsonString(root + "/keys/AuthKey_KEY1234567.p8"))}"),
            ("topic", #""com.example.payroll""#),
            ("environment", #""sandbox""#),
        ]
    }

    static func fcm(_ root: String) -> [(String, String)] {
        [
            ("projectId", #""demo-project""#),
            ("serviceAccount", "{\"file\": \(jsonString(root + "/keys/service-account.json"))}"),
        ]
    }

    static let senders = """
        [{"name": "sf-workflow", "passwordHash": "\(Values.aliceHash)", "apps": ["com.example.payroll"]},
         {"name": "gateway", "passwordHash": "\(Values.bobHash)", "apps": ["com.example.payroll", "com.example.jwt"]}]
        """
}

/// A JSON string literal for `text`.
func jsonString(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
        }
    }
    return out + "\""
}

/// A JSON object from (key, raw JSON) members.
func jsonObject(_ members: [(String, String)]) -> String {
    "{" + members.map { "\(jsonString($0.0)): \($0.1)" }.joined(separator: ", ") + "}"
}

/// `members` with `key` set to `value` (added at the end if missing), or removed for nil.
func with(_ members: [(String, String)], _ key: String, _ value: String?) -> [(String, String)] {
    var result = members
    if let index = result.firstIndex(where: { $0.0 == key }) {
        if let value { result[index].1 = value } else { result.remove(at: index) }
    } else if let value {
        result.append((key, value))
    }
    return result
}

extension Fixture {
    /// The valid fixture plus push: the payroll app with APNs and FCM (keys in files), and two
    /// senders.
    static func withPush() -> Fixture {
        let fixture = Fixture()
        fixture.writeText("keys/AuthKey_KEY1234567.p8", PushValues.apnsKey)
        fixture.writeText("keys/service-account.json", jsonObject(PushValues.account) + "\n")
        fixture.writeText("keys/ca.pem", Values.certificatePEM)
        fixture.writeText("keys/not-a-certificate.pem", PushValues.wrongSecret)
        fixture.setPush(apns: PushValues.apns(fixture.root), fcm: PushValues.fcm(fixture.root))
        fixture.set("push-senders.json", "senders", PushValues.senders)
        return fixture
    }

    /// Sets the payroll app's `push` (nil leaves a service out).
    func setPush(apns: [(String, String)]?, fcm: [(String, String)]?) {
        var members: [(String, String)] = []
        if let apns { members.append(("apns", jsonObject(apns))) }
        if let fcm { members.append(("fcm", jsonObject(fcm))) }
        set(payroll, "push", jsonObject(members))
    }

    func changeAPNs(_ key: String, _ value: String?) {
        setPush(apns: with(PushValues.apns(root), key, value), fcm: PushValues.fcm(root))
    }

    func changeFCM(_ key: String, _ value: String?) {
        setPush(apns: PushValues.apns(root), fcm: with(PushValues.fcm(root), key, value))
    }

    /// The service account file with one member changed.
    func changeAccount(_ key: String, _ value: String?) {
        writeText("keys/service-account.json", jsonObject(with(PushValues.account, key, value)))
    }
}

let senders = "push-senders.json"

let pushBrokenCases: [Broken] = [
    // push
    Broken("push without a service", file: payroll, key: "push", message: "must have apns, fcm or both") {
        $0.set(payroll, "push", "{}")
    },
    Broken("push with a typo gets a hint", file: payroll, key: "push.apn", message: #"did you mean "apns"?"#) {
        $0.set(payroll, "push", jsonObject([("apn", jsonObject(PushValues.apns($0.root)))]))
    },
    Broken("push.apns not an object", file: payroll, key: "push.apns", message: "must be an object") {
        $0.set(payroll, "push", #"{"apns": "yes"}"#)
    },
    // APNs
    Broken("teamId lower case", file: payroll, key: "push.apns.teamId", message: "10 capital letters and digits") {
        $0.changeAPNs("teamId", #""abcde12345""#)
    },
    Broken("teamId too short", file: payroll, key: "push.apns.teamId", message: "10 capital letters and digits") {
        $0.changeAPNs("teamId", #""ABCDE1234""#)
    },
    Broken("keyId missing", file: payroll, key: "push.apns.keyId", message: "missing required key") {
        $0.changeAPNs("keyId", nil)
    },
    Broken("keyId with a space", file: payroll, key: "push.apns.keyId", message: "10 capital letters and digits") {
        $0.changeAPNs("keyId", #""KEY 123456""#)
    },
    Broken("key inline, not a key", file: payroll, key: "push.apns.key", message: "does not load as one (to read it from a file") {
        $0.changeAPNs("key", jsonString(PushValues.wrongSecret))
    },
    Broken("key of the wrong kind (RSA)", file: payroll, key: "push.apns.key", message: "a P-256 private key in PEM") {
        $0.changeAPNs("key", jsonString(PushValues.rsaKey))
    },
    Broken("key on another curve (P-384)", file: payroll, key: "push.apns.key", message: "a P-256 private key in PEM") {
        $0.writeText("keys/AuthKey_KEY1234567.p8", PushValues.otherCurveKey)
    },
    Broken("key cut short", file: payroll, key: "push.apns.key", message: "a P-256 private key in PEM") {
        $0.writeText("keys/AuthKey_KEY1234567.p8", String(PushValues.apnsKey.dropLast(40)))
    },
    Broken("key from an unset variable", file: payroll, key: "push.apns.key", message: "environment variable TEST_APNS_KEY is not set") {
        $0.changeAPNs("key", #"{"env": "TEST_APNS_KEY"}"#)
    },
    Broken("key file missing", file: payroll, key: "push.apns.key", message: "cannot read secret file") {
        $0.changeAPNs("key", #"{"file": "/nonexistent/AuthKey.p8"}"#)
    },
    Broken("topic with a line break", file: payroll, key: "push.apns.topic", message: "without spaces or control characters") {
        $0.changeAPNs("topic", #""com.example.payroll\r\nx-injected: 1""#)
    },
    Broken("topic empty", file: payroll, key: "push.apns.topic", message: "must not be empty") {
        $0.changeAPNs("topic", #""""#)
    },
    Broken("environment unknown", file: payroll, key: "push.apns.environment", message: #"must be one of "production", "sandbox""#) {
        $0.changeAPNs("environment", #""development""#)
    },
    Broken("environment missing", file: payroll, key: "push.apns.environment", message: "missing required key") {
        $0.changeAPNs("environment", nil)
    },
    Broken("endpoint plain http", file: payroll, key: "push.apns.endpoint", message: "must be https://host or https://host:port") {
        $0.changeAPNs("endpoint", #""http://localhost:8443""#)
    },
    Broken("endpoint with a path", file: payroll, key: "push.apns.endpoint", message: "without a path, query or fragment") {
        $0.changeAPNs("endpoint", #""https://localhost:8443/3/device""#)
    },
    Broken("endpoint with a query", file: payroll, key: "push.apns.endpoint", message: "without a path, query or fragment") {
        $0.changeAPNs("endpoint", #""https://localhost:8443?x=1""#)
    },
    Broken("endpoint with a password", file: payroll, key: "push.apns.endpoint", message: "must not contain a user name or password") {
        $0.changeAPNs("endpoint", #""https://user:pass@localhost:8443""#)
    },
    Broken("endpoint port out of range", file: payroll, key: "push.apns.endpoint", message: "port from 1 to 65535") {
        $0.changeAPNs("endpoint", #""https://localhost:70000""#)
    },
    Broken("caFile missing", file: payroll, key: "push.apns.caFile", message: "cannot read file /nonexistent/ca.pem: file not found") {
        $0.changeAPNs("caFile", #""/nonexistent/ca.pem""#)
    },
    Broken("caFile without a certificate", file: payroll, key: "push.apns.caFile", message: "holds no PEM certificate") {
        $0.changeAPNs("caFile", jsonString($0.root + "/keys/not-a-certificate.pem"))
    },
    Broken("apns key in another letter case gets a hint", file: payroll, key: "push.apns.teamID", message: #"did you mean "teamId"?"#, count: 2) {
        // teamId is then missing too.
        $0.setPush(apns: with(with(PushValues.apns($0.root), "teamId", nil), "teamID", #""ABCDE12345""#), fcm: nil)
    },
    // FCM
    Broken("projectId upper case", file: payroll, key: "push.fcm.projectId", message: "lower-case letters, digits and '-'") {
        $0.changeFCM("projectId", #""Demo-Project""#)
    },
    Broken("serviceAccount missing", file: payroll, key: "push.fcm.serviceAccount", message: "missing required key") {
        $0.changeFCM("serviceAccount", nil)
    },
    Broken("serviceAccount inline, not JSON", file: payroll, key: "push.fcm.serviceAccount", message: "is not JSON (invalid JSON at line 1") {
        $0.changeFCM("serviceAccount", jsonString(PushValues.wrongSecret))
    },
    Broken("serviceAccount file is the .p8 key", file: payroll, key: "push.fcm.serviceAccount", message: "is not JSON") {
        $0.changeFCM("serviceAccount", "{\"file\": \(jsonString($0.root + "/keys/AuthKey_KEY1234567.p8"))}")
    },
    Broken("serviceAccount pasted as an object", file: payroll, key: "push.fcm.serviceAccount", message: "not pasted into this file as an object") {
        $0.changeFCM("serviceAccount", jsonObject(PushValues.account))
    },
    Broken("serviceAccount a JSON array", file: payroll, key: "push.fcm.serviceAccount", message: "a JSON object; found an array") {
        $0.writeText("keys/service-account.json", "[]")
    },
    Broken("service account of another type", file: payroll, key: "push.fcm.serviceAccount", message: #"type must be "service_account""#) {
        $0.changeAccount("type", #""authorized_user""#)
    },
    Broken("service account without client_email", file: payroll, key: "push.fcm.serviceAccount", message: "has no client_email") {
        $0.changeAccount("client_email", nil)
    },
    Broken(
        "service account's client_email not an address", file: payroll, key: "push.fcm.serviceAccount",
        message: "client_email must be an e-mail address"
    ) {
        $0.changeAccount("client_email", #""midtier push""#)
    },
    Broken(
        "service account's private_key an EC key", file: payroll, key: "push.fcm.serviceAccount", message: "private_key must be an RSA private key"
    ) {
        $0.changeAccount("private_key", jsonString(PushValues.apnsKey))
    },
    Broken("service account's private_key garbage", file: payroll, key: "push.fcm.serviceAccount", message: "private_key must be an RSA private key")
    {
        $0.changeAccount("private_key", jsonString(PushValues.wrongSecret))
    },
    Broken(
        "service account's private_key a number", file: payroll, key: "push.fcm.serviceAccount",
        message: "private_key must be a non-empty string (found a number)"
    ) {
        $0.changeAccount("private_key", "12345678901234567890")
    },
    Broken("service account's token_uri plain http", file: payroll, key: "push.fcm.serviceAccount", message: "token_uri must be an https URL") {
        $0.changeAccount("token_uri", #""http://oauth2.googleapis.com/token""#)
    },
    Broken("service account without token_uri", file: payroll, key: "push.fcm.serviceAccount", message: "has no token_uri") {
        $0.changeAccount("token_uri", nil)
    },
    Broken("tokenURI override plain http", file: payroll, key: "push.fcm.tokenURI", message: "must be an https URL") {
        $0.changeFCM("tokenURI", #""http://localhost:9000/token""#)
    },
    Broken("fcm endpoint with a path", file: payroll, key: "push.fcm.endpoint", message: "without a path, query or fragment") {
        $0.changeFCM("endpoint", #""https://fcm.googleapis.com/v1""#)
    },
    Broken("fcm caFile a directory", file: payroll, key: "push.fcm.caFile", message: "is a directory") {
        $0.changeFCM("caFile", jsonString($0.root + "/keys"))
    },
    Broken("fcm unknown key gets a hint", file: payroll, key: "push.fcm.projectID", message: #"did you mean "projectId"?"#) {
        $0.changeFCM("projectID", #""demo-project""#)
    },
    // push-senders.json
    Broken(
        "sender naming an unknown app", file: senders, key: "senders[0].apps[0]",
        message: #"sender "sf-workflow" names app "com.example.payrol", but there is no such app"#
    ) {
        $0.set(senders, "senders", #"[{"name": "sf-workflow", "passwordHash": "\#(Values.aliceHash)", "apps": ["com.example.payrol"]}]"#)
    },
    Broken("sender naming an app in another letter case", file: senders, key: "senders[0].apps[0]", message: "but there is no such app") {
        $0.set(senders, "senders", #"[{"name": "sf-workflow", "passwordHash": "\#(Values.aliceHash)", "apps": ["COM.example.payroll"]}]"#)
    },
    Broken("sender naming an app twice", file: senders, key: "senders[0].apps[1]", message: "names app \"com.example.payroll\" twice") {
        $0.set(
            senders, "senders", #"[{"name": "a", "passwordHash": "\#(Values.aliceHash)", "apps": ["com.example.payroll", "com.example.payroll"]}]"#)
    },
    Broken("duplicate sender names", file: senders, key: "senders[1].name", message: #"duplicate sender name "sf-workflow""#) {
        $0.set(
            senders, "senders",
            #"""
            [{"name": "sf-workflow", "passwordHash": "\#(Values.aliceHash)", "apps": ["com.example.payroll"]},
             {"name": "sf-workflow", "passwordHash": "\#(Values.bobHash)", "apps": ["com.example.jwt"]}]
            """#)
    },
    Broken("bad bcrypt hash", file: senders, key: "senders[0].passwordHash", message: "must be a bcrypt hash") {
        $0.set(senders, "senders", #"[{"name": "sf-workflow", "passwordHash": "\#(PushValues.wrongSecret)", "apps": ["com.example.payroll"]}]"#)
    },
    Broken("bcrypt hash with a cost out of range", file: senders, key: "senders[0].passwordHash", message: "must be a bcrypt hash") {
        $0.set(
            senders, "senders",
            #"[{"name": "sf-workflow", "passwordHash": "\#(Values.aliceHash.replacingOccurrences(of: "$10$", with: "$03$"))", "apps": ["com.example.payroll"]}]"#
        )
    },
    Broken("sender name with ':'", file: senders, key: "senders[0].name", message: "must not contain ':' or control characters") {
        $0.set(senders, "senders", #"[{"name": "sf:workflow", "passwordHash": "\#(Values.aliceHash)", "apps": ["com.example.payroll"]}]"#)
    },
    Broken("sender name with a line break", file: senders, key: "senders[0].name", message: "must not contain ':' or control characters") {
        $0.set(senders, "senders", #"[{"name": "sf\nworkflow", "passwordHash": "\#(Values.aliceHash)", "apps": ["com.example.payroll"]}]"#)
    },
    Broken("sender without apps", file: senders, key: "senders[0].apps", message: "must name at least one app") {
        $0.set(senders, "senders", #"[{"name": "sf-workflow", "passwordHash": "\#(Values.aliceHash)", "apps": []}]"#)
    },
    Broken("sender's app not a string", file: senders, key: "senders[0].apps[0]", message: "must be an app id (found a number)") {
        $0.set(senders, "senders", #"[{"name": "sf-workflow", "passwordHash": "\#(Values.aliceHash)", "apps": [1]}]"#)
    },
    Broken("sender with an unknown key", file: senders, key: "senders[0].passwrdHash", message: #"unknown key (did you mean "passwordHash"?)"#) {
        $0.set(senders, "senders", #"[{"name": "a", "passwordHash": "\#(Values.aliceHash)", "passwrdHash": "x", "apps": ["com.example.payroll"]}]"#)
    },
    Broken("sender with neither a password nor an API key", file: senders, key: "senders[0].passwordHash", message: "is required unless") {
        $0.set(senders, "senders", #"[{"name": "a", "apps": ["com.example.payroll"]}]"#)
    },
    Broken("API key hash not SHA-256", file: senders, key: "senders[0].apiKeyHash", message: "must be `sha256:` and 64 hex digits") {
        $0.set(senders, "senders", #"[{"name": "a", "apiKeyHash": "\#(Values.aliceHash)", "apps": ["com.example.payroll"]}]"#)
    },
    Broken("API key hash one digit short", file: senders, key: "senders[0].apiKeyHash", message: "must be `sha256:` and 64 hex digits") {
        $0.set(
            senders, "senders", #"[{"name": "a", "apiKeyHash": "sha256:\#(String(repeating: "ab", count: 31))a", "apps": ["com.example.payroll"]}]"#)
    },
    Broken("two senders with one API key", file: senders, key: "senders[1].apiKeyHash", message: "is another sender's API key too") {
        $0.set(
            senders, "senders",
            #"[{"name": "a", "apiKeyHash": "sha256:\#(String(repeating: "ab", count: 32))", "apps": ["com.example.payroll"]},"#
                + #" {"name": "b", "apiKeyHash": "sha256:\#(String(repeating: "AB", count: 32))", "apps": ["com.example.payroll"]}]"#)
    },
    Broken("sender OAuth without a clientId", file: senders, key: "senders[0].oauth.clientId", message: "missing required key") {
        $0.set(
            senders, "senders",
            #"[{"name": "a", "oauth": {"issuer": "https://idp.example", "audience": "midtier", "jwks": {"url": "https://idp.example/jwks"}}, "apps": ["com.example.payroll"]}]"#
        )
    },
    Broken("sender OAuth with JWKS over plain http", file: senders, key: "senders[0].oauth.jwks.url", message: "https") {
        $0.set(
            senders, "senders",
            #"[{"name": "a", "oauth": {"issuer": "https://idp.example", "audience": "midtier", "jwks": {"url": "http://idp.example/jwks"}, "clientId": "c"}, "apps": ["com.example.payroll"]}]"#
        )
    },
    Broken("sender OAuth with an empty clientId", file: senders, key: "senders[0].oauth.clientId", message: "must not be empty") {
        $0.set(
            senders, "senders",
            #"[{"name": "a", "oauth": {"issuer": "https://idp.example", "audience": "midtier", "jwks": {"url": "https://idp.example/jwks"}, "clientId": ""}, "apps": ["com.example.payroll"]}]"#
        )
    },
    Broken("two senders with one OAuth client", file: senders, key: "senders[1].oauth", message: "is another sender's OAuth client too") {
        $0.set(
            senders, "senders",
            #"[{"name": "a", "oauth": {"issuer": "https://idp.example", "audience": "midtier", "jwks": {"url": "https://idp.example/jwks"}, "clientId": "c"}, "apps": ["com.example.payroll"]},"#
                + #" {"name": "b", "oauth": {"issuer": "https://idp.example", "audience": "midtier", "jwks": {"url": "https://idp.example/jwks"}, "clientId": "c"}, "apps": ["com.example.payroll"]}]"#
        )
    },
    Broken("senders not an array", file: senders, key: "senders", message: "must be an array (found an object)") {
        $0.set(senders, "senders", "{}")
    },
    Broken("senders file without senders", file: senders, key: "senders", message: "missing required key") {
        $0.remove(senders, "senders")
    },
]

@Suite struct PushConfigurationTests {
    @Test func validPushLoadsIntoTheValues() throws {
        let fixture = Fixture.withPush()
        let configuration = try fixture.load()
        let push = try #require(configuration.apps["com.example.payroll"]).push
        #expect(push.isEnabled)

        let apns = try #require(push.apns)
        #expect(apns.teamID == "ABCDE12345")
        #expect(apns.keyID == "KEY1234567")
        #expect(apns.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(
            try P256.Signing.PrivateKey(pemRepresentation: apns.privateKeyPEM).publicKey.rawRepresentation
                == P256.Signing.PrivateKey(pemRepresentation: PushValues.apnsKey).publicKey.rawRepresentation)
        #expect(apns.topic == "com.example.payroll")
        #expect(apns.environment == .sandbox)
        #expect(apns.endpoint == "https://api.sandbox.push.apple.com")
        #expect(apns.caFile == nil)

        let fcm = try #require(push.fcm)
        #expect(fcm.projectID == "demo-project")
        #expect(fcm.clientEmail == PushValues.clientEmail)
        #expect(fcm.privateKeyPEM == PushValues.rsaKey)
        #expect(fcm.tokenURI == PushValues.accountTokenURI)
        #expect(fcm.endpoint == "https://fcm.googleapis.com")
        #expect(fcm.caFile == nil)

        // The other app has no push; the senders in file order.
        #expect(configuration.apps["com.example.jwt"]?.push.isEnabled == false)
        #expect(configuration.pushSenders.map(\.name) == ["sf-workflow", "gateway"])
        #expect(configuration.pushSenders.map(\.passwordHash) == [Values.aliceHash, Values.bobHash])
        #expect(configuration.pushSenders.map(\.apps) == [["com.example.payroll"], ["com.example.payroll", "com.example.jwt"]])
        #expect(configuration.pushSender(named: "gateway")?.mayUse(app: "com.example.jwt") == true)
    }

    @Test func productionAndOverridesLoad() throws {
        let fixture = Fixture.withPush()
        fixture.environment["TEST_APNS_KEY"] = PushValues.apnsKey
        let ca = fixture.root + "/keys/ca.pem"
        fixture.setPush(
            apns: [
                ("teamId", #""ABCDE12345""#), ("keyId", #""KEY1234567""#), ("key", #"{"env": "TEST_APNS_KEY"}"#),
                ("topic", #""com.example.payroll.voip""#), ("environment", #""production""#),
            ],
            fcm: [
                ("projectId", #""demo-project-2""#), ("serviceAccount", jsonString(jsonObject(PushValues.account))),
                ("tokenURI", #""https://127.0.0.1:9443/token""#), ("endpoint", #""https://[::1]:9444/""#),
                ("caFile", jsonString(ca)),
            ])
        var configuration = try fixture.load()
        var push = try #require(configuration.apps["com.example.payroll"]).push
        #expect(push.apns?.environment == .production)
        #expect(push.apns?.endpoint == "https://api.push.apple.com")
        #expect(push.apns?.privateKeyPEM == PushValues.apnsKey)
        #expect(push.apns?.topic == "com.example.payroll.voip")
        #expect(push.fcm?.projectID == "demo-project-2")
        #expect(push.fcm?.tokenURI == "https://127.0.0.1:9443/token")
        #expect(push.fcm?.endpoint == "https://[::1]:9444")
        #expect(push.fcm?.caFile == ca)
        #expect(push.fcm?.privateKeyPEM == PushValues.rsaKey)

        // A stand-in's endpoint and CA for APNs; FCM left out. A tokenURI lets the account go
        // without token_uri.
        fixture.setPush(
            apns: with(with(PushValues.apns(fixture.root), "endpoint", #""https://localhost:8443""#), "caFile", jsonString(ca)),
            fcm: nil)
        configuration = try fixture.load()
        push = try #require(configuration.apps["com.example.payroll"]).push
        #expect(push.apns?.endpoint == "https://localhost:8443")
        #expect(push.apns?.caFile == ca)
        #expect(push.fcm == nil)

        fixture.changeAccount("token_uri", nil)
        fixture.setPush(apns: nil, fcm: with(PushValues.fcm(fixture.root), "tokenURI", #""https://oauth.example/token""#))
        configuration = try fixture.load()
        push = try #require(configuration.apps["com.example.payroll"]).push
        #expect(push.apns == nil)
        #expect(push.fcm?.tokenURI == "https://oauth.example/token")
    }

    @Test(arguments: pushBrokenCases)
    func brokenPushNamesFileAndKeyAndNoSecret(_ broken: Broken) {
        let fixture = Fixture.withPush()
        broken.change(fixture)
        let problems = fixture.problems()
        let expectedFile = fixture.path(broken.file)
        let match = problems.first { $0.file == expectedFile && $0.key == broken.key }
        #expect(match != nil, "no problem for \(broken.file): \(broken.key) in:\n\(problems.map(\.description).joined(separator: "\n"))")
        if let match {
            #expect(match.message.contains(broken.message), "message was: \(match.message)")
        }
        #expect(problems.count == broken.count, "problems:\n\(problems.map(\.description).joined(separator: "\n"))")
        for problem in problems {
            for fragment in PushValues.secretFragments {
                #expect(!problem.description.contains(fragment), "a secret shows in: \(problem)")
            }
        }
    }

    @Test func missingSendersFileMeansNoSenders() throws {
        let fixture = Fixture.withPush()
        fixture.files[senders] = nil
        let configuration = try fixture.load()
        #expect(configuration.pushSenders.isEmpty)
        #expect(configuration.pushSender(named: "sf-workflow") == nil)
    }

    @Test func sendersFileThatIsNotJSONIsOneProblem() {
        let fixture = Fixture.withPush()
        fixture.files[senders] = nil
        fixture.rawFiles[senders] = #"{"senders": [}"#
        let problems = fixture.problems()
        #expect(problems.count == 1)
        #expect(problems.first?.file == fixture.path(senders))
        #expect(problems.first?.key == "")
    }

    @Test func senderNamesCompareByBytes() throws {
        // "é" precomposed and decomposed are equal as Swift strings but are different names.
        let fixture = Fixture.withPush()
        fixture.set(
            senders, "senders",
            """
            [{"name": "caf\u{E9}", "passwordHash": "\(Values.aliceHash)", "apps": ["com.example.payroll"]},
             {"name": "cafe\u{301}", "passwordHash": "\(Values.bobHash)", "apps": ["com.example.jwt"]}]
            """)
        let configuration = try fixture.load()
        #expect(configuration.pushSenders.count == 2)
        #expect(configuration.pushSender(named: "cafe\u{301}")?.passwordHash == Values.bobHash)
    }

    /// A sender may sign in by API key only (SAP's `X-API-Key`), by password only, or both.
    @Test func aSenderWithAnAPIKeyLoadsItsDigest() throws {
        let fixture = Fixture.withPush()
        fixture.set(
            senders, "senders",
            """
            [{"name": "keyed", "apiKeyHash": "sha256:\(String(repeating: "0f", count: 32))", "apps": ["com.example.payroll"]},
             {"name": "both", "passwordHash": "\(Values.bobHash)", "apiKeyHash": "sha256:\(String(repeating: "A1", count: 32))",
              "apps": ["com.example.jwt"]}]
            """)
        let configuration = try fixture.load()
        #expect(configuration.pushSender(named: "keyed")?.passwordHash == nil)
        #expect(configuration.pushSender(named: "keyed")?.apiKeyDigest == [UInt8](repeating: 0x0F, count: 32))
        #expect(configuration.pushSender(named: "both")?.passwordHash == Values.bobHash)
        #expect(configuration.pushSender(named: "both")?.apiKeyDigest == [UInt8](repeating: 0xA1, count: 32))
    }

    /// A sender may sign in with OAuth only: its identity provider's access tokens, naming its
    /// client in `client_id` unless `clientClaim` names another claim.
    @Test func aSenderWithOAuthLoadsItsClient() throws {
        let fixture = Fixture.withPush()
        fixture.set(
            senders, "senders",
            """
            [{"name": "tokens", "oauth": {"issuer": "https://idp.example", "audience": "midtier-push",
              "jwks": {"url": "https://idp.example/jwks"}, "clientId": "hr-events"}, "apps": ["com.example.payroll"]},
             {"name": "azp", "oauth": {"issuer": "https://idp.example", "audience": "midtier-push",
              "jwks": {"url": "https://idp.example/jwks"}, "clientId": "hr-events", "clientClaim": "azp"}, "apps": ["com.example.payroll"]}]
            """)
        let configuration = try fixture.load()
        let tokens = try #require(configuration.pushSender(named: "tokens")?.oauth)
        #expect(configuration.pushSender(named: "tokens")?.passwordHash == nil)
        #expect(tokens.clientID == "hr-events")
        #expect(
            tokens.token
                == JWTAuthentication(
                    issuer: "https://idp.example", audience: "midtier-push", jwks: .url("https://idp.example/jwks"), userClaim: "client_id"))
        #expect(configuration.pushSender(named: "azp")?.oauth?.token.userClaim == "azp")
    }

    /// Found by the outside attack of issue 36: a sender whose tokens come from a JWT app's
    /// issuer for the app's audience cannot be told apart from the app's users.
    @Test func aSenderSharingAJWTAppsAudienceIsAWarning() throws {
        let fixture = Fixture.withPush()
        fixture.set(
            senders, "senders",
            """
            [{"name": "tokens", "oauth": {"issuer": "https://idp.example", "audience": "midtier",
              "jwks": {"url": "https://idp.example/jwks"}, "clientId": "hr-events"}, "apps": ["com.example.payroll"]},
             {"name": "own", "oauth": {"issuer": "https://idp.example", "audience": "midtier-push",
              "jwks": {"url": "https://idp.example/jwks"}, "clientId": "hr-events"}, "apps": ["com.example.payroll"]}]
            """)
        let configuration = try fixture.load()
        let warnings = ConfigurationLoader(directory: fixture.config, environment: fixture.environment).warnings(for: configuration)
            .filter { $0.description.contains("oauth") }
        #expect(warnings.map(\.key) == ["senders[0].oauth.audience"], "\(warnings)")
        #expect(warnings.first?.description.contains("com.example.jwt") == true)
    }

    @Test func senderOfAnAppWithoutPushIsAWarning() throws {
        let fixture = Fixture.withPush()
        let configuration = try fixture.load()
        let warnings = ConfigurationLoader(directory: fixture.config, environment: fixture.environment).warnings(for: configuration)
        #expect(
            warnings.map(\.description) == [
                "\(fixture.path(senders)): senders[1].apps[1]: warning: app \"com.example.jwt\" has no push section (apns or fcm), "
                    + "so sender \"gateway\"'s notifications to it are refused (docs/configuration.md#push)"
            ])
    }

    @Test func brokenAppFileIsNotAlsoAnUndefinedAppOfASender() {
        let fixture = Fixture.withPush()
        fixture.changeAPNs("teamId", #""short""#)
        let problems = fixture.problems()
        #expect(problems.map(\.key) == ["push.apns.teamId"])
    }
}
