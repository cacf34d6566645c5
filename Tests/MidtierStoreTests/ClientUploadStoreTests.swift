import Foundation
import MidtierCore
import MidtierStore
import MidtierTestSupport
import Testing

/// Client log and usage uploads as every store keeps them (docs/device-api.md, "Client logs and
/// usage"), on SQLite and on PostgreSQL, through the memory cache as an instance opens them.
@Suite(.timeLimit(.minutes(10))) struct ClientUploadStoreTests {
    static let alice = UserIdentity.local("alice")
    static let bob = UserIdentity.local("bob")
    static let roomy = ClientUploadBounds(bytesPerRegistration: 1 << 30, uploadsPerWindow: 1_000, window: 60_000)

    static func register(_ store: any StateStore, _ id: String, user: UserIdentity = alice, app: String = "demo") async throws {
        let registration = Registration(id: id, appId: app, user: user, deviceType: "iOS", deviceId: "dev-\(id)", createdAt: 1_000)
        #expect(try await store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
    }

    static func upload(
        _ id: String, _ kind: ClientUploadKind = .log, registration: String, user: UserIdentity = alice,
        app: String = "demo", at: Int64 = 10_000, size: Int = 10, report: String = ""
    ) -> ClientUpload {
        ClientUpload(
            id: id, kind: kind, app: app, user: user, registration: registration, deviceId: "dev-\(registration)",
            receivedAt: at, size: size, report: kind == .usage && report.isEmpty ? #"{"v":"\#(id)"}"# : report)
    }

    static func entry(
        _ upload: String, _ sequence: Int, at time: Int64, _ severity: ClientLogSeverity = .info,
        _ message: String = "hello"
    ) -> ClientLogEntry {
        ClientLogEntry(
            upload: upload, sequence: sequence, time: time, severity: severity, correlationId: "c-\(sequence)",
            source: "App", location: "Main.swift", message: message)
    }

    /// Saves and expects it kept, with `dropped` older ones dropped.
    static func save(
        _ store: any StateStore, _ upload: ClientUpload, _ entries: [ClientLogEntry] = [],
        bounds: ClientUploadBounds = roomy, now: Int64 = 10_000, dropped: Int = 0
    ) async throws {
        let result = try await store.saveClientUpload(upload, entries: entries, bounds: bounds, now: now)
        #expect(result == .saved(dropped: dropped), "\(upload.id)")
    }

    static func audit(_ action: String) -> AuditEntry { AuditEntry(at: 1_000, actor: "admin#1", action: action, target: "t") }

    static func logs(_ store: any StateStore, _ filter: ClientUploadFilter = ClientUploadFilter()) async throws -> [String] {
        try await store.clientLogs(matching: filter, after: nil, limit: 1_000).map { "\($0.entry.upload)/\($0.entry.sequence)" }
    }

    static func uploads(
        _ store: any StateStore, _ kind: ClientUploadKind,
        _ filter: ClientUploadFilter = ClientUploadFilter()
    ) async throws -> [String] {
        try await store.clientUploads(kind, matching: filter, after: nil, limit: 1_000).map(\.id)
    }

    /// Whether an entry keyed (`upload`, `sequence`) is still in the table, whatever upload it
    /// belongs to: inserting one with the same key fails while it is.
    static func entryRemains(_ test: TestStore, upload: String, sequence: Int = 0) async -> Bool {
        let table = test.kind == .sqlite ? "client_log_entries" : "midtier_client_log_entries"
        do {
            try await test.execute(
                """
                INSERT INTO \(table) (upload_id, sequence, time, severity, severity_rank, correlation_id, source, location, message)
                VALUES ('\(upload)', \(sequence), 0, 'INFO', 1, '', '', '', 'probe')
                """)
            return false
        } catch {
            return true
        }
    }

    /// A log of more entries than one statement inserts (``ClientUploadRules/entriesPerInsert``)
    /// is kept whole, every entry with its own fields, in one transaction.
    @Test(arguments: StoreKind.allCases) func aLongLogIsKeptWhole(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            try await Self.register(store, "r1")
            let entries = (0..<1_201).map { Self.entry("u1", $0, at: 5_000 + Int64($0), .warn, "line \($0) 50% _done_") }
            try await Self.save(store, Self.upload("u1", registration: "r1", size: 100_000), entries)
            let kept = try await store.clientLogs(matching: ClientUploadFilter(), after: nil, limit: 2_000)
            #expect(kept.count == 1_201)
            #expect(kept.map(\.entry) == entries.reversed())
            let found = try await Self.logs(store, ClientUploadFilter(text: "line 1200 50% _"))
            #expect(found == ["u1/1200"])
        }
    }

    @Test(arguments: StoreKind.allCases) func savedUploadsListByEveryFilter(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            try await Self.register(store, "r1")
            try await Self.register(store, "r2", user: Self.bob)
            try await Self.register(store, "r3", app: "other")
            let first = Self.upload("u1", registration: "r1", at: 10_000)
            let entries = [
                Self.entry("u1", 0, at: 1_000, .debug, "starting"), Self.entry("u1", 1, at: 2_000, .warn, "slow network"),
                Self.entry("u1", 2, at: 3_000, .fatal, "crashed"),
            ]
            try await Self.save(store, first, entries)
            try await Self.save(
                store, Self.upload("u2", registration: "r2", user: Self.bob, at: 11_000),
                [Self.entry("u2", 0, at: 2_500, .error, "bob's error")])
            try await Self.save(
                store, Self.upload("u3", registration: "r3", app: "other", at: 12_000),
                [Self.entry("u3", 0, at: 1_500, .info, "other app")])
            let usage = Self.upload("s1", .usage, registration: "r1", at: 13_000, size: 30, report: #"{"events":[{"n":"é"}]}"#)
            try await Self.save(store, usage)
            try await Self.save(store, Self.upload("s2", .usage, registration: "r2", user: Self.bob, at: 14_000))

            // Everything, newest entry first; each record carries its upload as saved.
            let all = try await store.clientLogs(matching: ClientUploadFilter(), after: nil, limit: 100)
            #expect(all.map { "\($0.entry.upload)/\($0.entry.sequence)" } == ["u1/2", "u2/0", "u1/1", "u3/0", "u1/0"])
            #expect(all.first == ClientLogRecord(entry: entries[2], upload: first))
            #expect(try await Self.logs(store, ClientUploadFilter(registration: "r1")) == ["u1/2", "u1/1", "u1/0"])
            #expect(try await Self.logs(store, ClientUploadFilter(user: Self.bob)) == ["u2/0"])
            #expect(try await Self.logs(store, ClientUploadFilter(user: Self.alice)) == ["u1/2", "u1/1", "u3/0", "u1/0"])
            #expect(try await Self.logs(store, ClientUploadFilter(app: "other")) == ["u3/0"])
            #expect(try await Self.logs(store, ClientUploadFilter(minimumSeverity: .warn)) == ["u1/2", "u2/0", "u1/1"])
            #expect(try await Self.logs(store, ClientUploadFilter(minimumSeverity: .fatal)) == ["u1/2"])
            #expect(
                try await Self.logs(store, ClientUploadFilter(from: 1_500, until: 3_000)) == ["u2/0", "u1/1", "u3/0"],
                "from is inclusive, until exclusive, on the entry's own time")
            #expect(try await Self.logs(store, ClientUploadFilter(text: "error")) == ["u2/0"])
            #expect(try await Self.logs(store, ClientUploadFilter(text: "Error")).isEmpty, "text compares by bytes")
            #expect(
                try await Self.logs(
                    store,
                    ClientUploadFilter(
                        registration: "r1", user: Self.alice, app: "demo", minimumSeverity: .warn,
                        from: 2_000, until: 4_000, text: "net")) == ["u1/1"])
            #expect(try await Self.logs(store, ClientUploadFilter(registration: "r1", user: Self.bob)).isEmpty)
            #expect(try await store.clientLogs(matching: ClientUploadFilter(), after: nil, limit: 2).count == 2)
            #expect(
                try await store.clientLogs(matching: ClientUploadFilter(), after: nil, limit: -1).isEmpty,
                "a negative limit is no rows, not every row")

            // Uploads of a kind, newest received first.
            #expect(try await Self.uploads(store, .log) == ["u3", "u2", "u1"])
            #expect(try await Self.uploads(store, .usage) == ["s2", "s1"])
            #expect(try await store.clientUploads(.usage, matching: ClientUploadFilter(registration: "r1"), after: nil, limit: 10) == [usage])
            #expect(try await Self.uploads(store, .usage, ClientUploadFilter(user: Self.bob)) == ["s2"])
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(app: "demo")) == ["u2", "u1"])
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(from: 11_000, until: 12_000)) == ["u2"])
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(registration: "r2", app: "other")).isEmpty)
        }
    }

    /// A user is a realm and an id compared by their bytes: a precomposed and a decomposed "é"
    /// are two users, and the same id in another realm is another user (docs/identity.md).
    @Test(arguments: StoreKind.allCases) func theUserFilterComparesBytes(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            let composed = UserIdentity.local("ren\u{E9}"), decomposed = UserIdentity.local("rene\u{301}")
            let elsewhere = UserIdentity(realm: "https://idp.test", id: "ren\u{E9}")
            for (id, user) in [("rc", composed), ("rd", decomposed), ("re", elsewhere)] {
                try await Self.register(store, id, user: user)
                try await Self.save(store, Self.upload("u-\(id)", registration: id, user: user), [Self.entry("u-\(id)", 0, at: 1_000)])
                try await Self.save(store, Self.upload("s-\(id)", .usage, registration: id, user: user))
            }
            for (id, user) in [("rc", composed), ("rd", decomposed), ("re", elsewhere)] {
                let records = try await store.clientLogs(matching: ClientUploadFilter(user: user), after: nil, limit: 10)
                #expect(records.map(\.entry.upload) == ["u-\(id)"])
                #expect(records.allSatisfy { UserIdentity.sameBytes($0.upload.user.id, user.id) })
                let usage = try await store.clientUploads(.usage, matching: ClientUploadFilter(user: user), after: nil, limit: 10)
                #expect(usage.map(\.id) == ["s-\(id)"])
                #expect(usage.allSatisfy { UserIdentity.sameBytes($0.user.id, user.id) && UserIdentity.sameBytes($0.user.realm, user.realm) })
            }
            // Nor does one upload on behalf of a registration of the other spelling.
            #expect(
                try await store.saveClientUpload(
                    Self.upload("x", registration: "rc", user: decomposed), entries: [],
                    bounds: Self.roomy, now: 10_000) == .registrationInactive)
            #expect(
                try await store.saveClientUpload(
                    Self.upload("y", registration: "rc", user: elsewhere), entries: [],
                    bounds: Self.roomy, now: 10_000) == .registrationInactive)
        }
    }

    /// Paging with the last item as the cursor misses nothing and repeats nothing, also where
    /// entries share a time across uploads.
    @Test(arguments: StoreKind.allCases) func cursorPagingIsExact(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            try await Self.register(store, "r1")
            var expected: Set<String> = []
            for upload in ["ua", "ub", "uc"] {
                // The same received time for all three uploads, and repeated entry times.
                let entries = (0..<7).map { Self.entry(upload, $0, at: Int64(1_000 + ($0 % 3) * 100)) }
                try await Self.save(store, Self.upload(upload, registration: "r1", at: 10_000), entries)
                try await Self.save(store, Self.upload("s-\(upload)", .usage, registration: "r1", at: upload == "ub" ? 9_000 : 10_000))
                expected.formUnion(entries.map { "\(upload)/\($0.sequence)" })
            }
            let everything = try await Self.logs(store)
            var paged: [String] = []
            var cursor: ClientUploadCursor?
            // Bounded: a cursor that repeats its last item would page forever.
            for _ in 0..<20 {
                let page = try await store.clientLogs(matching: ClientUploadFilter(), after: cursor, limit: 4)
                guard let last = page.last else { break }
                #expect(page.count <= 4)
                paged += page.map { "\($0.entry.upload)/\($0.entry.sequence)" }
                cursor = ClientUploadCursor(time: last.entry.time, upload: last.entry.upload, sequence: last.entry.sequence)
            }
            #expect(paged == everything)
            #expect(paged.count == 21 && Set(paged) == expected)
            #expect(Array(paged.prefix(3)) == ["uc/5", "uc/2", "ub/5"], "time, then upload, then sequence, all descending")

            var uploads: [String] = []
            cursor = nil
            for _ in 0..<20 {
                let page = try await store.clientUploads(.usage, matching: ClientUploadFilter(), after: cursor, limit: 2)
                guard let last = page.last else { break }
                uploads += page.map(\.id)
                cursor = ClientUploadCursor(time: last.receivedAt, upload: last.id, sequence: 0)
            }
            #expect(uploads == ["s-uc", "s-ua", "s-ub"])
        }
    }

    /// A registration makes at most `uploadsPerWindow` uploads of a kind in the window; the
    /// next is refused and writes nothing. Two instances at once cannot make more.
    @Test(arguments: StoreKind.allCases) func theRateWindowRefusesTooMany(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            try await Self.register(store, "r1")
            let bounds = ClientUploadBounds(bytesPerRegistration: 1 << 20, uploadsPerWindow: 2, window: 1_000)
            try await Self.save(store, Self.upload("u1", registration: "r1", at: 9_000), bounds: bounds, now: 9_000)
            try await Self.save(store, Self.upload("u2", registration: "r1", at: 9_500), bounds: bounds, now: 9_500)
            #expect(
                try await store.saveClientUpload(
                    Self.upload("u3", registration: "r1", at: 10_000), entries: [Self.entry("u3", 0, at: 1)],
                    bounds: bounds, now: 10_000) == .tooMany, "u1 is at the window's start: it counts")
            #expect(try await Self.uploads(store, .log) == ["u2", "u1"])
            #expect(try await Self.logs(store).isEmpty)
            // Another kind has its own count; the window moves on.
            try await Self.save(store, Self.upload("s1", .usage, registration: "r1", at: 10_000), bounds: bounds, now: 10_000)
            try await Self.save(store, Self.upload("u4", registration: "r1", at: 10_001), bounds: bounds, now: 10_001)

            // Ten uploads at once through two instances: exactly two are kept.
            try await Self.register(store, "r2")
            let other = try await test.open()
            let results = try await withThrowingTaskGroup(of: ClientUploadSave.self) { group in
                for n in 0..<10 {
                    let instance = n % 2 == 0 ? store : other
                    group.addTask {
                        try await instance.saveClientUpload(
                            Self.upload("c\(n)", registration: "r2", at: 20_000), entries: [],
                            bounds: bounds, now: 20_000)
                    }
                }
                var results: [ClientUploadSave] = []
                for try await result in group { results.append(result) }
                return results
            }
            #expect(results.filter { $0 == .saved(dropped: 0) }.count == 2)
            #expect(results.filter { $0 == .tooMany }.count == 8)
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(registration: "r2")).count == 2)
        }
    }

    /// The oldest uploads of the kind (with their entries) go until the kept fit the byte
    /// bound; the upload just saved stays even when alone it is larger.
    @Test(arguments: StoreKind.allCases) func theByteBoundDropsTheOldest(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            try await Self.register(store, "r1")
            try await Self.register(store, "r2")
            let bounds = ClientUploadBounds(bytesPerRegistration: 100, uploadsPerWindow: 100, window: 1_000)
            try await Self.save(store, Self.upload("u1", registration: "r1", at: 1_000, size: 40), [Self.entry("u1", 0, at: 1)], bounds: bounds)
            try await Self.save(store, Self.upload("u2", registration: "r1", at: 2_000, size: 40), [Self.entry("u2", 0, at: 2)], bounds: bounds)
            try await Self.save(store, Self.upload("s1", .usage, registration: "r1", at: 2_500, size: 90), bounds: bounds)
            try await Self.save(store, Self.upload("o1", registration: "r2", at: 500, size: 90), bounds: bounds)
            try await Self.save(store, Self.upload("u3", registration: "r1", at: 3_000, size: 20), [Self.entry("u3", 0, at: 3)], bounds: bounds)
            try await Self.save(
                store, Self.upload("u4", registration: "r1", at: 4_000, size: 40), [Self.entry("u4", 0, at: 4)],
                bounds: bounds, dropped: 1)
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(registration: "r1")) == ["u4", "u3", "u2"])
            #expect(try await Self.logs(store, ClientUploadFilter(registration: "r1")) == ["u4/0", "u3/0", "u2/0"])
            #expect(await Self.entryRemains(test, upload: "u1") == false, "a dropped upload's entries go with it")
            #expect(try await Self.uploads(store, .usage) == ["s1"], "another kind is bounded on its own")
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(registration: "r2")) == ["o1"], "another registration too")
            try await Self.save(store, Self.upload("u5", registration: "r1", at: 5_000, size: 150), bounds: bounds, dropped: 3)
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(registration: "r1")) == ["u5"])
        }
    }

    /// The user's bound counts every registration's uploads: the oldest of any go first, more
    /// than one statement's worth at once (``ClientUploadRules/uploadsPerDelete``), entries with
    /// them; another user's stay.
    @Test(arguments: StoreKind.allCases) func theUserBoundDropsTheOldestOfEveryRegistration(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            try await Self.register(store, "r1")
            try await Self.register(store, "r2")
            try await Self.register(store, "b1", user: Self.bob)
            let uploads = test.kind == .sqlite ? "client_uploads" : "midtier_client_uploads"
            let count = 601
            let series =
                test.kind == .sqlite
                ? "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count)) SELECT i FROM n"
                : "SELECT i FROM generate_series(1, \(count)) AS i"
            try await test.execute(
                """
                INSERT INTO \(uploads) (id, kind, app_id, user_realm, user_id, registration_id, device_id, received_at, size, report)
                SELECT 'old-' || i, 'log', 'demo', '', 'alice', 'r1', 'dev-r1', i, 10, '' FROM (\(series)) AS s
                """)
            let bounded = ClientUploadBounds(bytesPerRegistration: 1 << 30, bytesPerUser: 6_000, uploadsPerWindow: 100, window: 1_000)
            try await Self.save(store, Self.upload("b-1", registration: "b1", user: Self.bob, at: 100, size: 5_000), bounds: bounded)
            try await Self.save(
                store, Self.upload("new", registration: "r2", at: 10_000, size: 5_000), [Self.entry("new", 0, at: 9)], bounds: bounded,
                dropped: 501)
            let left = try await store.clientUploads(.log, matching: ClientUploadFilter(user: Self.alice), after: nil, limit: 1_000)
            #expect(left.count == 101 && left.first?.id == "new" && left.last?.id == "old-502", "\(left.count) \(left.last?.id ?? "-")")
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(user: Self.bob)) == ["b-1"], "bob's stay")
            try await Self.save(
                store, Self.upload("newer", registration: "r1", at: 11_000, size: 6_000), bounds: bounded, dropped: 101)
            #expect(try await Self.uploads(store, .log, ClientUploadFilter(user: Self.alice)) == ["newer"])
            #expect(await Self.entryRemains(test, upload: "new") == false, "a dropped upload's entries go with it")
        }
    }

    /// Only the user's active registration of the app takes uploads.
    @Test(arguments: StoreKind.allCases) func anInactiveOrForeignRegistrationTakesNothing(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            for id in ["locked", "wiped", "deleted", "alices"] { try await Self.register(store, id) }
            _ = try await store.transition(id: "locked", to: .locked, allowedFrom: [.active], audit: Self.audit("registration.lock"))
            _ = try await store.transition(id: "wiped", to: .wiped, allowedFrom: [.active], audit: Self.audit("registration.wipe"))
            _ = try await store.delete(id: "deleted", allowedFrom: [.active], audit: Self.audit("registration.delete"))
            let refused = [
                Self.upload("a", registration: "locked"), Self.upload("b", registration: "wiped"),
                Self.upload("c", registration: "deleted"), Self.upload("d", registration: "missing"),
                Self.upload("e", registration: "alices", user: Self.bob),
                Self.upload("f", registration: "alices", user: UserIdentity(realm: "https://idp.test", id: "alice")),
                Self.upload("g", registration: "alices", app: "other"),
                Self.upload("h", .usage, registration: "locked"),
            ]
            for upload in refused {
                let result = try await store.saveClientUpload(upload, entries: [Self.entry(upload.id, 0, at: 1)], bounds: Self.roomy, now: 10_000)
                #expect(result == .registrationInactive, "\(upload.id)")
            }
            #expect(try await Self.logs(store).isEmpty)
            #expect(try await Self.uploads(store, .log).isEmpty)
            #expect(try await Self.uploads(store, .usage).isEmpty)
            #expect(await Self.entryRemains(test, upload: "a") == false)
        }
    }

    /// Wiping or deleting a registration deletes its uploads and their entries; locking keeps
    /// them, and other registrations keep theirs.
    @Test(arguments: StoreKind.allCases) func wipeAndDeleteRemoveTheRegistrationsUploads(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            for id in ["w", "d", "l", "k"] {
                try await Self.register(store, id)
                try await Self.save(
                    store, Self.upload("u-\(id)", registration: id), [Self.entry("u-\(id)", 0, at: 1), Self.entry("u-\(id)", 1, at: 2)])
                try await Self.save(store, Self.upload("s-\(id)", .usage, registration: id))
            }
            _ = try await store.transition(id: "w", to: .wiped, allowedFrom: [.active], audit: Self.audit("registration.wipe"))
            _ = try await store.delete(id: "d", allowedFrom: [.active], audit: Self.audit("registration.delete"))
            _ = try await store.transition(id: "l", to: .locked, allowedFrom: [.active], audit: Self.audit("registration.lock"))
            #expect(try await Self.uploads(store, .log).sorted() == ["u-k", "u-l"])
            #expect(try await Self.uploads(store, .usage).sorted() == ["s-k", "s-l"])
            #expect(try await Self.logs(store).sorted() == ["u-k/0", "u-k/1", "u-l/0", "u-l/1"])
            for upload in ["u-w", "u-d"] {
                #expect(await Self.entryRemains(test, upload: upload, sequence: 1) == false, "\(upload)'s entries are gone")
            }
            #expect(await Self.entryRemains(test, upload: "u-k", sequence: 1))
        }
    }

    /// The retention purge deletes what was received before the cutoff, with its entries.
    @Test(arguments: StoreKind.allCases) func purgeDeletesWhatIsPastRetention(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            try await Self.register(store, "r1")
            try await Self.save(store, Self.upload("u1", registration: "r1", at: 1_000), [Self.entry("u1", 0, at: 1)])
            try await Self.save(store, Self.upload("s1", .usage, registration: "r1", at: 2_000))
            try await Self.save(store, Self.upload("u2", registration: "r1", at: 2_500), [Self.entry("u2", 0, at: 2)])
            try await Self.save(store, Self.upload("u3", registration: "r1", at: 3_000), [Self.entry("u3", 0, at: 3)])
            #expect(try await store.purgeClientUploads(receivedBefore: 2_500) == 2)
            #expect(try await Self.uploads(store, .log) == ["u3", "u2"])
            #expect(try await Self.uploads(store, .usage).isEmpty)
            #expect(try await Self.logs(store) == ["u3/0", "u2/0"])
            #expect(await Self.entryRemains(test, upload: "u1") == false)
            #expect(try await store.purgeClientUploads(receivedBefore: 2_500) == 0)
        }
    }

    /// The text filter finds the text itself: `%` and `_` are no wildcards.
    @Test(arguments: StoreKind.allCases) func textSearchTakesWildcardsLiterally(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            try await Self.register(store, "r1")
            let messages = ["100% done", "100 done", "a_b", "axb", "back\\slash", "caf\u{E9}", "cafe\u{301}"]
            try await Self.save(
                store, Self.upload("u1", registration: "r1"),
                messages.enumerated().map { Self.entry("u1", $0.offset, at: Int64($0.offset), .info, $0.element) })
            func found(_ text: String) async throws -> [String] {
                try await store.clientLogs(matching: ClientUploadFilter(text: text), after: nil, limit: 100).map(\.entry.message).reversed()
            }
            #expect(try await found("%") == ["100% done"])
            #expect(try await found("100%") == ["100% done"])
            #expect(try await found("_") == ["a_b"])
            #expect(try await found("a_b") == ["a_b"])
            #expect(try await found("\\") == ["back\\slash"])
            #expect(try await found("done").count == 2)
            let composed = try await found("caf\u{E9}")
            #expect(composed.count == 1 && composed.allSatisfy { UserIdentity.sameBytes($0, "caf\u{E9}") }, "text compares by bytes")
        }
    }
}
