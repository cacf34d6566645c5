import Foundation
import MidtierCore
import MidtierTestSupport
import Testing

@testable import MidtierStore

/// The admin listings' pages (docs/admin.md, "Listing registrations"), on SQLite and
/// PostgreSQL: registrations a page at a time in the order of their ids' bytes, each filter an
/// index range (never a scan of the whole table); push notifications newest first the same way.
@Suite(.timeLimit(.minutes(10))) struct RegistrationPagingTests {
    static let alice = UserIdentity.local("alice")
    static let bob = UserIdentity.local("bob")
    static let idpAlice = UserIdentity(realm: "https://idp.test", id: "alice")

    static func audit(_ action: String) -> AuditEntry { AuditEntry(at: 1_000, actor: "admin#1", action: action, target: "t") }

    static func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    static func matches(_ registration: Registration, _ filter: RegistrationFilter) -> Bool {
        (filter.user.map { UserIdentity.sameBytes($0.realm, registration.user.realm) && UserIdentity.sameBytes($0.id, registration.user.id) }
            ?? true)
            && (filter.app.map { UserIdentity.sameBytes($0, registration.appId) } ?? true)
            && (filter.state.map { $0 == registration.state } ?? true)
    }

    /// Every filter the admin API offers, walked a page of 7 at a time while registrations are
    /// added before and after the page read last: each registration there at the start is
    /// listed exactly once, in the order of the ids' bytes (not by number, not by case), only
    /// those the filter selects; one added after the place reached is listed, one added before
    /// it is not (it is behind the reader).
    @Test(arguments: StoreKind.allCases) func pagesWalkEveryRegistrationOnceWithEachFilter(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            // Through the memory cache, as the server reads: it passes pages through.
            let store = try await test.open(cached: true)
            let users = [Self.alice, Self.bob, Self.idpAlice]
            var ids = (0..<40).map { "r\($0)" }
            ids += ["A-1", "Zeta", "alpha", "a.b", "a~b", "_u", "9z", "r1-", "R1"]
            for (index, id) in ids.enumerated() {
                let registration = Registration(
                    id: id, appId: index % 3 == 0 ? "other" : "demo", user: users[index % users.count], deviceType: "iOS",
                    createdAt: Int64(10_000 - index))
                #expect(try await store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
                if index % 4 == 1 {
                    _ = try await store.transition(id: id, to: .locked, allowedFrom: [.active], audit: Self.audit("registration.lock"))
                } else if index % 7 == 2 {
                    _ = try await store.transition(id: id, to: .wiped, allowedFrom: [.active], audit: Self.audit("registration.wipe"))
                }
            }
            let filters = [
                RegistrationFilter(), RegistrationFilter(user: Self.alice), RegistrationFilter(app: "demo"), RegistrationFilter(state: .locked),
                RegistrationFilter(app: "demo", state: .active), RegistrationFilter(user: Self.idpAlice, app: "other", state: .active),
                RegistrationFilter(app: "nothing"),
            ]
            var added = 0
            for filter in filters {
                let before = try await store.registrations(matching: filter)
                let expected = Set(before.map(\.id))
                var seen: [String] = []
                var latecomers: Set<String> = []
                var behind: Set<String> = []
                var after: String?
                while true {
                    let page = try await store.registrations(matching: filter, after: after, limit: 7)
                    #expect(page.count <= 7)
                    #expect(page.allSatisfy { Self.matches($0, filter) }, "\(filter): a registration the filter does not select")
                    seen += page.map(\.id)
                    guard page.count == 7, let last = page.last else { break }
                    after = last.id
                    // One behind the reader ("-…", counting down, sorts before every id before it),
                    // one ahead ("zz…", counting up, after every id before it).
                    added += 1
                    let behindID = "-\(String(format: "%04d", 9_999 - added))", aheadID = "zz\(String(format: "%04d", added))"
                    for (id, ahead) in [(behindID, false), (aheadID, true)] {
                        let latecomer = Registration(id: id, appId: "demo", user: Self.alice, deviceType: "iOS", createdAt: 1)
                        #expect(try await store.insert(latecomer, maximumPerUser: nil, audit: nil) == .inserted)
                        if !ahead {
                            behind.insert(id)
                        } else if Self.matches(latecomer, filter) {
                            latecomers.insert(id)
                        }
                    }
                }
                #expect(Set(seen).count == seen.count, "\(filter): a registration listed twice: \(seen)")
                #expect(zip(seen, seen.dropFirst()).allSatisfy { Self.precedes($0, $1) }, "\(filter): not in the order of bytes: \(seen)")
                #expect(Set(seen) == expected.union(latecomers), "\(filter): \(seen) against \(expected.sorted()) and \(latecomers.sorted())")
                #expect(behind.isDisjoint(with: seen), "\(filter): a registration added behind the reader was listed")
            }
            #expect(added > 0, "some filter needed more than one page")
            // Bytes, not numbers or case: "R1" < "Zeta" < "_u" < "a.b" < "r1" < "r1-" < "r10".
            let all = try await store.registrations(matching: RegistrationFilter(), after: "R0", limit: 3).map(\.id)
            #expect(all == ["R1", "Zeta", "_u"])
            #expect(try await store.registrations(matching: RegistrationFilter(), after: "r1", limit: 2).map(\.id) == ["r1-", "r10"])
            // A place no registration has is a place all the same; past the last, nothing; no limit, nothing.
            #expect(try await store.registrations(matching: RegistrationFilter(), after: "zzz", limit: 5).isEmpty)
            #expect(try await store.registrations(matching: RegistrationFilter(), after: nil, limit: 0).isEmpty)
            #expect(try await store.registrations(matching: RegistrationFilter(), after: nil, limit: -1).isEmpty)
        }
    }

    /// Each filter's page is one range of its index, on a table of 50 000 registrations whose
    /// statistics the planner has: SQLite's `EXPLAIN QUERY PLAN` searches the index named (no
    /// SCAN of the table, no sort), PostgreSQL's `EXPLAIN` reads it (no Seq Scan). The
    /// app is a rare one (0.2 %): for an app with every twentieth registration, PostgreSQL
    /// rightly prefers the primary key's range with a filter (about 20 rows read per row
    /// listed); for a rare one that would read most of the table, and it takes the app's index.
    @Test(arguments: StoreKind.allCases) func eachFilterReadsARangeOfItsIndex(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            switch kind {
            case .sqlite:
                try await test.execute(
                    """
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000)
                    INSERT INTO registration (id, app_id, user_realm, user_id, device_type, device_model, device_id, form_factor,
                        apns_device_token, android_gcm_registration_id, created_at, last_contact_at, state, details)
                    SELECT printf('bulk-%05d', i), CASE WHEN i % 500 = 3 THEN 'rare' ELSE 'app-' || (i % 20) END, '', 'user-' || (i % 100), 'iOS', '', '', '', '', '', i, i,
                        CASE i % 50 WHEN 0 THEN 'locked' WHEN 1 THEN 'wiped' ELSE 'active' END, '{}' FROM n;
                    ANALYZE;
                    """)
            case .postgres:
                try await test.execute(
                    """
                    INSERT INTO midtier_registration (id, app_id, user_realm, user_id, device_type, device_model, device_id, form_factor,
                        apns_device_token, android_gcm_registration_id, created_at, last_contact_at, state, details)
                    SELECT 'bulk-' || lpad(i::text, 5, '0'), CASE WHEN i % 500 = 3 THEN 'rare' ELSE 'app-' || (i % 20) END, '', 'user-' || (i % 100), 'iOS', '', '', '', '', '', i, i,
                        CASE i % 50 WHEN 0 THEN 'locked' WHEN 1 THEN 'wiped' ELSE 'active' END, '{}' FROM generate_series(1, 50000) AS i
                    """)
                try await test.execute("ANALYZE midtier_registration")
            }
            let user = UserIdentity.local("user-7")
            let cases: [(RegistrationFilter, sqlite: String, postgres: String)] = [
                (RegistrationFilter(), "sqlite_autoindex_registration_1", "midtier_registration_pkey"),
                (RegistrationFilter(user: user), "registration_by_user", "midtier_registration_by_user"),
                (RegistrationFilter(app: "rare"), "registration_by_app", "midtier_registration_by_app"),
                (RegistrationFilter(state: .locked), "registration_by_state", "midtier_registration_by_state"),
                (RegistrationFilter(app: "rare", state: .active), "registration_by_app_state", "midtier_registration_by_app_state"),
                (RegistrationFilter(user: user, app: "app-7", state: .active), "registration_by_user", "midtier_registration_by_user"),
            ]
            for (filter, sqliteIndex, postgresIndex) in cases {
                let page = RegistrationRules.registrations(matching: filter, after: "bulk-02500", limit: 101)
                let plan = try await Self.plan(of: page, in: store)
                switch kind {
                case .sqlite:
                    #expect(plan.contains("SEARCH registration USING INDEX \(sqliteIndex) ("), "\(filter): \(plan)")
                    #expect(!plan.contains("SCAN"), "\(filter): \(plan)")
                    #expect(!plan.contains("TEMP B-TREE"), "\(filter): \(plan)")
                case .postgres:
                    // An ordered scan of the index, or (when it expects few rows, as for the rare
                    // app's hundred) a bitmap scan of it and a sort of what it found: both read
                    // the index's range only.
                    #expect(
                        plan.contains("Index Scan using \(postgresIndex) on midtier_registration")
                            || plan.contains("Bitmap Index Scan on \(postgresIndex) "), "\(filter): \(plan)")
                    #expect(!plan.contains("Seq Scan"), "\(filter): \(plan)")
                }
                // And the page is what it should be.
                let found = try await store.registrations(matching: filter, after: "bulk-02500", limit: 101)
                #expect(found.allSatisfy { Self.matches($0, filter) && Self.precedes("bulk-02500", $0.id) }, "\(filter)")
            }
        }
    }

    /// The plan the store makes for `query`, its lines joined.
    static func plan(of query: StoreQuery, in store: any StateStore) async throws -> String {
        if let sqlite = store as? SQLiteStore {
            return try await sqlite.rows("EXPLAIN QUERY PLAN " + query) { try $0.text("detail") }.joined(separator: "\n")
        }
        let postgres = try #require(store as? PostgresStore)
        return try await postgres.rows("EXPLAIN " + query) { try $0.text("QUERY PLAN") }.joined(separator: "\n")
    }

    /// Push notifications newest first, a page at a time after the last one read: ties in time
    /// by the ids' bytes, each once, of one app by its bytes or of all, one index range.
    @Test(arguments: StoreKind.allCases) func pushNotificationsPageNewestFirst(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: true)
            let push = try #require(store.pushStore)
            var all: [PushNotificationRecord] = []
            for index in 0..<23 {
                // Three at each time: the id decides among them.
                let record = PushNotificationRecord(
                    id: "n-\(index)", app: index % 2 == 0 ? "demo" : "caf\u{E9}", sender: "erp", payload: "{}",
                    createdAt: 1_000 + Int64(index / 3))
                try await push.enqueue(record, registrations: ["r"])
                all.append(record)
            }
            let newestFirst = all.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : Self.precedes($1.id, $0.id) }
            for app in [nil, "demo", "caf\u{E9}", "cafe\u{301}"] {
                var seen: [String] = []
                var before: PushNotificationCursor?
                while true {
                    let page = try await push.recentPushNotifications(app: app, before: before, limit: 4)
                    seen += page.map(\.id)
                    guard page.count == 4, let last = page.last else { break }
                    before = PushNotificationCursor(after: last)
                }
                let expected = newestFirst.filter { app == nil || UserIdentity.sameBytes($0.app, app!) }.map(\.id)
                #expect(seen == expected, "\(app ?? "every app")")
            }
            // SQLite: a range of the app's or the time's index, read backwards, no sort. (On
            // PostgreSQL these few rows are read whole whatever the indexes.)
            if kind == .sqlite, let base = (store as? CachedStateStore)?.base {
                for (app, index) in [(nil, "push_notifications_created"), ("demo", "push_notifications_app")] {
                    let query = PushRules.recent(app: app, before: PushNotificationCursor(createdAt: 1_004, id: "n-13"), limit: 11)
                    let plan = try await Self.plan(of: query, in: base)
                    #expect(plan.contains("SEARCH n USING INDEX \(index) ("), "\(plan)")
                    #expect(!plan.contains("TEMP B-TREE"), "\(plan)")
                }
            }
        }
    }
}
