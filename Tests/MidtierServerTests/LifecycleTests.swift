import Foundation
import MidtierCore
import MidtierJSON
import MidtierTestSupport
import NIOHTTP1
import Testing

/// Lock, wipe, block and the offline policy, through real sockets: an admin's decision holds
/// from the very next request.
@Suite(.timeLimit(.minutes(10))) struct LifecycleTests {
    static let payroll = "/sf/odata/v2/User('100001')"

    func proxied(_ env: TestEnvironment, _ user: TestUser, _ id: String) async throws -> TestEnvironment.Reply {
        try await env.call(
            .GET, Self.payroll.replacingOccurrences(of: "100001", with: user.sfUserId),
            headers: [("Authorization", user.basic), ("X-SMP-APPCID", id)])
    }

    func registerReply(_ env: TestEnvironment, _ user: TestUser) async throws -> TestEnvironment.Reply {
        try await env.call(.POST, "/odata/applications/v1/demo/Connections", headers: [("Authorization", user.basic)], body: "{}")
    }

    @Test func blocksRefuseTheNextRequestWithSAPsMessageCodes() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            #expect(try await proxied(env, .alice, id).status == 200)

            let traffic = try await env.admin(.PUT, "/admin/v1/users/alice/block", body: #"{"type":"traffic","reason":"left the company"}"#)
            #expect(traffic.status == 200, "\(traffic.text)")
            let refused = try await proxied(env, .alice, id)
            #expect(refused.status == 403)
            #expect(refused.header("x-message-code") == "TRAFFIC_BLOCKED")
            #expect(refused.errorMessage != nil)
            #expect(try await registerReply(env, .alice).status == 201, "a traffic block still lets a device register")
            #expect(try await proxied(env, .bob, try await env.register(.bob)).status == 200, "bob is not affected")

            _ = try await env.admin(.PUT, "/admin/v1/users/alice/block", body: #"{"type":"registration","reason":"x"}"#)
            let noRegistration = try await registerReply(env, .alice)
            #expect(noRegistration.status == 403)
            #expect(noRegistration.header("x-message-code") == "REG_BLOCKED")
            #expect(try await proxied(env, .alice, id).status == 200, "a registration block lets traffic through")

            _ = try await env.admin(.PUT, "/admin/v1/users/alice/block", body: #"{"type":"all","reason":"x"}"#)
            #expect(try await proxied(env, .alice, id).header("x-message-code") == "TRAFFIC_REG_BLOCKED")
            #expect(try await registerReply(env, .alice).header("x-message-code") == "TRAFFIC_REG_BLOCKED")

            #expect(try await env.admin(.DELETE, "/admin/v1/users/alice/block").status == 204)
            #expect(try await proxied(env, .alice, id).status == 200)
            // Every block dropped alice's cached token: one exchange at the start, one after the
            // traffic block (while only registering was blocked), one after unblocking.
            let stats = try await env.sandboxStats()
            #expect((stats["exchangesByUser"] as? [String: Int])?["100001"] == 3)
        }
    }

    @Test func lockUnlockAndWipeForever() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            let locked = try await env.admin(.POST, "/admin/v1/registrations/\(id)/lock")
            #expect(locked.status == 200)
            #expect(locked.json["state"] as? String == "locked")
            let refused = try await proxied(env, .alice, id)
            #expect(refused.status == 403)
            #expect(refused.header("x-message-code") == "TRAFFIC_REG_LOCKED")
            #expect(try await env.admin(.POST, "/admin/v1/registrations/\(id)/unlock").status == 200)
            #expect(try await proxied(env, .alice, id).status == 200)

            #expect(try await env.admin(.POST, "/admin/v1/registrations/\(id)/wipe").status == 200)
            #expect(try await proxied(env, .alice, id).header("x-message-code") == "TRAFFIC_REG_WIPED")
            let unlock = try await env.admin(.POST, "/admin/v1/registrations/\(id)/unlock")
            #expect(unlock.status == 409, "a wiped registration never comes back")
            #expect(try await proxied(env, .alice, id).header("x-message-code") == "TRAFFIC_REG_WIPED")
            #expect(try await env.admin(.POST, "/admin/v1/registrations/nope/lock").status == 404)
        }
    }

    @Test func theOfflinePolicyIsEnforcedServerSide() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.apps["demo"]!.blockWipingPolicy = BlockWipingPolicy(
                blockWipeEnabled: true, blockDisconnectedPeriod: 30,
                wipeDisconnectedPeriod: 90)
        }) { env in
            let lockedLater = try await env.register(.alice)
            let wipedLater = try await env.register(.alice)
            #expect(try await proxied(env, .alice, lockedLater).status == 200)
            env.clock.advance(days: 31)
            let locked = try await proxied(env, .alice, lockedLater)
            #expect(locked.status == 403)
            #expect(locked.header("x-message-code") == "TRAFFIC_REG_LOCKED")
            env.clock.advance(days: 60)
            let wiped = try await proxied(env, .alice, wipedLater)
            #expect(wiped.header("x-message-code") == "TRAFFIC_REG_WIPED")
            let state = try await env.admin(.GET, "/admin/v1/registrations/\(wipedLater)")
            #expect(state.json["state"] as? String == "wiped", "the wipe is recorded, not just answered")
            // A fresh registration works: contact resets the clock.
            #expect(try await proxied(env, .alice, try await env.register(.alice)).status == 200)
            let audit = try await env.admin(.GET, "/admin/v1/audit")
            let entries = audit.json["entries"] as? [[String: Any]] ?? []
            #expect(entries.contains { $0["actor"] as? String == "system" && $0["action"] as? String == "registration.wipe" })
        }
    }

    /// A proxied call notes its contact and the writer service stores it (docs/operations.md,
    /// "Last contact"); the admin API reads it back.
    @Test func aProxiedCallsContactReachesTheStore() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            let created = try #require(
                Date(
                    (try await env.admin(.GET, "/admin/v1/registrations/\(id)").json["createdAt"] as? String) ?? "",
                    strategy: .iso8601))
            env.clock.advance(days: 1)
            #expect(try await proxied(env, .alice, id).status == 200)
            var contact: Date?
            for _ in 0..<200 {
                let shown = try await env.admin(.GET, "/admin/v1/registrations/\(id)").json["lastContactAt"] as? String
                contact = shown.flatMap { try? Date($0, strategy: .iso8601) }
                if let contact, contact.timeIntervalSince(created) > 23 * 3600 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(
                contact.map { $0.timeIntervalSince(created) > 23 * 3600 } == true, "lastContactAt \(String(describing: contact)), created \(created)")
        }
    }

    @Test func selfServiceSeesAndChangesOnlyTheUsersOwnDevices() async throws {
        try await TestEnvironment.with { env in
            let phone = try await env.register(.alice)
            let tablet = try await env.register(.alice)
            let bobs = try await env.register(.bob)
            let mine = try await env.call(
                .GET, "/mobileservices/me/registrations", headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", tablet)])
            #expect(mine.status == 200)
            let ids = ((mine.json["d"] as? [String: Any])?["results"] as? [[String: Any]])?.compactMap { $0["ApplicationConnectionId"] as? String }
            #expect(Set(ids ?? []) == [phone, tablet])
            // Alice cannot touch bob's registration: it does not exist for her.
            for action in ["lock", "wipe"] {
                let reply = try await env.call(
                    .POST, "/mobileservices/me/registrations/\(bobs)/\(action)", headers: [("Authorization", TestUser.alice.basic)])
                #expect(reply.status == 404)
            }
            #expect(try await proxied(env, .bob, bobs).status == 200)
            // Her own lost phone: wiped from the tablet, without an admin.
            let wipe = try await env.call(
                .POST, "/mobileservices/me/registrations/\(phone)/wipe", headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", tablet)])
            #expect(wipe.status == 200)
            #expect(try await proxied(env, .alice, phone).header("x-message-code") == "TRAFFIC_REG_WIPED")
            #expect(try await proxied(env, .alice, tablet).status == 200)
            let audit = try await env.admin(.GET, "/admin/v1/audit")
            let entries = audit.json["entries"] as? [[String: Any]] ?? []
            let wipeEntry = entries.first { $0["action"] as? String == "registration.wipe" }
            #expect(wipeEntry?["actor"] as? String == "user:alice")
            #expect(wipeEntry?["target"] as? String == phone)
            #expect(wipeEntry?["source"] as? String == "127.0.0.1")
            #expect(try await env.call(.GET, "/mobileservices/me/registrations").status == 401)
        }
    }

    @Test func theAdminAPIWantsAValidTokenAndAuditsWhoDidWhat() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            #expect(try await env.admin(.GET, "/admin/v1/registrations", token: nil).status == 401)
            #expect(try await env.admin(.GET, "/admin/v1/registrations", token: "wrong").status == 401)
            #expect(try await env.admin(.GET, "/admin/v1/registrations", token: String(TestEnvironment.adminToken.dropLast())).status == 401)
            let list = try await env.admin(.GET, "/admin/v1/registrations?user=alice")
            #expect(list.status == 200)
            #expect((list.json["registrations"] as? [[String: Any]])?.map { $0["id"] as? String } == [id])
            #expect(try await env.admin(.GET, "/admin/v1/registrations?state=bogus").status == 400)
            #expect(try await env.admin(.PUT, "/admin/v1/users/alice/block", body: #"{"type":"everything"}"#).status == 400)
            #expect(try await env.admin(.PUT, "/admin/v1/users/alice/block", body: "not json").status == 400)
            _ = try await env.admin(.PUT, "/admin/v1/users/alice/block", body: #"{"type":"traffic","reason":"lost badge"}"#)
            let user = try await env.admin(.GET, "/admin/v1/users/alice")
            #expect(user.status == 200)
            #expect((user.json["block"] as? [String: Any])?["type"] as? String == "traffic")
            #expect((user.json["block"] as? [String: Any])?["by"] as? String == "admin#2")
            #expect((user.json["registrations"] as? [[String: Any]])?.count == 1)
            #expect(try await env.admin(.GET, "/admin/v1/users/nobody-at-all").status == 404)
            let destinations = try await env.admin(.GET, "/admin/v1/destinations")
            #expect(destinations.status == 200)
            #expect(!destinations.text.contains("PRIVATE KEY") && !destinations.text.contains("BEGIN"), "no key material")
            let audit = try await env.admin(.GET, "/admin/v1/audit?since=1970-01-01T00:00:00Z")
            let block = (audit.json["entries"] as? [[String: Any]])?.first { $0["action"] as? String == "user.block" }
            #expect(block?["actor"] as? String == "admin#2")
            #expect(block?["target"] as? String == "alice")
            #expect((block?["detail"] as? String)?.contains("lost badge") == true)
            #expect(block?["source"] as? String == "127.0.0.1")
            #expect(block?["at"] as? String != nil)
            #expect(try await env.admin(.GET, "/admin/v1/audit?since=yesterday").status == 400)
            let purge = try await env.admin(.DELETE, "/admin/v1/tokens/alice")
            #expect(purge.status == 200)
            let nothing = try await env.admin(.GET, "/admin/v1/nothing-here")
            #expect(nothing.status == 404)
            #expect(nothing.errorMessage != nil, "the router's own 404 has an OData error body too")
            let lowercase = try await env.call(
                .GET, "/admin/v1/destinations", headers: [("Authorization", "bearer \(TestEnvironment.adminToken)")],
                base: "http://127.0.0.1:\(env.adminPort)")
            #expect(lowercase.status == 200, "the auth scheme is case-insensitive")
            #expect(try await env.call(.GET, "/odata/nothing").errorMessage != nil)
        }
    }

    /// The Connection entity's fields beyond the basic ones: written by the device, returned with
    /// their types, and the app's policy as read-only fields.
    @Test func registrationCarriesTheWholeConnectionEntity() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.apps["demo"]!.passwordPolicy = ["passwordPolicyEnabled": .bool(true), "passwordPolicyMinLength": .number(8)]
            configuration.apps["demo"]!.logSettings = ["logEnabled": .bool(true)]
        }) { env in
            let headers = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let created = try await env.call(
                .POST, "/odata/applications/v1/demo/Connections", headers: headers,
                body: """
                    {"DeviceType":"iOS","DeviceSubType":"iPhone","ApnsPushEnable":"true","AndroidGcmPushEnabled":false,
                     "Email":"alice@example.com","UserLocale":"de_DE","TimeZone":"Europe/Berlin","CustomCustom1":"c1","ApplicationVersion":"2.1"}
                    """)
            #expect(created.status == 201, "\(created.text)")
            let id = try #require(created.header("X-SMP-APPCID"))
            let read = try await env.call(
                .GET, "/odata/applications/v1/demo/Connections('\(id)')", headers: headers + [("X-SMP-APPCID", id), ("Accept", "application/json")])
            let d = read.json["d"] as? [String: Any]
            #expect(d?["DeviceSubType"] as? String == "iPhone")
            #expect(d?["ApnsPushEnable"] as? Bool == true)
            #expect(d?["AndroidGcmPushEnabled"] as? Bool == false)
            #expect(d?["Email"] as? String == "alice@example.com")
            #expect(d?["TimeZone"] as? String == "Europe/Berlin")
            #expect(d?["CustomCustom2"] as? String == "", "a field not sent is empty")
            #expect(d?["ApplicationVersion"] as? String == "2.1")
            #expect(d?["PasswordPolicyEnabled"] as? Bool == true)
            #expect(d?["PasswordPolicyMinLength"] as? Int == 8)
            #expect(d?["UploadLogs"] as? Bool == true)
            let updated = try await env.call(
                .PATCH, "/odata/applications/v1/demo/Connections('\(id)')", headers: headers + [("X-SMP-APPCID", id)],
                body: #"{"TimeZone":"Europe/Paris"}"#)
            #expect(updated.status < 300, "\(updated.status) \(updated.text)")
            let again = try await env.call(
                .GET, "/odata/applications/v1/demo/Connections('\(id)')", headers: headers + [("X-SMP-APPCID", id), ("Accept", "application/json")])
            #expect((again.json["d"] as? [String: Any])?["TimeZone"] as? String == "Europe/Paris")
            #expect((again.json["d"] as? [String: Any])?["Email"] as? String == "alice@example.com", "fields not sent keep their values")
            let bad = try await env.call(.POST, "/odata/applications/v1/demo/Connections", headers: headers, body: #"{"ApnsPushEnable":"maybe"}"#)
            #expect(bad.status == 400 && bad.text.contains("ApnsPushEnable"), "\(bad.text)")
        }
    }

    /// A JWT app tells SAP SDK clients where its IdP signs users in, in the flat keys older
    /// clients read and the `oauth2.clients` list newer ones read; a basic app says `basic`.
    @Test func discoveryAnnouncesOAuth2ForAJWTApp() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            var app = configuration.apps["demo"]!
            app.id = "jwt-demo"
            app.authentication = .jwt(
                JWTAuthentication(
                    issuer: "https://idp.example", audience: "midtier", jwks: .url("https://idp.example/jwks"),
                    oauth2: OAuth2Discovery(
                        authorizationEndpoint: "https://idp.example/auth", tokenEndpoint: "https://idp.example/token",
                        endUserUI: "https://idp.example/login",
                        clients: [
                            .init(clientID: "payroll-ios", redirectURL: "com.example.payroll:/cb"),
                            .init(clientID: "payroll-android", redirectURL: "https://m.example/cb"),
                        ])))
            configuration.apps["jwt-demo"] = app
        }) { env in
            let discovery = try await env.call(.GET, "/config/v1/jwt-demo")
            #expect(discovery.status == 200)
            #expect(discovery.json["appID"] as? String == "jwt-demo")
            let auth = (discovery.json["auth"] as? [[String: Any]])?.first
            #expect(auth?["type"] as? String == "oauth2")
            let config = auth?["config"] as? [String: Any]
            #expect(config?["oauth2.authorizationEndpoint"] as? String == "https://idp.example/auth")
            #expect(config?["oauth2.tokenEndpoint"] as? String == "https://idp.example/token")
            #expect(config?["oauth2.endUserUI"] as? String == "https://idp.example/login")
            #expect(config?["oauth2.clientID"] as? String == "payroll-ios")
            #expect(config?["oauth2.grantType"] as? String == "authorization_code")
            let clients = config?["oauth2.clients"] as? [[String: Any]]
            #expect(clients?.map { $0["clientID"] as? String } == ["payroll-ios", "payroll-android"])
            #expect(clients?.map { $0["redirectURL"] as? String } == ["com.example.payroll:/cb", "https://m.example/cb"])
            #expect(clients?.allSatisfy { $0["grantType"] as? String == "authorization_code" } == true)
            let basic = try await env.call(.GET, "/config/v1/demo")
            #expect((basic.json["auth"] as? [[String: Any]])?.first?["type"] as? String == "basic")
            #expect(basic.json["appID"] as? String == "demo")
        }
    }

    @Test func clientConfigurationAndSettingsExchange() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.apps["demo"]!.blockWipingPolicy = BlockWipingPolicy(
                blockWipeEnabled: true, blockDisconnectedPeriod: 30,
                wipeDisconnectedPeriod: 90)
            configuration.apps["demo"]!.passwordPolicy = ["passwordPolicyMinLength": .number(8), "passwordPolicyEnabled": .bool(true)]
            configuration.apps["demo"]!.usagePolicy = ["dataCollectionEnabled": .bool(true), "uploadDataAfterDays": .number(7)]
            configuration.apps["demo"]!.featureVectorPolicies = [
                "featureVectorPolicyAllEnabled": .bool(false), "allowedPolicies": .array([.string("camera")]),
            ]
        }) { env in
            let discovery = try await env.call(.GET, "/config/v1/demo")
            #expect(discovery.status == 200)
            #expect(discovery.json["host"] as? String == "midtier.test")
            #expect(discovery.json["port"] as? Int == 8080)
            #expect(discovery.json["protocol"] as? String == "http")
            #expect((discovery.json["auth"] as? [[String: Any]])?.first?["type"] as? String == "basic")
            #expect(try await env.call(.GET, "/config/v1/nope").status == 404)
            #expect(try await env.call(.GET, "/mobileservices/settingsExchange/v1/demo").status == 401)
            let settings = try await env.call(.GET, "/mobileservices/settingsExchange/v1/demo", headers: [("Authorization", TestUser.alice.basic)])
            #expect(settings.status == 200)
            let exchange = (settings.json["mobileservices"] as? [String: Any])?["settingsExchange"] as? [String: Any]
            let policy = exchange?["blockWipingPolicy"] as? [String: Any]
            #expect(policy?["blockWipeEnabled"] as? Bool == true)
            #expect(policy?["wipeDisconnectedPeriod"] as? Int == 90)
            // As SAP Mobile Services sends them: strings, which the SDK's passcode policy reader takes.
            #expect((exchange?["passwordPolicy"] as? [String: Any])?["passwordPolicyMinLength"] as? String == "8")
            #expect((exchange?["passwordPolicy"] as? [String: Any])?["passwordPolicyEnabled"] as? String == "true")
            #expect(exchange?["logSettings"] != nil)
            #expect((exchange?["usagePolicy"] as? [String: Any])?["dataCollectionEnabled"] as? String == "true")
            #expect((exchange?["usagePolicy"] as? [String: Any])?["uploadDataAfterDays"] as? String == "7")
            #expect((exchange?["featureVectorPolicies"] as? [String: Any])?["featureVectorPolicyAllEnabled"] as? String == "false")
            #expect((exchange?["featureVectorPolicies"] as? [String: Any])?["allowedPolicies"] as? [String] == ["camera"])
        }
    }
}
