import MidtierCore
import MidtierStore
import MidtierTestSupport
import PushAPI
import Testing

/// A notification's recipients (docs/push.md, "Sending"), read from the store a page at a time.
@Suite struct PushRecipientsTests {
    /// The app's active registrations with a token for one of its push services, every page
    /// of them: with pages of 2, seven registrations take four reads, and none is lost at a
    /// page's end (nor one without a token, of another app, or locked kept).
    @Test(arguments: StoreKind.allCases) func everyPageIsRead(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: true)
            var app = AppConfiguration(id: "demo")
            app.push.apns = APNsSettings(
                teamID: "TEAMAAAAAA", keyID: "KEY1234567", privateKeyPEM: "(never read here)",
                topic: "com.example.app", environment: .sandbox)
            func registration(_ id: String, app: String = "demo", token: String? = nil, state: Registration.State = .active) -> Registration {
                // Each phone its own token (a token held by another user is refused).
                Registration(id: id, appId: app, user: .local("u-\(id)"), apnsDeviceToken: token ?? "a1b2\(id)", createdAt: 1, state: state)
            }
            let rows =
                (0..<7).map { registration("r\($0)") } + [
                    registration("r7", token: ""), registration("r8", app: "other"), registration("r9", state: .locked),
                ]
            for row in rows {
                #expect(try await store.insert(row, maximumPerUser: nil, audit: nil) == .inserted, "\(row.id)")
            }
            let holders = try await PushSenderRoutes.tokenHolders(
                of: RegistrationFilter(app: "demo", state: .active), app: app, in: store, pageSize: 2)
            #expect(holders == (0..<7).map { "r\($0)" })
            let kept = try await PushSenderRoutes.tokenHolders(
                of: RegistrationFilter(app: "demo", state: .active), app: app, in: store, pageSize: 2, keeping: { $0.id != "r3" })
            #expect(kept == ["r0", "r1", "r2", "r4", "r5", "r6"])
            // A push to the whole app reads the same ids from the index, a page at a time.
            #expect(try await PushSenderRoutes.pushTargets(of: app, in: store, pageSize: 2) == (0..<7).map { "r\($0)" })
            #expect(try await PushSenderRoutes.pushTargets(of: app, in: store, pageSize: 7) == (0..<7).map { "r\($0)" })
            // An Android phone counts only for an app with FCM; an app with neither service has none.
            _ = try await store.insert(
                Registration(id: "r10", appId: "demo", user: .local("android"), androidGcmRegistrationId: "fcm-1", createdAt: 1),
                maximumPerUser: nil, audit: nil)
            #expect(try await PushSenderRoutes.pushTargets(of: app, in: store, pageSize: 3) == (0..<7).map { "r\($0)" })
            var both = app
            both.push.fcm = FCMSettings(projectID: "p", clientEmail: "e", privateKeyPEM: "(never read here)")
            #expect(try await PushSenderRoutes.pushTargets(of: both, in: store, pageSize: 3) == ["r0", "r1", "r10", "r2", "r3", "r4", "r5", "r6"])
            #expect(try await PushSenderRoutes.pushTargets(of: AppConfiguration(id: "demo"), in: store).isEmpty)
        }
    }
}
