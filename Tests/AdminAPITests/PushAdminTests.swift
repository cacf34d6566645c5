import Foundation
import MidtierCore
import MidtierServer
import MidtierStore
import MidtierTestSupport
import NIOHTTP1
import Registrations
import Testing

/// The push notifications through the admin API (`/admin/v1/push/notifications`,
/// docs/admin.md "Push notifications"), as the console's Push pages show and send them, on the
/// real admin listener, on SQLite and PostgreSQL: the list and one notification with their
/// deliveries, the app filter by exact bytes, the bounded limit, the test notification (stored,
/// audited, refused without push or without a registration with a token) and an answer
/// without any app with push.
@Suite(.timeLimit(.minutes(10))) struct PushAdminTests {
    static let alice = UserIdentity.local("alice")
    /// The app with push (APNs only).
    static let pushApp = "demo"

    /// Midtier with `demo` set up for APNs and `plain` without push. No delivery worker runs in
    /// the test environment, so deliveries stay as the test leaves them.
    static func withMidtier(_ kind: StoreKind, push: Bool = true, _ body: (TestEnvironment, any PushStore) async throws -> Void) async throws {
        try await TestEnvironment.withMidtier(
            kind,
            adjust: { configuration in
                if push {
                    configuration.apps[pushApp]?.push = PushSettings(
                        apns: APNsSettings(
                            teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: "unused here", topic: "test.demo",
                            environment: .sandbox, endpoint: "https://127.0.0.1:9"))
                }
                configuration.apps["plain"] = AppConfiguration(id: "plain", destinations: ["echo"])
            }
        ) { env in
            try await body(env, try #require(env.server.registrations.store.pushStore))
        }
    }

    static func register(
        _ env: TestEnvironment, _ id: String, _ user: UserIdentity, app: String = pushApp, apns: String = "",
        state: Registration.State = .active
    ) async throws {
        let registration = Registration(
            id: id, appId: app, user: user, deviceType: "iOS", apnsDeviceToken: apns, createdAt: 1_000, state: state)
        #expect(try await env.server.registrations.store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
    }

    static func notifications(_ reply: TestEnvironment.Reply) -> [[String: Any]] {
        reply.json["notifications"] as? [[String: Any]] ?? []
    }

    /// A JSON value's text with sorted keys, to compare two answers' values.
    static func canonical(_ value: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
    }

    static func ids(_ reply: TestEnvironment.Reply) -> [String] {
        notifications(reply).compactMap { $0["id"] as? String }
    }

    /// Two notifications: `n-1` of demo at 5 s to reg-1 (alice's, its delivery failed at APNs)
    /// and to a registration that is gone (still pending, due at 9 s); `n-2` of `other` at 6 s,
    /// delivered to reg-1.
    static func seed(_ env: TestEnvironment, _ store: any PushStore) async throws {
        try await register(env, "reg-1", alice, apns: "secret-device-token-1")
        try await store.enqueue(
            PushNotificationRecord(
                id: "n-1", app: pushApp, sender: "erp<script>x</script>",
                payload: #"{"alert":"<img src=x onerror=alert(1)>","data":{"order":"4711"},"badge":3}"#, createdAt: 5_000),
            registrations: ["reg-1", "gone-1"])
        try await store.enqueue(
            PushNotificationRecord(id: "n-2", app: "other", sender: "crm", payload: #"{"alert":"b"}"#, createdAt: 6_000),
            registrations: ["reg-1"])
        let claimed = try await store.claimPushDeliveries(owner: "test", now: Int64.max / 2, leaseUntil: Int64.max / 2 + 1, limit: 10)
        #expect(claimed.count == 3)
        for delivery in claimed {
            let outcome: PushDeliveryOutcome =
                switch (delivery.notification.id, delivery.registration) {
                case ("n-1", "reg-1"): .failed(.apns, reason: "400 BadDeviceToken")
                case ("n-1", _): .retry(at: 9_000, provider: nil, reason: "waiting: no place")
                default: .delivered(.apns)
                }
            #expect(
                try await store.finishPushDelivery(
                    notification: delivery.notification.id, registration: delivery.registration, owner: "test",
                    outcome: outcome, now: 7_000))
        }
    }

    @Test(arguments: StoreKind.allCases) func theListAndOneNotificationShowTheDeliveries(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store in
            try await Self.seed(env, store)
            let all = try await env.admin(.GET, "/admin/v1/push/notifications")
            #expect(all.status == 200, "\(all.text)")
            #expect(all.header("Content-Type")?.hasPrefix("application/json") == true)
            #expect(Self.ids(all) == ["n-2", "n-1"], "newest first: \(all.text)")
            #expect(!all.text.contains("secret-device-token-1"), "a delivery never shows a token")

            let first = try #require(Self.notifications(all).last)
            #expect(first["id"] as? String == "n-1" && first["app"] as? String == Self.pushApp)
            #expect(first["sender"] as? String == "erp<script>x</script>", "the sender's name as it is, for the client to escape")
            #expect(first["createdAt"] as? String == "1970-01-01T00:00:05Z")
            #expect(first["status"] as? String == "QUEUED", "one delivery still pending")
            let sent = try #require(first["notification"] as? [String: Any])
            #expect(sent["alert"] as? String == "<img src=x onerror=alert(1)>" && sent["badge"] as? Int == 3)
            #expect((sent["data"] as? [String: Any])?["order"] as? String == "4711")
            #expect(first["deliveryCount"] as? Int == 2)
            let states = try #require(first["deliveryStates"] as? [String: Int])
            #expect(states == ["pending": 1, "delivered": 0, "failed": 1, "skipped": 0])
            // By registration id's bytes: gone-1, then reg-1.
            let deliveries = try #require(first["deliveries"] as? [[String: Any]])
            #expect(deliveries.compactMap { $0["registration"] as? String } == ["gone-1", "reg-1"])
            let pending = deliveries[0], failed = deliveries[1]
            #expect(pending["state"] as? String == "pending" && pending["attempts"] as? Int == 1)
            #expect(pending["provider"] is NSNull && pending["reason"] as? String == "waiting: no place")
            #expect(pending["nextAttemptAt"] as? String == "1970-01-01T00:00:09Z")
            #expect(failed["state"] as? String == "failed" && failed["attempts"] as? Int == 1 && failed["provider"] as? String == "apns")
            #expect(failed["reason"] as? String == "400 BadDeviceToken" && failed["updatedAt"] as? String == "1970-01-01T00:00:07Z")
            #expect(failed["nextAttemptAt"] is NSNull, "only a pending delivery is due again")
            let other = try #require(Self.notifications(all).first)
            #expect(other["status"] as? String == "SENT")

            // One notification: the same as in the list.
            let one = try await env.admin(.GET, "/admin/v1/push/notifications/n-1")
            #expect(one.status == 200, "\(one.text)")
            #expect(try Self.canonical(one.json) == Self.canonical(first), "\(one.text)")
            let encoded = try await env.admin(.GET, "/admin/v1/push/notifications/n%2D1")
            #expect(encoded.json["id"] as? String == "n-1", "the id is percent-decoded")

            // Unknown (or purged), an id no notification can have, a malformed percent-encoding.
            let unknown = try await env.admin(.GET, "/admin/v1/push/notifications/n-3")
            #expect(unknown.status == 404 && unknown.errorMessage?.contains("n-3 does not exist") == true, "\(unknown.text)")
            #expect((unknown.json["error"] as? [String: Any])?["code"] as? String == "NOT_FOUND")
            #expect(try await env.admin(.GET, "/admin/v1/push/notifications/n%001").status == 404)
            // Sent as typed (AsyncHTTPClient would not send a malformed percent-encoding).
            let malformed = try await runOffThePool(
                "/usr/bin/curl",
                [
                    "-s", "--path-as-is", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer \(TestEnvironment.adminToken)",
                    "http://127.0.0.1:\(env.adminPort)/admin/v1/push/notifications/%zz",
                ])
            #expect(malformed.output == "400", "a malformed percent-encoding: \(malformed.output)")

            // Only with the admin token.
            #expect(try await env.admin(.GET, "/admin/v1/push/notifications", token: nil).status == 401)
            #expect(try await env.admin(.GET, "/admin/v1/push/notifications/n-1", token: "wrong").status == 401)
        }
    }

    @Test(arguments: StoreKind.allCases) func theListIsFilteredByTheAppsExactBytesAndBounded(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store in
            // "café" composed and decomposed: canonically equal, other bytes, other apps.
            let apps = ["caf\u{E9}", "cafe\u{301}", "demo", "Demo"]
            for (index, app) in apps.enumerated() {
                try await store.enqueue(
                    PushNotificationRecord(
                        id: "n-\(index)", app: app, sender: "erp", payload: #"{"alert":"a"}"#, createdAt: 1_000 * Int64(index + 1)),
                    registrations: ["r"])
            }
            let filtered: [(String, [String])] = [
                ("", ["n-3", "n-2", "n-1", "n-0"]),
                ("?app=", ["n-3", "n-2", "n-1", "n-0"]),
                ("?app=caf%C3%A9", ["n-0"]),
                ("?app=cafe%CC%81", ["n-1"]),
                ("?app=demo", ["n-2"]),
                ("?app=Demo", ["n-3"]),
                ("?app=DEMO", []),
                ("?app=caf", []),
                ("?limit=1", ["n-3"]),
                ("?limit=2&app=demo", ["n-2"]),
                ("?limit=100", ["n-3", "n-2", "n-1", "n-0"]),
            ]
            for (query, expected) in filtered {
                let reply = try await env.admin(.GET, "/admin/v1/push/notifications\(query)")
                #expect(reply.status == 200, "\(query): \(reply.status) \(reply.text)")
                #expect(Self.ids(reply) == expected, "\(query)")
            }
            for bad in ["0", "101", "-1", "x", "", "1.5", "99999999999999999999"] {
                let reply = try await env.admin(.GET, "/admin/v1/push/notifications?limit=\(bad)")
                #expect(reply.status == 400, "limit=\(bad): \(reply.status)")
                #expect(reply.errorMessage == "limit must be between 1 and 100", "limit=\(bad): \(reply.text)")
            }
            for bad in ["de%00mo", "de%7Fmo", "%C2%85", "a%0Ab"] {
                let reply = try await env.admin(.GET, "/admin/v1/push/notifications?app=\(bad)")
                #expect(reply.status == 400, "app=\(bad): \(reply.status)")
                #expect(reply.errorMessage == "app contains control characters", "app=\(bad): \(reply.text)")
            }
        }
    }

    /// A notification to 1 200 registrations: the list and the notification answer its first
    /// 500 deliveries by registration id's bytes and exact counts per state (issue 38: never
    /// every delivery read); the notification's deliveries page with `limit` and `after`
    /// (`deliveriesNext`) as the registrations list does, each once; bad paging is a 400.
    @Test(arguments: StoreKind.allCases) func manyDeliveriesAreShownAPageAtATimeWithExactCounts(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store in
            let registrations = (0..<1_200).map { String(format: "reg-%04d", $0) }
            try await store.enqueue(
                PushNotificationRecord(id: "big", app: Self.pushApp, sender: "erp", payload: #"{"alert":"a"}"#, createdAt: 5_000),
                registrations: registrations)
            try await store.enqueue(
                PushNotificationRecord(id: "small", app: Self.pushApp, sender: "erp", payload: #"{"alert":"b"}"#, createdAt: 6_000),
                registrations: ["reg-0001"])
            // By registration id: every third delivered, every fifth of the rest failed.
            let claimed = try await store.claimPushDeliveries(owner: "test", now: 5_000, leaseUntil: 99_000, limit: 2_000)
            #expect(claimed.count == 1_200)
            var delivered = 0, failed = 0
            for delivery in claimed {
                let number = Int(delivery.registration.dropFirst(4)) ?? 0
                let outcome: PushDeliveryOutcome
                if number % 3 == 0 {
                    outcome = .delivered(.apns)
                    delivered += 1
                } else if number % 5 == 0 {
                    outcome = .failed(.apns, reason: "400 BadDeviceToken")
                    failed += 1
                } else {
                    continue
                }
                #expect(
                    try await store.finishPushDelivery(
                        notification: "big", registration: delivery.registration, owner: "test", outcome: outcome, now: 7_000))
            }
            let expectedStates = ["pending": 1_200 - delivered - failed, "delivered": delivered, "failed": failed, "skipped": 0]
            #expect(delivered == 400 && failed == 160)

            func registrationsOf(_ notification: [String: Any]) -> [String] {
                (notification["deliveries"] as? [[String: Any]] ?? []).compactMap { $0["registration"] as? String }
            }
            // The list: the first 500 of each, counted whole.
            let list = try await env.admin(.GET, "/admin/v1/push/notifications")
            #expect(list.status == 200, "\(list.text.prefix(300))")
            let listed = try #require(Self.notifications(list).first { $0["id"] as? String == "big" })
            #expect(registrationsOf(listed) == Array(registrations.prefix(500)))
            #expect(listed["deliveryCount"] as? Int == 1_200)
            #expect(listed["deliveryStates"] as? [String: Int] == expectedStates)
            #expect(listed["status"] as? String == "QUEUED")
            #expect(listed["deliveriesNext"] as? String == "r1.reg-0499")
            let small = try #require(Self.notifications(list).first { $0["id"] as? String == "small" })
            #expect(small["deliveryCount"] as? Int == 1 && small["deliveriesNext"] == nil, "one delivery, nothing more to read")

            // The notification: the same first page, then the rest with after.
            let one = try await env.admin(.GET, "/admin/v1/push/notifications/big")
            #expect(try Self.canonical(one.json) == Self.canonical(listed), "\(one.text.prefix(300))")
            var walked: [String] = []
            var sizes: [Int] = []
            var after: String? = nil
            repeat {
                let query = "?limit=500" + (after.map { "&after=\($0)" } ?? "")
                let page = try await env.admin(.GET, "/admin/v1/push/notifications/big\(query)")
                #expect(page.status == 200, "\(query): \(page.text.prefix(300))")
                #expect(page.json["deliveryCount"] as? Int == 1_200 && page.json["deliveryStates"] as? [String: Int] == expectedStates)
                walked += registrationsOf(page.json)
                sizes.append(registrationsOf(page.json).count)
                after = page.json["deliveriesNext"] as? String
            } while after != nil && sizes.count < 10
            #expect(sizes == [500, 500, 200], "pages of 500 over 1 200 deliveries, the last without deliveriesNext")
            #expect(walked == registrations, "each delivery once, by registration id's bytes")
            let few = try await env.admin(.GET, "/admin/v1/push/notifications/big?limit=7&after=r1.reg-1195")
            #expect(registrationsOf(few.json) == ["reg-1196", "reg-1197", "reg-1198", "reg-1199"] && few.json["deliveriesNext"] == nil)
            let firstSeven = try await env.admin(.GET, "/admin/v1/push/notifications/big?limit=7&after=")
            #expect(
                registrationsOf(firstSeven.json) == Array(registrations.prefix(7)) && firstSeven.json["deliveriesNext"] as? String == "r1.reg-0006")

            // Bad paging: a 400 naming it.
            for bad in ["limit=0", "limit=501", "limit=", "limit=x", "limit=1.5", "limit=1&limit=2"] {
                let reply = try await env.admin(.GET, "/admin/v1/push/notifications/big?\(bad)")
                #expect(reply.status == 400, "\(bad): \(reply.status)")
                #expect(reply.errorMessage?.hasPrefix("limit ") == true, "\(bad): \(reply.text)")
            }
            for bad in ["after=reg-0001", "after=r1.", "after=r1.a%00b", "after=r2.reg-0001", "after=r1.a&after=r1.b"] {
                let reply = try await env.admin(.GET, "/admin/v1/push/notifications/big?\(bad)")
                #expect(reply.status == 400, "\(bad): \(reply.status)")
                #expect(reply.errorMessage?.hasPrefix("after ") == true, "\(bad): \(reply.text)")
            }
            #expect(try await env.admin(.GET, "/admin/v1/push/notifications/nope?limit=1").status == 404)
        }
    }

    @Test(arguments: StoreKind.allCases) func aTestNotificationGoesToTheUsersRegistrationsWithTokensAndIsAudited(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store in
            try await Self.register(env, "a-phone", Self.alice, apns: "tok-a")
            try await Self.register(env, "a-second", Self.alice, apns: "tok-b")
            try await Self.register(env, "a-notoken", Self.alice)
            try await Self.register(env, "a-locked", Self.alice, apns: "tok-c", state: .locked)
            try await Self.register(env, "a-plain", Self.alice, app: "plain", apns: "tok-d")
            try await Self.register(env, "b-phone", .local("bob"), apns: "tok-e")
            try await Self.register(env, "idp-phone", UserIdentity(realm: "https://idp.test", id: "alice"), apns: "tok-f")

            let sent = try await env.admin(
                .POST, "/admin/v1/push/notifications", body: #"{"userId":"alice","app":"demo","alert":"  Hello <b>there  "}"#)
            #expect(sent.status == 201, "\(sent.text)")
            let id = try #require(sent.json["id"] as? String)
            #expect(sent.header("Location") == "/admin/v1/push/notifications/\(id)")
            #expect(sent.json["sender"] as? String == "console:admin#2" && sent.json["app"] as? String == "demo")
            #expect(sent.json["status"] as? String == "QUEUED")
            #expect((sent.json["notification"] as? [String: Any])?["alert"] as? String == "Hello <b>there")
            let deliveries = try #require(sent.json["deliveries"] as? [[String: Any]])
            #expect(deliveries.compactMap { $0["registration"] as? String } == ["a-phone", "a-second"])
            #expect(deliveries.allSatisfy { $0["state"] as? String == "pending" && $0["attempts"] as? Int == 0 })
            #expect(!sent.text.contains("tok-"), "no token in the answer")
            let (record, stored) = try #require(try await store.pushNotification(id: id))
            #expect(record.sender == "console:admin#2" && Set(stored.map(\.registration)) == ["a-phone", "a-second"])

            let read = try await env.admin(.GET, try #require(sent.header("Location")))
            #expect(read.status == 200 && read.json["id"] as? String == id, "\(read.text)")
            #expect(Self.ids(try await env.admin(.GET, "/admin/v1/push/notifications")) == [id])

            let audit = try await env.server.registrations.store.recentAudit(before: nil, about: nil, limit: 10)
            let entries = audit.filter { $0.action == "push.test" }
            #expect(entries.count == 1)
            #expect(entries.first?.actor == "admin#2" && entries.first?.target == Self.alice.description)
            #expect(entries.first?.detail == "notification \(id) in demo to 2 registration(s)")

            // An identity provider's user, by realm.
            let idp = try await env.admin(
                .POST, "/admin/v1/push/notifications", body: #"{"userId":"alice","realm":"https://idp.test","app":"demo","alert":"hi"}"#)
            #expect(idp.status == 201, "\(idp.text)")
            #expect((idp.json["deliveries"] as? [[String: Any]])?.compactMap { $0["registration"] as? String } == ["idp-phone"])
        }
    }

    @Test(arguments: StoreKind.allCases) func aTestNotificationIsRefusedNamingWhy(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store in
            try await Self.register(env, "a-notoken", Self.alice)
            try await Self.register(env, "a-plain", Self.alice, app: "plain", apns: "tok-d")
            try await Self.register(env, "b-phone", .local("bob"), apns: "tok-e")
            let refused: [(String, Int, String)] = [
                (#"{"userId":"alice","app":"plain","alert":"hi"}"#, 404, "application plain has no push notifications"),
                (#"{"userId":"alice","app":"demo","alert":"hi"}"#, 404, "has no active registration"),
                (#"{"userId":"bob","app":"nope","alert":"hi"}"#, 404, "application nope is not configured"),
                (#"{"userId":"bob","realm":"https://idp.test","app":"demo","alert":"hi"}"#, 404, "has no active registration"),
                (#"{"userId":"BOB","app":"demo","alert":"hi"}"#, 404, "has no active registration"),
                (#"{"userId":"bob","app":"Demo","alert":"hi"}"#, 404, "application Demo is not configured"),
                (#"{"userId":"bob","app":"demo","alert":"\#(String(repeating: "x", count: 201))"}"#, 400, "at most 200"),
                (#"{"userId":"bob","app":"demo","alert":"\#(String(repeating: "é", count: 201))"}"#, 400, "at most 200"),
                (#"{"userId":"bob","app":"demo","alert":"a\nb"}"#, 400, "alert contains control characters"),
                (#"{"userId":"bob","app":"demo","alert":"a\u0000b"}"#, 400, "alert contains control characters"),
                (#"{"userId":"bob","app":"demo","alert":" \u00A0 "}"#, 400, "alert has nothing but white space"),
                (#"{"userId":"bob","app":"demo","alert":""}"#, 400, "alert is empty"),
                (#"{"userId":"bob","app":"demo"}"#, 400, "alert is missing"),
                (#"{"app":"demo","alert":"hi"}"#, 400, "userId is missing"),
                (#"{"userId":"","app":"demo","alert":"hi"}"#, 400, "userId is empty"),
                (#"{"userId":"b\u001Bob","app":"demo","alert":"hi"}"#, 400, "userId contains control characters"),
                (#"{"userId":"bob","realm":"x\u0085","app":"demo","alert":"hi"}"#, 400, "realm contains control characters"),
                (#"{"userId":"bob","app":"de\u007Fmo","alert":"hi"}"#, 400, "app contains control characters"),
                (#"{"userId":7,"app":"demo","alert":"hi"}"#, 400, "userId must be a string"),
                (#"{"userId":"bob","realm":null,"app":"demo","alert":"hi"}"#, 400, "realm must be a string"),
                (#"{"userId":"bob","app":"demo","alert":"hi","title":"x"}"#, 400, "unknown member title"),
                (#"{"userId":"bob","userId":"alice","app":"demo","alert":"hi"}"#, 400, "the body must be a JSON object"),
                (#"["bob"]"#, 400, "the body must be a JSON object"),
                ("userId=bob", 400, "the body must be a JSON object"),
            ]
            for (body, status, message) in refused {
                let reply = try await env.admin(.POST, "/admin/v1/push/notifications", body: body)
                #expect(reply.status == status, "\(body.prefix(80)): \(reply.status) \(reply.text)")
                #expect(reply.errorMessage?.contains(message) == true, "\(body.prefix(80)): \(reply.text)")
            }
            // Nothing was stored or audited by any of these.
            #expect(try await store.recentPushNotifications(app: nil, limit: 10).isEmpty)
            let audit = try await env.server.registrations.store.recentAudit(before: nil, about: nil, limit: 50)
            #expect(!audit.contains { $0.action == "push.test" })
            // Control: 200 code points go through (with the admin token only).
            let longest = #"{"userId":"bob","realm":"","app":"demo","alert":"\#(String(repeating: "é", count: 200))"}"#
            #expect(try await env.admin(.POST, "/admin/v1/push/notifications", body: longest, token: nil).status == 401)
            let sent = try await env.admin(.POST, "/admin/v1/push/notifications", body: longest)
            #expect(sent.status == 201, "\(sent.text)")
        }
    }

    /// Without any app with push, there is nothing to list and nothing to send to.
    @Test(arguments: StoreKind.allCases) func withoutPushConfiguredTheListIsEmptyAndATestIsNotFound(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind, push: false) { env, store in
            try await Self.register(env, "b-phone", .local("bob"), apns: "tok-e")
            let list = try await env.admin(.GET, "/admin/v1/push/notifications")
            #expect(list.status == 200 && Self.notifications(list).isEmpty && list.json["notifications"] != nil, "\(list.text)")
            let sent = try await env.admin(.POST, "/admin/v1/push/notifications", body: #"{"userId":"bob","app":"demo","alert":"hi"}"#)
            #expect(sent.status == 404 && sent.errorMessage?.contains("application demo has no push notifications") == true, "\(sent.text)")
            #expect(try await store.recentPushNotifications(app: nil, limit: 10).isEmpty)
            #expect(try await env.admin(.GET, "/admin/v1/push/notifications/anything").status == 404)
        }
    }

    /// Every method the paths do not serve is 405 naming the ones they do.
    @Test func otherMethodsAreNotAllowed() async throws {
        try await TestEnvironment.with { env in
            let list = try await env.admin(.DELETE, "/admin/v1/push/notifications")
            let allowed = list.header("Allow").map { Set($0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) }
            #expect(list.status == 405 && allowed == ["GET", "POST"], "\(list.headers)")
            let one = try await env.admin(.POST, "/admin/v1/push/notifications/n-1", body: "{}")
            #expect(one.status == 405 && one.header("Allow") == "GET", "\(one.headers)")
        }
    }
}
