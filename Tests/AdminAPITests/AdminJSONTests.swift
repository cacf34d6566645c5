import HTTPTypes
import MidtierCore
import MidtierJSON
import MidtierStore
import Testing

@testable import AdminAPI
@testable import Administration

/// The admin API's answer shapes (AdminJSON.swift, ClientUploadJSON.swift): the text each
/// writes, members in key order, as `JSONSerialization` with `.sortedKeys` wrote them before
/// (the expected texts are answers of that version, with the same values).
@Suite struct AdminJSONTests {
    /// 2026-11-25T23:23:33.783Z.
    static let at: Int64 = 1_795_649_013_783
    static let alice = UserIdentity(realm: "", id: "alice")

    static let registration = Registration(
        id: "7b7a7acd", appId: "fieldlog", user: alice, deviceType: "iOS", deviceModel: "iPhone15,2",
        deviceId: "alice-fieldlog/x", createdAt: at, state: .active)

    /// Every object in `value`, at any depth, has its members in key order (by their bytes).
    static func sorted(_ value: JSON) -> Bool {
        switch value {
        case .object(let members):
            let keys = members.map(\.key)
            return zip(keys, keys.dropFirst()).allSatisfy { $0.utf8.lexicographicallyPrecedes($1.utf8) } && members.allSatisfy { sorted($0.value) }
        case .array(let elements):
            return elements.allSatisfy(sorted)
        default:
            return true
        }
    }

    @Test func aRegistration() {
        let json = RegistrationJSON(Self.registration).json
        #expect(
            json.serialized() == #"{"appId":"fieldlog","createdAt":"2026-11-25T23:23:33Z","deviceId":"alice-fieldlog/x","deviceModel":"iPhone15,2","#
                + #""deviceType":"iOS","formFactor":"","id":"7b7a7acd","lastContactAt":"2026-11-25T23:23:33Z","realm":"","state":"active","userId":"alice"}"#
        )
        #expect(Self.sorted(json))
    }

    @Test func aBlockAndNoBlock() {
        let block = UserBlock(
            user: UserIdentity(realm: "", id: "bob"), kind: .traffic, reason: #"phone "lost" / stolen"#, since: Self.at, by: "admin#1")
        #expect(
            BlockJSON(block).json.serialized()
                == #"{"by":"admin#1","reason":"phone \"lost\" / stolen","since":"2026-11-25T23:23:33Z","type":"traffic"}"#)
        #expect(BlockJSON(nil).json == .null)
    }

    @Test func aStorageEntryAtTheUserAndTheDeviceLevel() {
        let user = StorageEntry(key: StorageKey(app: "fieldlog", user: Self.alice, level: .user, name: "Home"), size: 7, updatedAt: Self.at)
        #expect(
            StorageEntryJSON(user).json.serialized()
                == #"{"appId":"fieldlog","name":"Home","registration":null,"size":7,"updatedAt":"2026-11-25T23:23:33Z"}"#)
        var device = user
        device.key.level = .registration("7b7a7acd")
        #expect(StorageEntryJSON(device).json["registration"] == "7b7a7acd")
    }

    @Test func anAuditEntry() {
        let entry = AuditEntry(
            sequence: 3, at: Self.at, actor: "admin#1", action: "user.block", target: "bob", detail: "traffic: x", source: "127.0.0.1")
        #expect(
            AuditEntryJSON(entry).json.serialized() == #"{"action":"user.block","actor":"admin#1","at":"2026-11-25T23:23:33Z","#
                + #""detail":"traffic: x","sequence":3,"source":"127.0.0.1","target":"bob"}"#)
    }

    @Test func aDestinationLeavesOutWhatItsAuthenticationDoesNotHave() {
        var summary = Administration.DestinationSummary(
            name: "sf", url: "http://localhost:8081", authentication: "NoAuthentication",
            timeoutMilliseconds: 30000, headers: ["X-A"], queries: [], forwardDeviceCookies: ["ROUTEID"])
        #expect(
            DestinationJSON(summary).json.serialized() == #"{"authentication":"NoAuthentication","forwardDeviceCookies":["ROUTEID"],"#
                + #""headers":["X-A"],"name":"sf","queries":[],"timeout":30000,"url":"http://localhost:8081"}"#)
        summary.authentication = "OAuth2SAMLBearerAssertion"
        summary.audience = "www.successfactors.com"
        summary.clientKey = "key"
        summary.companyId = "DEMO"
        summary.nameIdFormat = "unspecified"
        summary.tokenServiceURL = "http://localhost:8081/oauth/token"
        summary.user = "u"
        summary.userIdSource = "sfUserId"
        let json = DestinationJSON(summary).json
        #expect(
            json.members?.map(\.key) == [
                "audience", "authentication", "clientKey", "companyId", "forwardDeviceCookies", "headers", "name",
                "nameIdFormat", "queries", "timeout", "tokenServiceURL", "url", "user", "userIdSource",
            ])
    }

    @Test func theReloadAnswers() {
        #expect(
            ReloadJSON(outcome: .reloaded(apps: 2, destinations: 1, users: 3)).json.serialized()
                == #"{"apps":2,"destinations":1,"status":"reloaded","users":3}"#)
        #expect(ReloadJSON(outcome: .reloaded(apps: 2, destinations: 1, users: 3)).status == .ok)
        let rejected = ReloadJSON(outcome: .rejected(["apps/x.json: bad"]))
        #expect(rejected.status == .unprocessableContent)
        #expect(
            rejected.json.serialized() == #"{"error":{"code":"CONFIG_INVALID","message":{"lang":"en","#
                + #""value":"the new configuration has 1 problem(s); the old one stays in force"}},"problems":["apps/x.json: bad"]}"#)
    }

    static let upload = ClientUpload(
        id: "a9dc9cf3", kind: .usage, app: "fieldlog", user: alice, registration: "7b7a7acd",
        deviceId: "alice-fieldlog/x", receivedAt: at, size: 89, report: #"{"report":"r-1","n":15}"#)

    @Test func aLogEntryWithItsUpload() {
        let entry = ClientLogEntry(
            upload: "a9dc9cf3", sequence: 0, time: Self.at, severity: .error, correlationId: "corr-1",
            source: "com.example/payroll", location: "View.swift:42", message: "Payroll #7 \"q\" \\ é ☃\u{1}")
        #expect(
            LogEntryJSON(ClientLogRecord(entry: entry, upload: Self.upload)).json.serialized()
                == #"{"correlationId":"corr-1","location":"View.swift:42","message":"Payroll #7 \"q\" \\ é ☃\u0001","severity":"ERROR","#
                + #""source":"com.example/payroll","time":"2026-11-25T23:23:33Z","upload":{"app":"fieldlog","deviceId":"alice-fieldlog/x","#
                + #""id":"a9dc9cf3","realm":"","receivedAt":"2026-11-25T23:23:33Z","registration":"7b7a7acd","userId":"alice"}}"#)
    }

    @Test func aUsageReportIsTheDevicesJSONAsSent() {
        let json = UsageReportJSON(Self.upload).json
        #expect(
            json.serialized() == #"{"app":"fieldlog","deviceId":"alice-fieldlog/x","id":"a9dc9cf3","realm":"","#
                + #""receivedAt":"2026-11-25T23:23:33Z","registration":"7b7a7acd","report":{"report":"r-1","n":15},"size":89,"userId":"alice"}"#)
        // Numbers as written, members in the device's order, whitespace gone.
        #expect(UsageReportJSON.report(#"{ "b": 1.50, "a": [1e2, null, true] }"#).serialized() == #"{"b":1.50,"a":[1e2,null,true]}"#)
    }

    @Test func aReportThatIsNotStrictJSONIsAString() {
        for text in ["not json", #"{"a":1,}"#, #"{"a":1,"a":2}"#, "", #"{"a":"#] {
            #expect(UsageReportJSON.report(text) == .string(text), "\(text)")
        }
        #expect(UsageReportJSON.report("15") == .number("15"))
    }

    @Test func aPageSaysWhetherThereIsAnother() {
        #expect(PageJSON(items: .reports, values: [], next: nil).json.serialized() == #"{"next":null,"reports":[]}"#)
        #expect(
            PageJSON(items: .entries, values: ["x"], next: "1714979290000.1.a9dc").json.serialized()
                == #"{"entries":["x"],"next":"1714979290000.1.a9dc"}"#)
    }
}
