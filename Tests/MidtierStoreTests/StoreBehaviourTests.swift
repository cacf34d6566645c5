import Foundation
import MidtierCore
import MidtierStore
import MidtierTestSupport
import Registrations
import Synchronization
import Testing

/// What every store does the same, run against SQLite and PostgreSQL without the memory
/// cache; and what sharing a PostgreSQL store between instances needs (docs/operations.md).
@Suite(.timeLimit(.minutes(10))) struct StoreBehaviourTests {
    static func registration(_ id: String, user: UserIdentity = .local("alice"), at: Int64 = 1_000) -> Registration {
        Registration(id: id, appId: "demo", user: user, deviceType: "iPad", createdAt: at)
    }

    static func audit(_ action: String, at: Int64 = 1_000) -> AuditEntry {
        AuditEntry(at: at, actor: "admin#1", action: action, target: "t")
    }

    /// The bulk path a benchmark store is made by (`midtier-bench make-store`) writes every field
    /// as given and skips ids in use; PostgreSQL's is one statement per batch.
    @Test(arguments: StoreKind.allCases) func theBulkPathWritesEachRegistrationAsGiven(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            #expect(try await store.insert(Self.registration("bulk-0"), maximumPerUser: nil, audit: nil) == .inserted)
            let made = (0..<3).map { (n: Int) -> Registration in
                let user = UserIdentity(realm: "realm-\(n)", id: "user \(n) 'ü'")
                let details = ["CustomKey": "value \(n)", "DeviceLocale": "de_DE"]
                return Registration(
                    id: "bulk-\(n)", appId: "demo", user: user, deviceType: "Android", deviceModel: "Pixel \(n)", deviceId: "device-\(n)",
                    formFactor: "phone", apnsDeviceToken: n == 1 ? "apns-1" : "", androidGcmRegistrationId: "fcm-\(n)",
                    createdAt: 1_000 + Int64(n), lastContactAt: 2_000 + Int64(n), state: n == 2 ? .locked : .active, details: details)
            }
            let written: Int
            switch store {
            case let sqlite as SQLiteStore: written = try await sqlite.importRegistrations(made)
            case let postgres as PostgresStore: written = try await postgres.importRegistrations(made)
            default: throw TestStoreError("not a store with a bulk path: \(store)")
            }
            #expect(written == 2, "bulk-0 was taken")
            #expect(try await store.registration(id: "bulk-0") == Self.registration("bulk-0"))
            for registration in made.dropFirst() { #expect(try await store.registration(id: registration.id) == registration) }
        }
    }

    /// The insert itself refuses a device the user's locked or wiped registration holds (same
    /// app, `DeviceId` and user, by bytes), in its own transaction: a lock that commits between
    /// the onboarding's check and its insert cannot be escaped (docs/identity.md, "The same device").
    @Test(arguments: StoreKind.allCases) func anInsertRefusesADeviceHeldByALockOrWipe(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: true)
            func device(_ id: String, _ deviceId: String, user: UserIdentity = .local("alice"), app: String = "demo") -> Registration {
                Registration(id: id, appId: app, user: user, deviceType: "iOS", deviceId: deviceId, createdAt: 1_000)
            }
            #expect(try await store.insert(device("phone", "dev-1"), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(
                try await store.insert(device("again", "dev-1"), maximumPerUser: nil, audit: nil) == .inserted,
                "an active registration of the device does not hold it")
            _ = try await store.transition(id: "phone", to: .locked, allowedFrom: [.active], audit: Self.audit("registration.lock"))
            #expect(try await store.insert(device("escape", "dev-1"), maximumPerUser: nil, audit: nil) == .deviceHeld(id: "phone"))
            #expect(try await store.registration(id: "escape") == nil)
            // Another device, another user, another app, a DeviceId only canonically equal, or none: not held.
            #expect(try await store.insert(device("new-phone", "dev-2"), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.insert(device("bob", "dev-1", user: .local("bob")), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.insert(device("other-app", "dev-1", app: "other"), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.insert(device("nfc", "caf\u{E9}"), maximumPerUser: nil, audit: nil) == .inserted)
            _ = try await store.transition(id: "nfc", to: .wiped, allowedFrom: [.active], audit: Self.audit("registration.wipe"))
            #expect(try await store.insert(device("nfd", "cafe\u{301}"), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.insert(device("nfc-again", "caf\u{E9}"), maximumPerUser: nil, audit: nil) == .deviceHeld(id: "nfc"))
            #expect(try await store.insert(device("no-device-1", ""), maximumPerUser: nil, audit: nil) == .inserted)
            _ = try await store.transition(id: "no-device-1", to: .locked, allowedFrom: [.active], audit: Self.audit("registration.lock"))
            #expect(try await store.insert(device("no-device-2", ""), maximumPerUser: nil, audit: nil) == .inserted)
            // Unlocked by an admin: the device onboards again.
            _ = try await store.transition(id: "phone", to: .active, allowedFrom: [.locked], audit: Self.audit("registration.unlock"))
            #expect(try await store.insert(device("back", "dev-1"), maximumPerUser: nil, audit: nil) == .inserted)
        }
    }

    @Test(arguments: StoreKind.allCases) func registrationsRoundTrip(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            let alice = UserIdentity.local("alice"), idpAlice = UserIdentity(realm: "https://idp.test", id: "alice")
            #expect(
                try await store.insert(Self.registration("r1", at: 1), maximumPerUser: nil, audit: Self.audit("registration.create")) == .inserted)
            #expect(try await store.insert(Self.registration("r1", at: 2), maximumPerUser: nil, audit: nil) == .idTaken)
            #expect(try await store.insert(Self.registration("r2", user: idpAlice, at: 2), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.insert(Self.registration("r3", at: 3), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.registration(id: "r1") == Self.registration("r1", at: 1))
            #expect(try await store.registration(id: "R1") == nil, "ids compare by bytes")
            #expect(try await store.registrations(matching: RegistrationFilter(user: alice)).map(\.id) == ["r1", "r3"])
            #expect(try await store.registrations(matching: RegistrationFilter(user: idpAlice)).map(\.id) == ["r2"])
            #expect(try await store.registrations(matching: RegistrationFilter()).map(\.id) == ["r1", "r2", "r3"])

            var changed = Self.registration("r1", at: 1)
            changed.deviceModel = "iPad13,1"
            #expect(try await store.updateDevice(changed, audit: nil) == .written)
            #expect(try await store.registration(id: "r1")?.deviceModel == "iPad13,1")
            #expect(try await store.updateDevice(Self.registration("missing"), audit: nil) == .notFound)

            guard
                case .changed(let locked) = try await store.transition(
                    id: "r1", to: .locked, allowedFrom: [.active], audit: Self.audit("registration.lock"))
            else {
                Issue.record("lock refused"); return
            }
            #expect(locked.state == .locked)
            #expect(try await store.transition(id: "r1", to: .locked, allowedFrom: [.active], audit: Self.audit("x")) == .refused(current: .locked))
            #expect(try await store.transition(id: "missing", to: .locked, allowedFrom: [.active], audit: Self.audit("x")) == .notFound)
            #expect(try await store.registrations(matching: RegistrationFilter(state: .locked)).map(\.id) == ["r1"])

            try await store.recordContacts([Contact(id: "r3", at: 5_000)])
            try await store.recordContacts([Contact(id: "r3", at: 4_000), Contact(id: "missing", at: 6_000)])
            #expect(try await store.registration(id: "r3")?.lastContactAt == 5_000, "the last contact never moves back")

            #expect(try await store.delete(id: "r1", allowedFrom: [.active], audit: nil) == .refused(current: .locked))
            guard case .deleted = try await store.delete(id: "r1", allowedFrom: [.active, .locked], audit: Self.audit("registration.delete")) else {
                Issue.record("delete refused"); return
            }
            #expect(try await store.registration(id: "r1") == nil)
            #expect(try await store.insert(Self.registration("r1"), maximumPerUser: nil, audit: nil) == .idTaken, "a deleted id is retired")
            #expect(try await store.registrationAndBlock(id: "r3")?.registration.id == "r3")
            #expect(await store.ping())
        }
    }

    /// Last contacts are noted in memory and written in batches; a flush that fails keeps them
    /// for the next one (docs/operations.md, "Last contact").
    /// The Connection entity's other fields survive the store, and a device update replaces them.
    @Test(arguments: StoreKind.allCases) func connectionDetailsRoundTrip(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            var registration = Self.registration("r1")
            registration.details = ["Email": "alice@example.com", "ApnsPushEnable": "true", "CustomCustom1": "caf\u{E9} \"quoted\""]
            #expect(try await store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.registration(id: "r1")?.details == registration.details)
            registration.details = ["TimeZone": "Europe/Berlin"]
            #expect(try await store.updateDevice(registration, audit: nil) == .written)
            #expect(try await store.registration(id: "r1")?.details == ["TimeZone": "Europe/Berlin"])
            #expect(try await store.insert(Self.registration("r2"), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await store.registration(id: "r2")?.details == [:])
        }
    }

    @Test(arguments: StoreKind.allCases) func lastContactsAreWrittenInBatches(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: true)
            let ids = (1...5).map { "r\($0)" } + ["caf\u{E9}", "cafe\u{301}"]
            for id in ids { #expect(try await store.insert(Self.registration(id), maximumPerUser: nil, audit: nil) == .inserted) }
            let contacts = ContactRecorder(store: store, batchSize: 2)
            for (n, id) in ids.enumerated() { contacts.record(id: id, at: 10_000 + Int64(n)) }
            contacts.record(id: "r1", at: 20_000)
            contacts.record(id: "r1", at: 15_000)
            contacts.record(id: "gone", at: 20_000)
            #expect(contacts.waiting == ids.count + 1, "one entry a registration, by exact bytes")
            #expect(try await store.registration(id: "r1")?.lastContactAt == 1_000, "nothing written before a flush")

            // The store fails: nothing is lost, the next flush writes it.
            try await test.execute("ALTER TABLE \(test.registrationTable) RENAME TO broken")
            await #expect(throws: StoreError.self) { try await contacts.flush() }
            #expect(contacts.waiting == ids.count + 1)
            try await test.execute("ALTER TABLE broken RENAME TO \(test.registrationTable)")
            contacts.record(id: "r2", at: 30_000)
            try await contacts.flush()
            #expect(contacts.waiting == 0)

            let fresh = try await test.open(cached: false)
            #expect(try await fresh.registration(id: "r1")?.lastContactAt == 20_000, "the newest contact")
            #expect(try await fresh.registration(id: "r2")?.lastContactAt == 30_000, "noted while the store was down")
            #expect(try await fresh.registration(id: "caf\u{E9}")?.lastContactAt == 10_005)
            #expect(try await fresh.registration(id: "cafe\u{301}")?.lastContactAt == 10_006)
            #expect(try await store.registration(id: "r5")?.lastContactAt == 10_004, "memory learns what was written")
        }
    }

    /// A new page session whose key is in use is refused, and the session that holds the key
    /// stays its owner's: a sign-in never hands out a cookie that names someone else's session.
    @Test(arguments: StoreKind.allCases) func aPageSessionKeyInUseIsNotTaken(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            func session(_ subject: String) -> StoredPageSession {
                StoredPageSession(
                    key: String(repeating: "a", count: 64), site: "console", subject: .local(subject), credentialStamp: subject,
                    csrfToken: "t-\(subject)", startedAt: 1_000, endsAt: 100_000, lastSeen: 1_000, idleMilliseconds: 50_000)
            }
            let bounds = PageSessionBounds(capacity: 10, perSubject: 5)
            try await store.startPageSession(session("alice"), bounds: bounds, now: 1_000)
            await #expect(throws: StoreError.self) { try await store.startPageSession(session("bob"), bounds: bounds, now: 2_000) }
            let used = try await store.usePageSession(key: String(repeating: "a", count: 64), site: "console", now: 3_000, takingNotice: false)
            #expect(used?.subject == .local("alice") && used?.csrfToken == "t-alice")
        }
    }

    @Test(arguments: StoreKind.allCases) func blocksAndAudit(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            let bob = UserIdentity.local("bob")
            try await store.setBlock(
                UserBlock(user: bob, kind: .traffic, reason: "lost", since: 10, by: "admin#1"), audit: Self.audit("user.block", at: 10))
            try await store.setBlock(
                UserBlock(user: bob, kind: .all, reason: "left", since: 20, by: "admin#2"), audit: Self.audit("user.block", at: 20))
            #expect(
                try await store.block(of: bob) == UserBlock(user: bob, kind: .all, reason: "left", since: 20, by: "admin#2"),
                "a block replaces the one before")
            _ = try await store.insert(Self.registration("b1", user: bob), maximumPerUser: nil, audit: nil)
            let both = try await store.registrationAndBlock(id: "b1")
            #expect(both?.registration.id == "b1" && both?.registration.user == bob)
            #expect(both?.block == UserBlock(user: bob, kind: .all, reason: "left", since: 20, by: "admin#2"), "every field of the block")
            #expect(try await store.registrationAndBlock(id: "nobody") == nil)
            #expect(try await store.removeBlock(of: bob, audit: Self.audit("user.unblock", at: 30)))
            #expect(try await store.removeBlock(of: bob, audit: Self.audit("user.unblock", at: 31)) == false)
            #expect(try await store.block(of: bob) == nil)
            #expect(try await store.registrationAndBlock(id: "b1")?.block == nil, "without a block, none")
            try await store.purgeTokens(of: bob, audit: Self.audit("tokens.purge", at: 40))
            try await store.appendAudit(Self.audit("config.reload", at: 50))

            let entries = try await store.audit(since: 0, after: 0, limit: 100)
            #expect(entries.map(\.action) == ["user.block", "user.block", "user.unblock", "tokens.purge", "config.reload"])
            #expect(entries.map(\.sequence) == entries.map(\.sequence).sorted() && Set(entries.map(\.sequence)).count == entries.count)
            #expect(try await store.audit(since: 25, after: 0, limit: 100).map(\.at) == [30, 40, 50])
            #expect(try await store.audit(since: 0, after: 0, limit: 2).count == 2)
            // Paging by sequence: each page starts after the last entry of the one before.
            var paged: [AuditEntry] = []
            while let page = Optional(try await store.audit(since: 0, after: paged.last?.sequence ?? 0, limit: 2)), !page.isEmpty {
                paged += page
            }
            #expect(paged == entries)
            #expect(try await store.audit(since: 25, after: entries[3].sequence, limit: 100).map(\.at) == [50], "since and after together")
        }
    }

    /// Instances writing at once through one PostgreSQL: migrations apply once, a user's limit
    /// holds under concurrent onboarding, and audit numbers follow commit order.
    @Test func instancesSharingPostgreSQL() async throws {
        try await withTestStore(.postgres) { test in
            // Four instances start together on an empty database.
            let stores = try await withThrowingTaskGroup(of: (any StateStore).self) { group in
                for _ in 0..<4 { group.addTask { try await test.open(cached: false) } }
                var opened: [any StateStore] = []
                for try await store in group { opened.append(store) }
                return opened
            }
            #expect(stores.count == 4)

            // Twenty onboardings of one user at once, five per instance, with a limit of three.
            let outcomes = try await withThrowingTaskGroup(of: InsertOutcome.self) { group in
                for n in 0..<20 {
                    let store = stores[n % 4]
                    group.addTask {
                        try await store.insert(Self.registration("race-\(n)"), maximumPerUser: 3, audit: Self.audit("registration.create"))
                    }
                }
                var all: [InsertOutcome] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            #expect(outcomes.filter { $0 == .inserted }.count == 3, "\(outcomes)")
            #expect(try await stores[0].registrations(matching: RegistrationFilter(user: .local("alice"))).count == 3)

            // Audit entries from all four, concurrently, while a reader pages with `after`: one
            // order by sequence, and the reader misses none (sequences follow commit order).
            let reader = stores[3]
            let paging = Task {
                var seen: [Int64] = []
                for _ in 0..<10_000 where seen.count < 43 {
                    let page = try await reader.audit(since: 0, after: seen.last ?? 0, limit: 3)
                    seen += page.map(\.sequence)
                    if page.isEmpty { try await Task.sleep(for: .milliseconds(1)) }
                }
                return seen
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<40 {
                    let store = stores[n % 4]
                    group.addTask { try await store.appendAudit(Self.audit("config.reload", at: Int64(n))) }
                }
                try await group.waitForAll()
            }
            let entries = try await stores[1].audit(since: 0, after: 0, limit: 1000)
            #expect(entries.count == 43)
            #expect(entries.map(\.sequence) == entries.map(\.sequence).sorted())
            #expect(try await paging.value == entries.map(\.sequence), "paging while others write misses nothing")
        }
    }

    /// Another instance's changes reach this one through the change feed, in order, each
    /// named as what memory must forget.
    @Test func theChangeFeedDeliversOtherInstancesChangesInOrder() async throws {
        try await withTestStore(.postgres) { test in
            let writer = try await test.open(cached: false)
            let reader = try #require(try await test.open(cached: false) as? PostgresStore)
            let feed = PostgresChangeFeed(store: reader, pollInterval: .milliseconds(200), logger: TestStore.logger)
            let received = Mutex<[StoreChange]>([])
            let running = Task { await feed.run { event in if case .changes(let changes) = event { received.withLock { $0 += changes } } } }
            defer { running.cancel() }
            // The feed has started once a probe change made after its start reaches it.
            let probe = UserIdentity.local("probe")
            for _ in 0..<100 where !received.withLock({ $0.contains(.tokens(user: probe)) }) {
                try await writer.purgeTokens(of: probe, audit: Self.audit("tokens.purge"))
                try await Task.sleep(for: .milliseconds(50))
            }
            received.withLock { $0.removeAll() }

            let bob = UserIdentity.local("bob")
            _ = try await writer.insert(Self.registration("r1"), maximumPerUser: nil, audit: nil)
            _ = try await writer.transition(id: "r1", to: .locked, allowedFrom: [.active], audit: Self.audit("registration.lock"))
            try await writer.setBlock(UserBlock(user: bob, kind: .all, reason: "", since: 1, by: "admin#1"), audit: Self.audit("user.block"))
            try await writer.purgeTokens(of: bob, audit: Self.audit("tokens.purge"))
            _ = try await writer.updateDevice(Self.registration("r1"), audit: nil)
            _ = try await writer.delete(id: "r1", allowedFrom: [.locked], audit: nil)
            // The creation too: another instance may have remembered r1 as unknown.
            let expected: [StoreChange] = [
                .created(id: "r1"), .registration(id: "r1"), .block(user: bob), .tokens(user: bob), .device(id: "r1"),
                .registration(id: "r1"),
            ]
            // (A probe sent before the first one arrived may still come late: it is only a start signal.)
            for _ in 0..<100 where received.withLock({ $0.filter { $0 != .tokens(user: probe) }.count }) < expected.count {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(received.withLock { $0.filter { $0 != .tokens(user: probe) } } == expected)
        }
    }
}
