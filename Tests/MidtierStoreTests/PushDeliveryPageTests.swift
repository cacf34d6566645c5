import Foundation
import MidtierCore
import MidtierTestSupport
import Testing

@testable import MidtierStore

/// A notification's deliveries as the admin API and the console read them (docs/admin.md,
/// "Push notifications"), on SQLite and PostgreSQL: a page at a time by registration id's
/// bytes, with exact counts per state read from an index, never every delivery at once.
@Suite(.timeLimit(.minutes(10))) struct PushDeliveryPageTests {
    static func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    static func notification(_ id: String, at createdAt: Int64 = 1_000) -> PushNotificationRecord {
        PushNotificationRecord(id: id, app: "demo", sender: "erp", payload: #"{"alert":"\#(id)"}"#, createdAt: createdAt)
    }

    /// The outcome the test gives the n-th delivery claimed: 300 delivered, 200 failed, 100
    /// skipped, 600 left pending (50 of them put back with a reason).
    static func outcome(_ index: Int) -> PushDeliveryOutcome? {
        switch index % 12 {
        case 0, 1, 2: .delivered(.apns)
        case 3, 4: .failed(.fcm, reason: "UNREGISTERED")
        case 5: .skipped(reason: "locked")
        case 6: .putBack(at: 9_000, reason: "waiting: no place")
        default: nil
        }
    }

    /// 1 200 deliveries: the first 500 by registration id's bytes (not by number, not by case),
    /// exact counts per state, and the pages after them, each delivery once; another
    /// notification's deliveries count for it alone.
    @Test(arguments: StoreKind.allCases) func aPageOfDeliveriesAndExactCounts(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            // Through the memory cache, as the server reads.
            let push = try #require(try await test.open(cached: true).pushStore)
            let registrations = (0..<1_200).map { $0 % 3 == 0 ? "R\($0)" : "r\($0)" }
            try await push.enqueue(Self.notification("big"), registrations: registrations)
            try await push.enqueue(Self.notification("small", at: 2_000), registrations: ["r1", "r2"])
            let claimed = try await push.claimPushDeliveries(owner: "W", now: 1_000, leaseUntil: 60_000, limit: 2_000)
            #expect(claimed.count == 1_200, "only the big one is due at 1 000")
            var expected = PushDeliveryCounts()
            for (index, delivery) in claimed.enumerated() {
                guard let outcome = Self.outcome(index) else {
                    expected.pending += 1
                    continue
                }
                #expect(
                    try await push.finishPushDelivery(
                        notification: "big", registration: delivery.registration, owner: "W", outcome: outcome, now: 2_000))
                switch outcome {
                case .delivered: expected.delivered += 1
                case .failed: expected.failed += 1
                case .skipped: expected.skipped += 1
                case .putBack, .retry: expected.pending += 1
                }
            }
            #expect(expected == PushDeliveryCounts(pending: 600, delivered: 300, failed: 200, skipped: 100))
            // Every delivery, as the sender's status call reads them, for comparison.
            let all = try #require(try await push.pushNotification(id: "big")).1
            #expect(all.map(\.registration) == registrations.sorted(by: Self.precedes))
            #expect(PushDeliveryCounts(all) == expected)

            let first = try #require(try await push.pushNotification(id: "big", deliveriesAfter: nil, limit: 500))
            #expect(first.notification == Self.notification("big"))
            #expect(first.deliveries == Array(all.prefix(500)), "the first 500 by registration id's bytes")
            #expect(first.counts == expected, "every delivery counted, listed or not")
            #expect(first.counts.total == 1_200)

            // The pages after it, each delivery once; the counts the same on every page.
            var walked = first.deliveries
            var sizes = [first.deliveries.count]
            while let last = walked.last?.registration, sizes.count < 10 {
                let page = try #require(try await push.pushNotification(id: "big", deliveriesAfter: last, limit: 500))
                #expect(page.counts == expected)
                guard !page.deliveries.isEmpty else { break }
                sizes.append(page.deliveries.count)
                walked += page.deliveries
            }
            #expect(sizes == [500, 500, 200])
            #expect(walked == all)
            // A place between ids, or past the last, is a place to read on from.
            let between = try #require(try await push.pushNotification(id: "big", deliveriesAfter: "r5", limit: 3))
            let afterR5 = all.map(\.registration).filter { Self.precedes("r5", $0) }
            #expect(between.deliveries.map(\.registration) == Array(afterR5.prefix(3)))
            #expect(try await push.pushNotification(id: "big", deliveriesAfter: "zzz", limit: 5)?.deliveries.isEmpty == true)
            // None listed: the counts alone.
            let countsOnly = try #require(try await push.pushNotification(id: "big", deliveriesAfter: nil, limit: 0))
            #expect(countsOnly.deliveries.isEmpty && countsOnly.counts == expected)

            let small = try #require(try await push.pushNotification(id: "small", deliveriesAfter: nil, limit: 500))
            #expect(small.counts == PushDeliveryCounts(pending: 2) && small.deliveries.map(\.registration) == ["r1", "r2"])
            #expect(try await push.pushNotification(id: "BIG", deliveriesAfter: nil, limit: 500) == nil, "ids compare by their bytes")
            #expect(try await push.pushNotification(id: "unknown", deliveriesAfter: nil, limit: 500) == nil)
        }
    }

    /// The counts read one range of `push_deliveries_states` (the index alone on SQLite), and
    /// the page one range of the primary key in its order (no sort), on a table of 60 000
    /// deliveries of 120 notifications whose statistics the planner has.
    @Test(arguments: StoreKind.allCases) func countsAndPagesReadOneIndexRange(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            switch kind {
            case .sqlite:
                try await test.execute(
                    """
                    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 59999)
                    INSERT INTO push_deliveries (notification_id, registration_id, state, attempts, next_attempt_at, updated_at, reason)
                    SELECT 'n-' || (i % 120), printf('reg-%05d', i), CASE i % 4 WHEN 0 THEN 'pending' WHEN 1 THEN 'delivered'
                        WHEN 2 THEN 'failed' ELSE 'skipped' END, 1, i, i, '' FROM n;
                    ANALYZE;
                    """)
            case .postgres:
                try await test.execute(
                    """
                    INSERT INTO midtier_push_deliveries (notification_id, registration_id, state, attempts, next_attempt_at, updated_at, reason)
                    SELECT 'n-' || (i % 120), 'reg-' || lpad(i::text, 5, '0'), CASE i % 4 WHEN 0 THEN 'pending' WHEN 1 THEN 'delivered'
                        WHEN 2 THEN 'failed' ELSE 'skipped' END, 1, i, i, '' FROM generate_series(0, 59999) AS i
                    """)
                try await test.execute("VACUUM ANALYZE midtier_push_deliveries")
            }
            let counts = PushRules.deliveryStates(of: "n-7")
            let page = PushRules.deliveries(of: "n-7", after: "reg-10000", limit: 501)
            switch kind {
            case .sqlite:
                let countPlan = try await RegistrationPagingTests.plan(of: counts, in: store)
                #expect(countPlan.contains("SEARCH push_deliveries USING COVERING INDEX push_deliveries_states ("), "\(countPlan)")
                #expect(!countPlan.contains("SCAN") && !countPlan.contains("TEMP B-TREE"), "\(countPlan)")
                let pagePlan = try await RegistrationPagingTests.plan(of: page, in: store)
                #expect(pagePlan.contains("SEARCH push_deliveries USING INDEX sqlite_autoindex_push_deliveries_1 ("), "\(pagePlan)")
                #expect(!pagePlan.contains("SCAN") && !pagePlan.contains("TEMP B-TREE"), "\(pagePlan)")
            case .postgres:
                let countPlan = try await RegistrationPagingTests.plan(of: counts, in: store)
                #expect(countPlan.contains("midtier_push_deliveries_states"), "\(countPlan)")
                #expect(!countPlan.contains("Seq Scan"), "\(countPlan)")
                let pagePlan = try await RegistrationPagingTests.plan(of: page, in: store)
                #expect(!pagePlan.contains("Seq Scan"), "\(pagePlan)")
            }
            // And both say what they should (no notification row is needed for these).
            let push = try #require(store.pushStore)
            #expect(try await push.pushNotification(id: "n-7", deliveriesAfter: nil, limit: 1) == nil, "no notification n-7 was stored")
            let rows: [(state: String, count: Int64)]
            if let sqlite = store as? SQLiteStore {
                rows = try await sqlite.rows(counts) { try PushRules.stateCount($0) }
            } else {
                let postgres = try #require(store as? PostgresStore)
                rows = try await postgres.rows(counts) { try PushRules.stateCount($0) }
            }
            #expect(PushRules.counts(rows) == PushDeliveryCounts(pending: 0, delivered: 0, failed: 0, skipped: 500))
        }
    }

    /// A claim walks the due index in its own order and stops at its limit: with 30 000
    /// deliveries of one notification pending and due at the same time (a push to a whole app),
    /// it sorts nothing (a sort of every due delivery cost ~60 ms of CPU per claim at 200 000,
    /// and the claims then took more CPU than the sending; docs/benchmarks.md). And it leases
    /// the first due deliveries in that order.
    @Test(arguments: StoreKind.allCases) func aClaimReadsTheDueIndexInOrder(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            switch kind {
            case .sqlite:
                try await test.execute(
                    """
                    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 29999)
                    INSERT INTO push_deliveries (notification_id, registration_id, state, attempts, next_attempt_at, updated_at, reason)
                    SELECT CASE WHEN i < 29000 THEN 'whole-app' ELSE 'n-' || (i % 50) END, printf('reg-%05d', 29999 - i),
                        CASE WHEN i < 29000 OR i % 2 = 0 THEN 'pending' ELSE 'delivered' END, 0, CASE WHEN i < 29000 THEN 1000 ELSE i END,
                        1000, '' FROM n;
                    ANALYZE;
                    """)
            case .postgres:
                try await test.execute(
                    """
                    INSERT INTO midtier_push_deliveries (notification_id, registration_id, state, attempts, next_attempt_at, updated_at, reason)
                    SELECT CASE WHEN i < 29000 THEN 'whole-app' ELSE 'n-' || (i % 50) END, 'reg-' || lpad((29999 - i)::text, 5, '0'),
                        CASE WHEN i < 29000 OR i % 2 = 0 THEN 'pending' ELSE 'delivered' END, 0, CASE WHEN i < 29000 THEN 1000 ELSE i END,
                        1000, '' FROM generate_series(0, 29999) AS i
                    """)
                try await test.execute("VACUUM ANALYZE midtier_push_deliveries")
            }
            let claim = PushRules.claim(owner: "me", now: 1_000_000, leaseUntil: 1_090_000, limit: 32)
            let plan = try await RegistrationPagingTests.plan(of: claim, in: store)
            switch kind {
            case .sqlite:
                #expect(plan.contains("USING INDEX push_deliveries_due ("), "\(plan)")
                #expect(!plan.contains("TEMP B-TREE") && !plan.contains("SCAN push_deliveries"), "\(plan)")
            case .postgres:
                #expect(plan.contains("midtier_push_deliveries_due"), "\(plan)")
                #expect(!plan.contains("Sort") && !plan.contains("Seq Scan"), "\(plan)")
            }
            // The oldest due first, then by notification and registration id.
            let push = try #require(store.pushStore)
            let wholeApp = PushNotificationRecord(id: "whole-app", app: "demo", sender: "erp", payload: "{}", createdAt: 1000)
            try await push.enqueue(wholeApp, registrations: [])
            let claimed = try await push.claimPushDeliveries(owner: "me", now: 1_000_000, leaseUntil: 1_090_000, limit: 32)
            #expect(claimed.map(\.registration) == (0..<32).map { String(format: "reg-%05d", 1000 + $0) })
            #expect(claimed.allSatisfy { $0.notification.id == "whole-app" })
        }
    }

    /// A state the store holds but Midtier does not know counts as failed, as a delivery with
    /// it is shown.
    @Test func anUnknownStateCountsAsFailed() {
        #expect(
            PushRules.counts([("pending", 2), ("delivered", 3), ("lost", 4), ("failed", 1), ("skipped", 5)])
                == PushDeliveryCounts(pending: 2, delivered: 3, failed: 5, skipped: 5))
    }
}
