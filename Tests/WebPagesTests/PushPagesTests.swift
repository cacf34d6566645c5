import Administration
import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierServer
import MidtierStore
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import Registrations
import Testing

/// The console's Push pages (docs/console.md, "Push") on the real admin listener, on SQLite and
/// PostgreSQL: recent notifications and a notification's deliveries, with sender- and
/// device-supplied text escaped; the test notification, sent to the user's registrations that
/// hold a token, audited, refused without push or without such a registration, and only with
/// the session's CSRF token.
@Suite(.timeLimit(.minutes(10))) struct PushPagesTests {
    static let alice = UserIdentity.local("alice")
    /// The app with push (APNs only: an Android token does not count there).
    static let pushApp = "demo"

    /// Midtier with `demo` set up for APNs and `plain` without push, and a client. No delivery worker runs in
    /// the test environment, so deliveries stay as the test leaves them.
    static func withMidtier(_ kind: StoreKind, _ body: (TestEnvironment, any PushStore, HTTPClient) async throws -> Void) async throws {
        try await withTestStore(kind) { test in
            try await TestEnvironment.with(adjust: { configuration, _, _ in
                if let postgres = test.postgres { configuration.server.store = .postgres(postgres) }
                configuration.apps[pushApp]?.push = PushSettings(
                    apns: APNsSettings(
                        teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: "unused here", topic: "test.demo", environment: .sandbox,
                        endpoint: "https://127.0.0.1:9"))
                configuration.apps["plain"] = AppConfiguration(id: "plain", destinations: ["echo"])
            }) { env in
                let store = try #require(env.server.registrations.store.pushStore)
                // Redirects not followed: a form's answer is a 303 to the page it shows next.
                let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
                do {
                    try await body(env, store, client)
                } catch {
                    try await client.shutdown()
                    throw error
                }
                try await client.shutdown()
            }
        }
    }

    static func register(
        _ env: TestEnvironment, _ id: String, _ user: UserIdentity, app: String = pushApp, apns: String = "",
        fcm: String = "", state: Registration.State = .active
    ) async throws {
        let registration = Registration(
            id: id, appId: app, user: user, deviceType: "iOS", apnsDeviceToken: apns,
            androidGcmRegistrationId: fcm, createdAt: 1_000, state: state)
        #expect(try await env.server.registrations.store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
    }

    @Test func overallStatusIsSAPs() {
        func delivery(_ state: PushDeliveryState) -> PushDeliveryRecord {
            PushDeliveryRecord(
                notification: "n", registration: "r", state: state, attempts: 0, nextAttemptAt: 0, updatedAt: 0,
                provider: nil, reason: "")
        }
        #expect(Administration.overallPushStatus([delivery(.delivered), delivery(.pending)]) == "QUEUED")
        #expect(Administration.overallPushStatus([delivery(.failed), delivery(.delivered), delivery(.skipped)]) == "SENT")
        #expect(Administration.overallPushStatus([delivery(.failed), delivery(.skipped)]) == "ERROR")
        #expect(Administration.overallPushStatus([]) == "ERROR")
    }

    @Test(arguments: StoreKind.allCases) func pagesShowNotificationsAndDeliveriesEscaped(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store, client in
            try await Self.register(env, "reg-1", Self.alice, apns: "tok-1")
            let hostile = PushNotificationRecord(
                id: "n-1", app: Self.pushApp, sender: "erp<script>x</script>",
                payload: #"{"alert":"<img src=x onerror=alert(1)>"}"#, createdAt: 5_000)
            try await store.enqueue(hostile, registrations: ["reg-1", "gone-<i>1</i>"])
            try await store.enqueue(
                PushNotificationRecord(
                    id: "n-2", app: "other", sender: "crm", payload: #"{"alert":"b"}"#,
                    createdAt: 6_000), registrations: ["gone-<i>1</i>"])
            // One delivery failed for a push service's reason, one still pending.
            let claimed = try await store.claimPushDeliveries(owner: "test", now: Int64.max / 2, leaseUntil: Int64.max / 2 + 1, limit: 10)
            let first = try #require(claimed.first { $0.notification.id == "n-1" && $0.registration == "reg-1" })
            #expect(
                try await store.finishPushDelivery(
                    notification: "n-1", registration: first.registration, owner: "test",
                    outcome: .failed(.apns, reason: "BadDeviceToken <b>"), now: 7_000))
            for other in claimed where other.registration != first.registration || other.notification.id != "n-1" {
                _ = try await store.finishPushDelivery(
                    notification: other.notification.id, registration: other.registration, owner: "test",
                    outcome: .retry(at: 0, provider: nil, reason: ""), now: 7_000)
            }

            let console = try await ConsoleSession.signIn(env, client, formPage: "/console/push")
            let list = try await console.call(client, .GET, "/console/push")
            #expect(list.status == 200, "\(list.text.prefix(300))")
            #expect(list.text.contains(#"aria-current="page">Push</a>"#))
            // Newest first, each with its overall status.
            let rows = list.text.components(separatedBy: #"<tr class="push-notification">"#).dropFirst()
            #expect(rows.count == 2)
            #expect(rows.first?.contains(">n-2</a>") == true && rows.first?.contains("QUEUED") == true)
            #expect(rows.last?.contains(">n-1</a>") == true && rows.last?.contains("QUEUED") == true)
            #expect(!list.text.contains("<script>x"))
            #expect(list.text.contains("erp&lt;script&gt;x&lt;/script&gt;"))

            let filtered = try await console.call(client, .GET, "/console/push?app=other")
            #expect(filtered.text.contains(">n-2</a>") && !filtered.text.contains(">n-1</a>"), "\(filtered.text.prefix(300))")

            let detail = try await console.call(client, .GET, "/console/push/notification?id=n-1")
            #expect(detail.status == 200, "\(detail.text.prefix(300))")
            #expect(!detail.text.contains("<img") && !detail.text.contains("<b>") && !detail.text.contains("<i>"))
            #expect(detail.text.contains("&lt;img src=x onerror=alert(1)&gt;"))
            #expect(detail.text.contains("BadDeviceToken &lt;b&gt;"))
            // The known registration links to its user's registrations; the gone one is plain text.
            #expect(detail.text.contains(#"<a href="/console/registrations?user=alice">reg-1</a>"#), "\(detail.text)")
            #expect(detail.text.contains("<td class=\"mono\">gone-&lt;i&gt;1&lt;/i&gt;</td>"))
            #expect(detail.text.contains(">failed<") && detail.text.contains(">apns<") && detail.text.contains(">pending<"))

            let missing = try await console.call(client, .GET, "/console/push/notification?id=nope")
            #expect(missing.status == 404)
            let signedOut = try await ConsoleSession(base: console.base, cookie: "").call(client, .GET, "/console/push")
            #expect(signedOut.status == 303)
        }
    }

    /// The notification ids of a Push page's table, in order.
    static func notificationRows(_ page: TestEnvironment.Reply) -> [String] {
        page.text.components(separatedBy: #"<tr class="push-notification"><td class="mono"><a href=""#).dropFirst().map { row in
            String(row.drop { $0 != ">" }.dropFirst().prefix { $0 != "<" })
        }
    }

    /// The registrations of a notification page's deliveries, in order (none of them exists, so
    /// none is a link).
    static func deliveryRows(_ page: TestEnvironment.Reply) -> [String] {
        page.text.components(separatedBy: #"<tr class="push-delivery"><td class="mono">"#).dropFirst().map { String($0.prefix { $0 != "<" }) }
    }

    /// The Push page 50 at a time, newest first, with Older and Newest links that keep the
    /// app; a notification's page its deliveries 500 at a time with exact counts of all of
    /// them (issue 38); a malformed cursor is a 400.
    @Test(arguments: StoreKind.allCases) func thePushPagesGoOnAPageAtATime(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store, client in
            var demo: [String] = []
            for index in 0..<57 {
                let app = index % 20 == 7 ? "other" : Self.pushApp
                let id = String(format: "n-%02d", index)
                try await store.enqueue(
                    PushNotificationRecord(id: id, app: app, sender: "erp", payload: #"{"alert":"a"}"#, createdAt: 1_000 + Int64(index)),
                    registrations: ["r-1"])
                if app == Self.pushApp { demo.append(id) }
            }
            #expect(demo.count == 54)
            let registrations = (0..<1_200).map { String(format: "reg-%04d", $0) }
            try await store.enqueue(
                PushNotificationRecord(id: "big", app: "other", sender: "erp", payload: #"{"alert":"b"}"#, createdAt: 500),
                registrations: registrations)
            let claimed = try await store.claimPushDeliveries(owner: "test", now: 500, leaseUntil: 99_000, limit: 2_000)
            #expect(claimed.count == 1_200)
            for delivery in claimed.prefix(300) {
                #expect(
                    try await store.finishPushDelivery(
                        notification: "big", registration: delivery.registration, owner: "test", outcome: .delivered(.apns), now: 600))
            }
            let console = try await ConsoleSession.signIn(env, client, formPage: "/console/push")

            var seen: [String] = []
            var sizes: [Int] = []
            var path = "/console/push?app=demo"
            for _ in 0..<10 {
                let page = try await console.call(client, .GET, path)
                #expect(page.status == 200, "\(path): \(page.status)")
                seen += Self.notificationRows(page)
                sizes.append(Self.notificationRows(page).count)
                if sizes.count > 1 {
                    #expect(ConsoleRegistrationPagesTests.link(page, "newest") == "/console/push?app=demo", "\(page.text)")
                } else {
                    #expect(ConsoleRegistrationPagesTests.link(page, "newest") == nil)
                }
                guard let older = ConsoleRegistrationPagesTests.link(page, "older") else { break }
                #expect(older.hasPrefix("/console/push?app=demo&after="), "\(older)")
                path = older
            }
            #expect(sizes == [50, 4])
            #expect(seen == demo.reversed(), "newest first, each once, of demo only")
            // Every app: the big one, the oldest, is on the second page with its deliveries counted.
            let second = try await console.call(
                client, .GET, try #require(ConsoleRegistrationPagesTests.link(try await console.call(client, .GET, "/console/push"), "older")))
            #expect(Self.notificationRows(second).last == "big" && second.text.contains("<td>1200</td>"), "\(second.text)")
            let bad = try await console.call(client, .GET, "/console/push?after=nonsense")
            #expect(bad.status == 400 && bad.text.contains("after is malformed"), "\(bad.status) \(bad.text.prefix(500))")

            // The big notification's page: 500 deliveries at a time, every one counted.
            var delivered: [String] = []
            var deliverySizes: [Int] = []
            path = "/console/push/notification?id=big"
            for _ in 0..<10 {
                let page = try await console.call(client, .GET, path)
                #expect(page.status == 200, "\(path): \(page.status)")
                #expect(
                    page.text.contains(
                        #"1200 deliveries: <span class="delivery-state">pending 900</span> <span class="delivery-state">delivered 300</span>"#
                    ), "\(page.text.prefix(2_000))")
                #expect(page.text.contains("QUEUED"))
                delivered += Self.deliveryRows(page)
                deliverySizes.append(Self.deliveryRows(page).count)
                if deliverySizes.count > 1 {
                    #expect(ConsoleRegistrationPagesTests.link(page, "first-deliveries") == "/console/push/notification?id=big")
                }
                guard let next = ConsoleRegistrationPagesTests.link(page, "next-deliveries") else { break }
                #expect(next.hasPrefix("/console/push/notification?id=big&after=r1."), "\(next)")
                path = next
            }
            #expect(deliverySizes == [500, 500, 200])
            #expect(delivered == registrations)
            let badAfter = try await console.call(client, .GET, "/console/push/notification?id=big&after=nonsense")
            #expect(badAfter.status == 400 && badAfter.text.contains("after is malformed"), "\(badAfter.status)")
        }
    }

    @Test(arguments: StoreKind.allCases) func testNotificationGoesToTheUsersRegistrationsWithTokensAndIsAudited(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store, client in
            let bob = UserIdentity.local("bob")
            try await Self.register(env, "a-phone", Self.alice, apns: "tok-a")
            try await Self.register(env, "a-second", Self.alice, apns: "tok-b")
            try await Self.register(env, "a-android", Self.alice, fcm: "fcm-a")  // demo has no FCM
            try await Self.register(env, "a-notoken", Self.alice)
            try await Self.register(env, "a-locked", Self.alice, apns: "tok-c", state: .locked)
            try await Self.register(env, "a-plain", Self.alice, app: "plain", apns: "tok-d")
            try await Self.register(env, "b-phone", bob, apns: "tok-e")
            try await Self.register(env, "idp-phone", UserIdentity(realm: "https://idp.test", id: "alice"), apns: "tok-f")

            let console = try await ConsoleSession.signIn(env, client, formPage: "/console/push")
            let sent = try await console.call(
                client, .POST, "/console/push/test",
                body: "csrf=\(console.csrf)&realm=&userId=alice&app=demo&alert=Hello+%3Cb%3Ethere")
            #expect(sent.status == 303, "\(sent.text.prefix(300))")
            let location = try #require(sent.header("Location"))
            #expect(location.hasPrefix("/console/push/notification?id="))
            let id = String(location.dropFirst("/console/push/notification?id=".count))
            let (record, deliveries) = try #require(try await store.pushNotification(id: id))
            #expect(Set(deliveries.map(\.registration)) == ["a-phone", "a-second"])
            #expect(deliveries.allSatisfy { $0.state == .pending })
            #expect(record.app == "demo" && record.sender == "console:admin#2")
            #expect(record.payload == #"{"alert":"Hello <b>there"}"#)

            let page = try await console.call(client, .GET, location)
            #expect(page.status == 200 && page.text.contains("Hello &lt;b&gt;there") && page.text.contains("a-second"))

            let audit = try await env.server.registrations.store.recentAudit(before: nil, about: .user(Self.alice), limit: 10)
            let entry = try #require(audit.first { $0.action == "push.test" })
            #expect(entry.actor == "admin#2" && entry.target == Self.alice.description && entry.detail.contains(id))
        }
    }

    @Test(arguments: StoreKind.allCases) func testNotificationIsRefusedWithoutPushRegistrationsOrCSRF(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env, store, client in
            try await Self.register(env, "a-notoken", Self.alice)
            try await Self.register(env, "a-plain", Self.alice, app: "plain", apns: "tok-d")
            try await Self.register(env, "b-phone", UserIdentity.local("bob"), apns: "tok-e")
            let console = try await ConsoleSession.signIn(env, client, formPage: "/console/push")

            func post(_ body: String) async throws -> TestEnvironment.Reply {
                try await console.call(client, .POST, "/console/push/test", body: body)
            }
            let noPush = try await post("csrf=\(console.csrf)&realm=&userId=alice&app=plain&alert=hi")
            #expect(noPush.status == 404 && noPush.text.contains("application plain has no push notifications"), "\(noPush.text)")
            let noRegistration = try await post("csrf=\(console.csrf)&realm=&userId=alice&app=demo&alert=hi")
            #expect(noRegistration.status == 404 && noRegistration.text.contains("has no active registration"), "\(noRegistration.text)")
            let tooLong = try await post("csrf=\(console.csrf)&realm=&userId=bob&app=demo&alert=\(String(repeating: "x", count: 201))")
            #expect(tooLong.status == 400 && tooLong.text.contains("at most 200"), "\(tooLong.text)")
            let unknownApp = try await post("csrf=\(console.csrf)&realm=&userId=bob&app=nope&alert=hi")
            #expect(unknownApp.status == 404)
            let withoutToken = try await post("realm=&userId=bob&app=demo&alert=hi")
            #expect(withoutToken.status == 403, "\(withoutToken.status) \(withoutToken.text.prefix(300))")
            let wrongToken = try await post("csrf=\(console.csrf.dropLast())x&realm=&userId=bob&app=demo&alert=hi")
            #expect(wrongToken.status == 403)
            // Nothing was stored or audited by any of these.
            #expect(try await store.recentPushNotifications(app: nil, limit: 10).isEmpty)
            let audit = try await env.server.registrations.store.recentAudit(before: nil, about: nil, limit: 50)
            #expect(!audit.contains { $0.action == "push.test" })
            // The same form with the token goes through.
            let sent = try await post("csrf=\(console.csrf)&realm=&userId=bob&app=demo&alert=hi")
            #expect(sent.status == 303)
        }
    }
}
