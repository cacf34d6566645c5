import Foundation
import MidtierCore
import MidtierStore
import MidtierTestSupport
import Testing

/// Push notifications as every store keeps them (docs/push.md, "Delivery"), on SQLite and on
/// PostgreSQL, through the memory cache as an instance opens them: each delivery leased to one
/// owner at a time, outcomes recorded, tokens cleared by their exact bytes.
@Suite(.timeLimit(.minutes(10))) struct PushStoreTests {
    static let alice = UserIdentity.local("alice")

    static func push(_ store: any StateStore) throws -> any PushStore {
        try #require(store.pushStore, "\(type(of: store)) keeps no push notifications")
    }

    static func notification(_ id: String, app: String = "demo", at createdAt: Int64 = 1_000) -> PushNotificationRecord {
        PushNotificationRecord(id: id, app: app, sender: "workflow", payload: #"{"alert":"\#(id)"}"#, createdAt: createdAt)
    }

    /// Deliveries as "notification/registration".
    static func keys(_ claimed: [ClaimedPushDelivery]) -> [String] {
        claimed.map { "\($0.notification.id)/\($0.registration)" }
    }

    static func deliveries(_ push: any PushStore, _ id: String) async throws -> [PushDeliveryRecord] {
        try #require(try await push.pushNotification(id: id)).1
    }

    @Test(arguments: StoreKind.allCases) func enqueuedDeliveriesAreClaimedOnce(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            // Duplicates once, by their bytes: a composed and a decomposed "é" are two registrations.
            let first = Self.notification("n1", at: 1_000)
            try await push.enqueue(first, registrations: ["r1", "r2", "r1", "r\u{E9}", "re\u{301}"])
            try await push.enqueue(Self.notification("n2", at: 2_000), registrations: ["r1"])
            #expect(try await push.pendingPushDeliveries() == 5)

            #expect(
                try await push.claimPushDeliveries(owner: "A", now: 999, leaseUntil: 60_000, limit: 10).isEmpty,
                "nothing is due before it was enqueued")
            let claimed = try await push.claimPushDeliveries(owner: "A", now: 1_500, leaseUntil: 60_000, limit: 10)
            #expect(Set(Self.keys(claimed)) == ["n1/r1", "n1/r2", "n1/r\u{E9}", "n1/re\u{301}"])
            #expect(claimed.count == 4)
            #expect(claimed.allSatisfy { $0.notification == first && $0.attempts == 0 })
            #expect(
                try await push.claimPushDeliveries(owner: "B", now: 1_500, leaseUntil: 60_000, limit: 10).isEmpty,
                "a live lease is never handed to another owner")
            #expect(
                try await push.claimPushDeliveries(owner: "A", now: 1_500, leaseUntil: 60_000, limit: 10).isEmpty,
                "nor to the same owner twice")
            // Oldest due first, at most `limit`.
            #expect(try await push.claimPushDeliveries(owner: "B", now: 3_000, leaseUntil: 60_000, limit: 0).isEmpty)
            #expect(Self.keys(try await push.claimPushDeliveries(owner: "B", now: 3_000, leaseUntil: 60_000, limit: 10)) == ["n2/r1"])
            #expect(try await push.pendingPushDeliveries() == 5, "leased deliveries are still pending")
        }
    }

    /// A notification to more registrations than one statement inserts
    /// (``PushRules/deliveriesPerInsert``) has every delivery; a claim across notifications
    /// hands out the oldest due first, then by the ids' bytes, each with its own notification.
    @Test(arguments: StoreKind.allCases) func aLargeFanOutAndAClaimAcrossNotifications(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            let many = (0..<2_345).map { "r\($0)" }
            try await push.enqueue(Self.notification("big", at: 5_000), registrations: many + ["r1"])
            #expect(try await push.pendingPushDeliveries() == 2_345)
            #expect(try await Self.deliveries(push, "big").count == 2_345)
            try await push.enqueue(Self.notification("b", at: 1_000), registrations: ["z", "a"])
            try await push.enqueue(Self.notification("a", at: 1_000), registrations: ["Z"])
            let claimed = try await push.claimPushDeliveries(owner: "A", now: 9_000, leaseUntil: 60_000, limit: 5)
            #expect(Self.keys(claimed) == ["a/Z", "b/a", "b/z", "big/r0", "big/r1"], "\(Self.keys(claimed))")
            #expect(claimed.allSatisfy { $0.notification.id == String($0.notification.payload.dropFirst(10).dropLast(2)) })
            #expect(try await push.purgePushNotifications(before: 10_000) == 0, "a notification with a pending delivery stays")
        }
    }

    /// Two instances, each with several workers claiming at once, share 200 deliveries: every
    /// delivery goes to exactly one of them.
    @Test(arguments: StoreKind.allCases) func concurrentClaimsNeverShareADelivery(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let instances = [try Self.push(try await test.open()), try Self.push(try await test.open())]
            var expected: Set<String> = []
            for n in 0..<4 {
                let registrations = (0..<50).map { "reg-\($0)" }
                try await instances[0].enqueue(Self.notification("n\(n)", at: 1_000 + Int64(n)), registrations: registrations)
                expected.formUnion(registrations.map { "n\(n)/\($0)" })
            }
            let total = expected.count
            let claims = try await withThrowingTaskGroup(of: [String].self) { group in
                for worker in 0..<8 {
                    let push = instances[worker % 2]
                    group.addTask {
                        var mine: [String] = []
                        while true {
                            let claimed = try await push.claimPushDeliveries(owner: "owner-\(worker)", now: 10_000, leaseUntil: 600_000, limit: 7)
                            mine += Self.keys(claimed)
                            // More than there are means deliveries were handed out twice: stop.
                            if claimed.isEmpty || mine.count > total { return mine }
                        }
                    }
                }
                var all: [[String]] = []
                for try await claimed in group { all.append(claimed) }
                return all
            }
            let union = claims.flatMap { $0 }
            #expect(union.count == expected.count, "every delivery claimed once: \(union.count) claims of \(expected.count)")
            #expect(Set(union) == expected)
            #expect(try await instances[1].claimPushDeliveries(owner: "late", now: 10_000, leaseUntil: 600_000, limit: 1_000).isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases) func expiredLeaseGoesToAnotherOwner(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            try await push.enqueue(Self.notification("n1"), registrations: ["r1"])
            #expect(Self.keys(try await push.claimPushDeliveries(owner: "A", now: 1_000, leaseUntil: 2_000, limit: 5)) == ["n1/r1"])
            #expect(
                try await push.claimPushDeliveries(owner: "B", now: 2_000, leaseUntil: 3_000, limit: 5).isEmpty,
                "the lease runs until its end")
            let again = try await push.claimPushDeliveries(owner: "B", now: 2_001, leaseUntil: 3_000, limit: 5)
            #expect(Self.keys(again) == ["n1/r1"])
            #expect(again.first?.attempts == 0)
            #expect(
                try await push.finishPushDelivery(
                    notification: "n1", registration: "r1", owner: "A", outcome: .delivered(.apns),
                    now: 2_100) == false, "the first owner lost its lease")
            #expect(
                try await push.finishPushDelivery(
                    notification: "n1", registration: "r1", owner: "b", outcome: .delivered(.apns),
                    now: 2_100) == false, "owners compare by their bytes")
            #expect(
                try await push.finishPushDelivery(
                    notification: "n1", registration: "r1", owner: "B", outcome: .delivered(.apns),
                    now: 2_200))
            #expect(
                try await push.finishPushDelivery(
                    notification: "n1", registration: "r1", owner: "B", outcome: .delivered(.apns),
                    now: 2_300) == false, "finishing ends the lease")
            #expect(
                try await Self.deliveries(push, "n1") == [
                    PushDeliveryRecord(
                        notification: "n1", registration: "r1", state: .delivered, attempts: 1, nextAttemptAt: 1_000,
                        updatedAt: 2_200, provider: .apns, reason: "")
                ])
            #expect(try await push.claimPushDeliveries(owner: "C", now: 100_000, leaseUntil: 200_000, limit: 5).isEmpty)
            #expect(try await push.pendingPushDeliveries() == 0)
        }
    }

    /// A restarted instance (same host and port) ends the leases its earlier run held, so that
    /// what a crash left in flight is due at once; another instance's leases, and the names that
    /// only begin alike (`host:80` and `host:8080`), keep theirs.
    @Test(arguments: StoreKind.allCases) func aRestartedInstanceReleasesOnlyItsEarlierRunsLeases(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            try await push.enqueue(Self.notification("n1"), registrations: ["r1", "r2", "r3", "r4"])
            for (owner, count) in [("host:80/run-1", 1), ("host:8080/run-1", 1), ("other:80/run-1", 1), ("host:80/run-2", 1)] {
                #expect(try await push.claimPushDeliveries(owner: owner, now: 1_000, leaseUntil: 90_000, limit: count).count == 1)
            }
            #expect(try await push.releasePushLeases(ofInstance: "host:80", keeping: "host:80/run-2") == 1)
            let again = try await push.claimPushDeliveries(owner: "host:80/run-2", now: 1_001, leaseUntil: 90_000, limit: 5)
            #expect(again.count == 1, "only the earlier run's delivery is free again; the others keep their leases")
            #expect(try await push.releasePushLeases(ofInstance: "host:80", keeping: "host:80/run-2") == 0)
            #expect(try await push.releasePushLeases(ofInstance: "host:8", keeping: "host:8/x") == 0, "a name that only begins alike")
        }
    }

    @Test(arguments: StoreKind.allCases) func retryIsDueAgainAtItsTime(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            try await push.enqueue(Self.notification("n1"), registrations: ["r1"])
            _ = try await push.claimPushDeliveries(owner: "A", now: 1_000, leaseUntil: 1_500, limit: 5)
            #expect(
                try await push.finishPushDelivery(
                    notification: "n1", registration: "r1", owner: "A",
                    outcome: .retry(at: 5_000, provider: .fcm, reason: "429"), now: 1_200))
            #expect(
                try await push.claimPushDeliveries(owner: "A", now: 4_999, leaseUntil: 10_000, limit: 5).isEmpty,
                "not due before its time, though no lease holds it")
            #expect(try await push.pendingPushDeliveries() == 1)
            #expect(
                try await Self.deliveries(push, "n1") == [
                    PushDeliveryRecord(
                        notification: "n1", registration: "r1", state: .pending, attempts: 1, nextAttemptAt: 5_000,
                        updatedAt: 1_200, provider: .fcm, reason: "429")
                ])
            let again = try await push.claimPushDeliveries(owner: "B", now: 5_000, leaseUntil: 10_000, limit: 5)
            #expect(Self.keys(again) == ["n1/r1"])
            #expect(again.first?.attempts == 1)
            // A retry without a provider keeps the one recorded.
            #expect(
                try await push.finishPushDelivery(
                    notification: "n1", registration: "r1", owner: "B",
                    outcome: .retry(at: 9_000, provider: nil, reason: "timeout"), now: 5_100))
            #expect(try await Self.deliveries(push, "n1").first?.provider == .fcm)
            #expect(try await Self.deliveries(push, "n1").first?.attempts == 2)
        }
    }

    /// A delivery put back (its push service busy, or the worker stopping) is due again at its
    /// time, ends its lease, and its attempt does not count.
    @Test(arguments: StoreKind.allCases) func aPutBackDeliveryIsDueAgainWithoutAnAttempt(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            try await push.enqueue(Self.notification("n1"), registrations: ["r1"])
            _ = try await push.claimPushDeliveries(owner: "A", now: 1_000, leaseUntil: 90_000, limit: 5)
            #expect(
                try await push.finishPushDelivery(
                    notification: "n1", registration: "r1", owner: "A", outcome: .putBack(at: 2_000, reason: "busy"), now: 1_100))
            #expect(try await push.claimPushDeliveries(owner: "B", now: 1_999, leaseUntil: 90_000, limit: 5).isEmpty)
            #expect(
                try await Self.deliveries(push, "n1") == [
                    PushDeliveryRecord(
                        notification: "n1", registration: "r1", state: .pending, attempts: 0, nextAttemptAt: 2_000,
                        updatedAt: 1_100, provider: nil, reason: "busy")
                ])
            let again = try await push.claimPushDeliveries(owner: "B", now: 2_000, leaseUntil: 90_000, limit: 5)
            #expect(Self.keys(again) == ["n1/r1"] && again.first?.attempts == 0, "another owner takes it before the lease would have run out")
        }
    }

    @Test(arguments: StoreKind.allCases) func outcomesAreRecordedPerDelivery(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            let notification = Self.notification("n1")
            try await push.enqueue(notification, registrations: ["b", "B", "a", "c"])
            #expect(try await push.claimPushDeliveries(owner: "W", now: 1_000, leaseUntil: 9_000, limit: 10).count == 4)
            let outcomes: [(String, PushDeliveryOutcome)] = [
                ("a", .delivered(.apns)), ("b", .failed(.fcm, reason: "UNREGISTERED")), ("B", .skipped(reason: "locked")),
                ("c", .retry(at: 8_000, provider: .apns, reason: "500")),
            ]
            for (registration, outcome) in outcomes {
                #expect(
                    try await push.finishPushDelivery(
                        notification: "n1", registration: registration, owner: "W", outcome: outcome,
                        now: 2_000))
            }
            let found = try #require(try await push.pushNotification(id: "n1"))
            #expect(found.0 == notification)
            // By the bytes of the registration ids.
            #expect(
                found.1 == [
                    PushDeliveryRecord(
                        notification: "n1", registration: "B", state: .skipped, attempts: 0, nextAttemptAt: 1_000,
                        updatedAt: 2_000, provider: nil, reason: "locked"),
                    PushDeliveryRecord(
                        notification: "n1", registration: "a", state: .delivered, attempts: 1, nextAttemptAt: 1_000,
                        updatedAt: 2_000, provider: .apns, reason: ""),
                    PushDeliveryRecord(
                        notification: "n1", registration: "b", state: .failed, attempts: 1, nextAttemptAt: 1_000,
                        updatedAt: 2_000, provider: .fcm, reason: "UNREGISTERED"),
                    PushDeliveryRecord(
                        notification: "n1", registration: "c", state: .pending, attempts: 1, nextAttemptAt: 8_000,
                        updatedAt: 2_000, provider: .apns, reason: "500"),
                ])
            #expect(try await push.pendingPushDeliveries() == 1)
            #expect(try await push.pushNotification(id: "N1") == nil, "ids compare by their bytes")
            #expect(try await push.pushNotification(id: "unknown") == nil)
            #expect(
                try await push.finishPushDelivery(
                    notification: "n1", registration: "zzz", owner: "W", outcome: .delivered(.apns),
                    now: 2_000) == false, "no such delivery")
        }
    }

    /// Outcomes recorded together, in one transaction: each only where its owner still holds
    /// the lease; the count says how many were.
    @Test(arguments: StoreKind.allCases) func outcomesRecordedTogetherEachNeedTheirLease(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            try await push.enqueue(Self.notification("n1"), registrations: ["a", "b", "c"])
            #expect(Self.keys(try await push.claimPushDeliveries(owner: "W", now: 1_000, leaseUntil: 2_000, limit: 2)) == ["n1/a", "n1/b"])
            #expect(Self.keys(try await push.claimPushDeliveries(owner: "V", now: 1_000, leaseUntil: 9_000, limit: 5)) == ["n1/c"])
            // "b"'s lease ran out and went to V.
            #expect(Self.keys(try await push.claimPushDeliveries(owner: "V", now: 2_001, leaseUntil: 9_000, limit: 5)) == ["n1/a", "n1/b"])
            #expect(try await push.finishPushDeliveries([], owner: "W", now: 3_000) == 0)
            let written = try await push.finishPushDeliveries(
                [
                    FinishedPushDelivery(notification: "n1", registration: "a", outcome: .delivered(.apns)),
                    FinishedPushDelivery(notification: "n1", registration: "c", outcome: .delivered(.fcm)),
                    FinishedPushDelivery(notification: "n1", registration: "zzz", outcome: .delivered(.fcm)),
                ], owner: "V", now: 3_000)
            #expect(written == 2)
            #expect(
                try await push.finishPushDeliveries(
                    [FinishedPushDelivery(notification: "n1", registration: "b", outcome: .failed(.apns, reason: "late"))], owner: "W", now: 3_000)
                    == 0, "W's lease of b ran out")
            let states = try await Self.deliveries(push, "n1").map { "\($0.registration):\($0.state.rawValue)" }
            #expect(states == ["a:delivered", "b:pending", "c:delivered"])
        }
    }

    /// A claim reads each delivery's registration and its owner's block in its own
    /// transaction, by the ids' bytes: the worker checks those before sending, without a read of
    /// its own per delivery (docs/push.md, "Delivery").
    @Test(arguments: StoreKind.allCases) func aClaimReadsEachRecipientWithItsBlock(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            let push = try Self.push(store)
            let bob = UserIdentity.local("bob")
            for (id, user) in [("r\u{E9}", Self.alice), ("locked", Self.alice), ("bobs", bob)] {
                let registration = Registration(id: id, appId: "demo", user: user, deviceType: "iOS", apnsDeviceToken: "t-\(id)", createdAt: 1_000)
                #expect(try await store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
            }
            let audit = AuditEntry(at: 1, actor: "admin#1", action: "registration.lock", target: "locked")
            guard case .changed = try await store.transition(id: "locked", to: .locked, allowedFrom: [.active], audit: audit) else {
                Issue.record("not locked")
                return
            }
            try await store.setBlock(UserBlock(user: bob, kind: .all, reason: "left", since: 5, by: "admin#1"), audit: audit)
            // "re\u{301}" is not "r\u{E9}": no such registration.
            try await push.enqueue(Self.notification("n1"), registrations: ["r\u{E9}", "re\u{301}", "locked", "bobs", "gone"])
            let claimed = try await push.claimPushDeliveries(owner: "W", now: 1_000, leaseUntil: 9_000, limit: 10)
            #expect(claimed.count == 5)
            for delivery in claimed {
                switch Array(delivery.registration.unicodeScalars) {
                case Array("r\u{E9}".unicodeScalars):
                    #expect(
                        delivery.recipient
                            == PushRecipient(registration: "r\u{E9}", app: "demo", state: .active, apnsToken: "t-r\u{E9}", fcmToken: "", block: nil))
                case Array("re\u{301}".unicodeScalars), Array("gone".unicodeScalars):
                    #expect(delivery.recipient == nil, "\(delivery.registration) is no registration")
                case Array("locked".unicodeScalars):
                    #expect(delivery.recipient?.state == .locked)
                    #expect(delivery.recipient?.block == nil)
                case Array("bobs".unicodeScalars):
                    #expect(delivery.recipient?.block == .all)
                default:
                    Issue.record("an unexpected delivery \(delivery.registration)")
                }
            }
            // Read again (after a wait for a place): from the store, as it is now.
            // Its APNs token cleared, an FCM token given.
            let changed = Registration(
                id: "r\u{E9}", appId: "demo", user: Self.alice, deviceType: "iOS", androidGcmRegistrationId: "f-1", createdAt: 1_000)
            #expect(try await store.updateDevice(changed, audit: nil) == .written)
            #expect(
                try await push.pushRecipient(registration: "r\u{E9}")
                    == PushRecipient(registration: "r\u{E9}", app: "demo", state: .active, apnsToken: "", fcmToken: "f-1", block: nil))
            #expect(try await push.pushRecipient(registration: "re\u{301}") == nil, "ids compare by their bytes")
            #expect(try await push.pushRecipient(registration: "bobs")?.block == .all)
        }
    }

    @Test(arguments: StoreKind.allCases) func recentNotificationsNewestFirstByApp(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            try await push.enqueue(Self.notification("n1", app: "d\u{E9}mo", at: 1_000), registrations: [])
            try await push.enqueue(Self.notification("n2", app: "de\u{301}mo", at: 3_000), registrations: ["r1"])
            try await push.enqueue(Self.notification("n3", app: "d\u{E9}mo", at: 2_000), registrations: ["r1"])
            try await push.enqueue(Self.notification("n4", app: "other", at: 4_000), registrations: [])
            #expect(try await push.recentPushNotifications(app: nil, limit: 10).map(\.id) == ["n4", "n2", "n3", "n1"])
            #expect(try await push.recentPushNotifications(app: nil, limit: 2).map(\.id) == ["n4", "n2"])
            #expect(try await push.recentPushNotifications(app: "d\u{E9}mo", limit: 10).map(\.id) == ["n3", "n1"])
            #expect(try await push.recentPushNotifications(app: "de\u{301}mo", limit: 10) == [Self.notification("n2", app: "de\u{301}mo", at: 3_000)])
            #expect(try await push.recentPushNotifications(app: "Other", limit: 10).isEmpty)
            #expect(try await push.recentPushNotifications(app: nil, limit: -1).isEmpty, "a negative limit is no rows, not every row")
        }
    }

    /// A push service said a token is gone: it is cleared from the registration if the
    /// registration still holds exactly it, and memory no longer shows it.
    @Test(arguments: StoreKind.allCases) func clearingATokenTakesExactlyThatToken(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            let push = try Self.push(store)
            let composed = "tok-\u{E9}", decomposed = "tok-e\u{301}"
            var registration = Registration(
                id: "r1", appId: "demo", user: Self.alice, deviceType: "iOS", apnsDeviceToken: composed,
                androidGcmRegistrationId: "fcm-1", createdAt: 1_000)
            #expect(try await store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.registration(id: "r1")?.apnsDeviceToken == composed, "in memory now")
            let before = try await Self.newestChange(store)

            #expect(try await push.clearPushToken(registration: "r1", provider: .apns, token: decomposed) == false)
            #expect(try await push.clearPushToken(registration: "r1", provider: .fcm, token: composed) == false, "another provider's token")
            #expect(try await push.clearPushToken(registration: "r2", provider: .apns, token: composed) == false, "another registration")
            #expect(try await push.clearPushToken(registration: "r1", provider: .apns, token: "") == false)
            #expect(try await store.registration(id: "r1")?.apnsDeviceToken == composed)

            #expect(try await push.clearPushToken(registration: "r1", provider: .apns, token: composed))
            #expect(try await store.registration(id: "r1")?.apnsDeviceToken == "", "memory forgot the registration")
            #expect(try await store.registration(id: "r1")?.androidGcmRegistrationId == "fcm-1")
            #expect(try await test.open(cached: false).registration(id: "r1")?.apnsDeviceToken == "", "the store cleared it")
            #expect(try await push.clearPushToken(registration: "r1", provider: .apns, token: composed) == false, "nothing left to clear")
            if let before {
                // Other instances sharing the store forget it too.
                let changes = try await Self.changes(store, after: before)
                #expect(changes == [.device(id: "r1")])
            }

            // A newer token stays.
            registration.apnsDeviceToken = ""
            registration.androidGcmRegistrationId = "fcm-2"
            #expect(try await store.updateDevice(registration, audit: nil) == .written)
            #expect(try await push.clearPushToken(registration: "r1", provider: .fcm, token: "fcm-1") == false)
            #expect(try await store.registration(id: "r1")?.androidGcmRegistrationId == "fcm-2")
            #expect(try await push.clearPushToken(registration: "r1", provider: .fcm, token: "fcm-2"))
            #expect(try await store.registration(id: "r1")?.androidGcmRegistrationId == "")
        }
    }

    /// A push token is one user's: the store refuses a registration of another user that names
    /// it (an APNs token in any case), in the write's own transaction, so that of many users
    /// naming one token at once exactly one gets it — the outside attack had two users both
    /// keep it, or neither. The same user's registrations may share it (the move is the caller's).
    @Test(arguments: StoreKind.allCases) func aTokenIsOneUsersEvenWhenUsersClaimItAtOnce(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            let first = Registration(id: "a1", appId: "demo", user: Self.alice, apnsDeviceToken: "ab01", createdAt: 1_000)
            #expect(try await store.insert(first, maximumPerUser: nil, audit: nil) == .inserted)
            let bobs = Registration(id: "b1", appId: "demo", user: .local("bob"), apnsDeviceToken: "AB01", createdAt: 1_000)
            #expect(try await store.insert(bobs, maximumPerUser: nil, audit: nil) == .tokenHeldByAnotherUser)
            var bobsOwn = bobs
            bobsOwn.apnsDeviceToken = ""
            #expect(try await store.insert(bobsOwn, maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.updateDevice(bobs, audit: nil) == .tokenHeldByAnotherUser)
            #expect(try await store.registration(id: "b1")?.apnsDeviceToken == "", "nothing written")
            let elsewhere = Registration(id: "o1", appId: "other", user: .local("bob"), apnsDeviceToken: "ab01", createdAt: 1_000)
            #expect(try await store.insert(elsewhere, maximumPerUser: nil, audit: nil) == .inserted, "another app's is another token")
            let hers = Registration(id: "a2", appId: "demo", user: Self.alice, apnsDeviceToken: "ab01", createdAt: 2_000)
            #expect(try await store.insert(hers, maximumPerUser: nil, audit: nil) == .inserted, "the same user's")

            // Twelve users name one FCM token at once: one gets it.
            let outcomes = try await withThrowingTaskGroup(of: InsertOutcome.self) { group in
                for n in 0..<12 {
                    group.addTask {
                        let claim = Registration(
                            id: "c\(n)", appId: "demo", user: .local("user\(n)"), androidGcmRegistrationId: "fcm-race", createdAt: 3_000)
                        return try await store.insert(claim, maximumPerUser: nil, audit: nil)
                    }
                }
                var all: [InsertOutcome] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            #expect(outcomes.filter { $0 == .inserted }.count == 1 && outcomes.filter { $0 == .tokenHeldByAnotherUser }.count == 11, "\(outcomes)")
        }
    }

    /// A phone onboarded again gets the token its earlier registration held: the token is taken
    /// from every other registration of that app holding exactly those bytes, so the earlier
    /// registration's notifications no longer reach the phone (docs/push.md). (Between users the
    /// store refuses the token instead: ``aTokenIsOneUsersEvenWhenUsersClaimItAtOnce(_:)``.)
    @Test(arguments: StoreKind.allCases) func aTokenTakenByAnotherRegistrationIsReleasedFromTheOthers(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            let push = try Self.push(store)
            let token = "tok-\u{E9}", otherForm = "tok-e\u{301}"
            let app = "d\u{E9}mo", appOtherForm = "de\u{301}mo"
            let registrations = [
                Registration(id: "r1", appId: app, user: Self.alice, apnsDeviceToken: token, androidGcmRegistrationId: "fcm-T", createdAt: 1_000),
                Registration(id: "r2", appId: app, user: Self.alice, apnsDeviceToken: token, androidGcmRegistrationId: "fcm-T", createdAt: 2_000),
                Registration(id: "r3", appId: "other", user: Self.alice, apnsDeviceToken: token, androidGcmRegistrationId: "fcm-T", createdAt: 1_000),
                Registration(id: "r4", appId: app, user: Self.alice, apnsDeviceToken: otherForm, androidGcmRegistrationId: "fcm-t", createdAt: 1_000),
                Registration(
                    id: "r5", appId: appOtherForm, user: Self.alice, apnsDeviceToken: token, androidGcmRegistrationId: "fcm-T", createdAt: 1_000),
            ]
            for registration in registrations {
                #expect(try await store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
                #expect(try await store.registration(id: registration.id) == registration, "in memory now")
            }
            let before = try await Self.newestChange(store)

            #expect(try await push.releasePushToken("", provider: .apns, app: app, keeping: "r2") == 0, "an empty token releases nothing")
            #expect(try await push.releasePushToken("fcm-T", provider: .apns, app: app, keeping: "r2") == 0, "another provider's token")
            #expect(try await push.releasePushToken(token, provider: .apns, app: "D\u{E9}mo", keeping: "r2") == 0, "another app")
            #expect(try await store.registration(id: "r1")?.apnsDeviceToken == token)

            #expect(try await push.releasePushToken(token, provider: .apns, app: app, keeping: "r2") == 1)
            #expect(try await store.registration(id: "r1")?.apnsDeviceToken == "", "memory forgot the registration that lost it")
            #expect(try await store.registration(id: "r1")?.androidGcmRegistrationId == "fcm-T", "its other token stays")
            let durable = try await test.open(cached: false)
            #expect(try await durable.registration(id: "r1")?.apnsDeviceToken == "", "the store released it")
            for (id, kept) in [("r2", token), ("r3", token), ("r4", otherForm), ("r5", token)] {
                #expect(try await store.registration(id: id)?.apnsDeviceToken == kept, "\(id) keeps its token")
                #expect(try await durable.registration(id: id)?.apnsDeviceToken == kept, "\(id) keeps its token")
            }
            #expect(try await push.releasePushToken(token, provider: .apns, app: app, keeping: "r2") == 0, "nothing left to release")
            if let before {
                // Other instances sharing the store forget it too.
                #expect(try await Self.changes(store, after: before) == [.device(id: "r1")])
            }

            // The FCM token likewise; the kept id is compared by bytes too.
            #expect(try await push.releasePushToken("fcm-T", provider: .fcm, app: app, keeping: "R2") == 2, "r1 and r2")
            for id in ["r1", "r2"] {
                #expect(try await store.registration(id: id)?.androidGcmRegistrationId == "", "\(id) in memory")
                #expect(try await durable.registration(id: id)?.androidGcmRegistrationId == "", "\(id) in the store")
            }
            #expect(try await store.registration(id: "r2")?.apnsDeviceToken == token, "the APNs token stays")
            for (id, kept) in [("r3", "fcm-T"), ("r4", "fcm-t"), ("r5", "fcm-T")] {
                #expect(try await store.registration(id: id)?.androidGcmRegistrationId == kept, "\(id) keeps its token")
            }
            (durable as? PostgresStore)?.close()
        }
    }

    static func postgres(_ store: any StateStore) -> PostgresStore? {
        ((store as? CachedStateStore)?.base ?? store) as? PostgresStore
    }

    /// The newest change announced (PostgreSQL; nil for a store no other instance shares).
    static func newestChange(_ store: any StateStore) async throws -> Int64? {
        try await postgres(store)?.newestChange()
    }

    static func changes(_ store: any StateStore, after: Int64) async throws -> [StoreChange] {
        try await postgres(store)?.changes(after: after).changes.map(\.1) ?? []
    }

    @Test(arguments: StoreKind.allCases) func purgeKeepsNotificationsStillPending(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try Self.push(try await test.open())
            try await push.enqueue(Self.notification("done", at: 1_000), registrations: ["r1", "r2"])
            try await push.enqueue(Self.notification("waiting", at: 1_000), registrations: ["r1", "r2"])
            try await push.enqueue(Self.notification("nobody", at: 1_000), registrations: [])
            try await push.enqueue(Self.notification("young", at: 5_000), registrations: ["r1"])
            let claimed = try await push.claimPushDeliveries(owner: "W", now: 5_000, leaseUntil: 9_000, limit: 10)
            #expect(claimed.count == 5)
            for delivery in claimed where !(delivery.notification.id == "waiting" && delivery.registration == "r2") {
                #expect(
                    try await push.finishPushDelivery(
                        notification: delivery.notification.id, registration: delivery.registration,
                        owner: "W", outcome: .delivered(.apns), now: 6_000))
            }
            #expect(try await push.purgePushNotifications(before: 2_000) == 2)
            #expect(try await push.pushNotification(id: "done") == nil)
            #expect(try await push.pushNotification(id: "nobody") == nil)
            #expect(try await Self.deliveries(push, "waiting").count == 2, "a pending delivery keeps its notification, all of it")
            #expect(try await Self.deliveries(push, "young").count == 1)
            #expect(try await push.recentPushNotifications(app: nil, limit: 10).map(\.id) == ["young", "waiting"])
            // The purged notification's deliveries went with it.
            try await push.enqueue(Self.notification("done", at: 7_000), registrations: [])
            #expect(try await Self.deliveries(push, "done").isEmpty)
            #expect(try await push.purgePushNotifications(before: 2_000) == 0)
        }
    }

    /// A notification accepted is in the store: an instance that opens it after a restart
    /// finds it, and its deliveries are due.
    @Test(arguments: StoreKind.allCases) func enqueuedNotificationsSurviveARestart(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            do {
                let store = try await test.open(cached: false)
                try await Self.push(store).enqueue(Self.notification("n1"), registrations: ["r1", "r2"])
                (store as? PostgresStore)?.close()
            }
            let push = try Self.push(try await test.open())
            #expect(try await push.pushNotification(id: "n1")?.0 == Self.notification("n1"))
            #expect(try await push.pendingPushDeliveries() == 2)
            #expect(Set(Self.keys(try await push.claimPushDeliveries(owner: "A", now: 1_000, leaseUntil: 2_000, limit: 5))) == ["n1/r1", "n1/r2"])
        }
    }

    @Test func cacheOverAStoreWithoutPushSaysSo() async throws {
        try await withTestStore(.sqlite) { test in
            let cache = CachedStateStore(base: CountingStore(try await test.open(cached: false)))
            await #expect(throws: StoreError.self) { try await cache.enqueue(Self.notification("n1"), registrations: ["r1"]) }
        }
    }
}
