import Foundation
import GRDB
import MidtierCore
import MidtierStore
import MidtierTestSupport
import Registrations
import Synchronization
import Testing

/// The store keys users by realm and exact bytes, never hands a registration id out twice, and
/// keeps a user's count of registrations (docs/identity.md). Run through the memory cache, as
/// `serve` uses the stores, on SQLite and on PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct IdentityStoreTests {
    @Test(arguments: StoreKind.allCases) func blocksAreKeyedByRealmAndExactBytes(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            let kim = UserIdentity.local("Kim")
            let audit = AuditEntry(at: 1, actor: "admin#1", action: "user.block", target: "Kim")
            // Registered before the block (a blocked user cannot register).
            let service = RegistrationService(store: store)
            guard
                case .registered(let localKim) = try await service.register(
                    app: "demo", user: kim, requestedID: nil, device: DeviceDetails(), source: "")
            else {
                Issue.record("registration failed"); return
            }
            try await store.setBlock(UserBlock(user: kim, kind: .all, reason: "", since: 1, by: "admin#1"), audit: audit)
            #expect(try await store.block(of: kim)?.kind == .all)
            #expect(try await store.block(of: .local("\u{212A}im")) == nil, "another spelling is another user")
            #expect(try await store.block(of: UserIdentity(realm: "https://idp.test", id: "Kim")) == nil, "another realm is another user")
            // The same through a registration's owner.
            guard
                case .registered(let jwtKim) = try await service.register(
                    app: "corp", user: UserIdentity(realm: "https://idp.test", id: "Kim"),
                    requestedID: nil, device: DeviceDetails(), source: "")
            else {
                Issue.record("registration failed"); return
            }
            #expect(try await store.registrationAndBlock(id: jwtKim.id)?.block == nil)
            #expect(try await store.registrationAndBlock(id: localKim.id)?.block?.kind == .all)
            #expect(try await store.registrations(matching: RegistrationFilter(user: kim)).map(\.id) == [localKim.id])
        }
    }

    @Test(arguments: StoreKind.allCases) func aRegistrationIdIsNeverHandedOutTwice(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            let ended = EndedSessions()
            let service = RegistrationService(store: store, sessionsEnded: { ended.add($0) })
            let alice = UserIdentity.local("alice"), bob = UserIdentity.local("bob")
            guard
                case .registered(let first) = try await service.register(
                    app: "demo", user: alice, requestedID: "shared-ipad-7",
                    device: DeviceDetails(), source: "")
            else { Issue.record("no registration"); return }
            #expect(first.id == "shared-ipad-7")
            #expect(try await service.delete(id: "shared-ipad-7", user: alice, app: "demo", source: "") == .deleted(first))
            #expect(ended.ids == ["shared-ipad-7"], "deleting ends the back-end sessions")
            guard
                case .registered(let second) = try await service.register(
                    app: "demo", user: bob, requestedID: "shared-ipad-7",
                    device: DeviceDetails(), source: "")
            else { Issue.record("no registration"); return }
            #expect(second.id != "shared-ipad-7", "a deleted id goes to nobody")

            // A locked registration cannot be deleted by its device; an admin can, and the id is
            // retired too.
            guard
                case .registered(let locked) = try await service.register(
                    app: "demo", user: alice, requestedID: "lockme",
                    device: DeviceDetails(), source: "")
            else { Issue.record("no registration"); return }
            _ = try await service.apply(.lock, to: locked.id, by: AuditActor(name: "admin#1"))
            #expect(ended.ids.last == "lockme", "locking ends the back-end sessions")
            #expect(try await service.delete(id: "lockme", user: alice, app: "demo", source: "") == .refused(current: .locked))
            _ = try await service.apply(.wipe, to: locked.id, by: AuditActor(name: "admin#1"))
            #expect(try await service.delete(id: "lockme", user: alice, app: "demo", source: "") == .refused(current: .wiped))
            guard case .deleted = try await service.delete(id: "lockme", by: AuditActor(name: "admin#1")) else {
                Issue.record("admin delete failed"); return
            }
            guard
                case .registered(let again) = try await service.register(
                    app: "demo", user: alice, requestedID: "lockme",
                    device: DeviceDetails(), source: "")
            else { Issue.record("no registration"); return }
            #expect(again.id != "lockme")
        }
    }

    /// A database written before realms existed opens with its users in the local realm: their
    /// blocks still hold and their registrations are still theirs.
    @Test func aStoreFromBeforeRealmsKeepsItsBlocksAndOwners() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("midtier-v2-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/state.sqlite"
        do {
            // The schema and migration names of the previous release.
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                        INSERT INTO grdb_migrations VALUES ('v1: registrations'), ('v2: blocks and audit');
                        CREATE TABLE registration (id TEXT PRIMARY KEY NOT NULL, app_id TEXT NOT NULL, user_id TEXT NOT NULL,
                            device_type TEXT NOT NULL, device_model TEXT NOT NULL, device_id TEXT NOT NULL, form_factor TEXT NOT NULL,
                            apns_device_token TEXT NOT NULL, android_gcm_registration_id TEXT NOT NULL, created_at INTEGER NOT NULL,
                            last_contact_at INTEGER NOT NULL, state TEXT NOT NULL);
                        CREATE INDEX registration_user ON registration(user_id);
                        CREATE TABLE user_block (user_id TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL, reason TEXT NOT NULL,
                            since INTEGER NOT NULL, blocked_by TEXT NOT NULL);
                        CREATE TABLE audit (sequence INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, actor TEXT NOT NULL,
                            action TEXT NOT NULL, target TEXT NOT NULL, detail TEXT NOT NULL, source TEXT NOT NULL);
                        CREATE INDEX audit_at ON audit(at);
                        INSERT INTO registration VALUES ('old-1', 'demo', 'alice', 'iOS', 'iPhone', '', '', '', '', 1, 1, 'locked');
                        INSERT INTO user_block VALUES ('bob', 'traffic', 'lost phone', 1, 'admin#1');
                        """)
            }
        }
        let store = CachedStateStore(base: try SQLiteStore(path: path))
        let old = try #require(try await store.registration(id: "old-1"))
        #expect(old.user == .local("alice"))
        #expect(old.state == .locked)
        #expect(try await store.block(of: .local("bob"))?.reason == "lost phone")
        #expect(try await store.registrations(matching: RegistrationFilter(user: .local("alice"))).count == 1)
    }

    @Test(arguments: StoreKind.allCases) func aUserHoldsAtMostTheConfiguredNumberOfRegistrations(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open()
            let service = RegistrationService(store: store, maximumPerUser: { 2 })
            let alice = UserIdentity.local("alice")
            var ids: [String] = []
            for _ in 0..<2 {
                guard
                    case .registered(let made) = try await service.register(
                        app: "demo", user: alice, requestedID: nil, device: DeviceDetails(), source: "")
                else {
                    Issue.record("refused too early"); return
                }
                ids.append(made.id)
            }
            #expect(
                try await service.register(app: "demo", user: alice, requestedID: nil, device: DeviceDetails(), source: "") == .limitReached(limit: 2)
            )
            // Another realm's alice is another user with her own count.
            guard
                case .registered = try await service.register(
                    app: "corp", user: UserIdentity(realm: "https://idp.test", id: "alice"),
                    requestedID: nil, device: DeviceDetails(), source: "")
            else { Issue.record("refused"); return }
            _ = try await service.delete(id: ids[0], user: alice, app: "demo", source: "")
            guard case .registered = try await service.register(app: "demo", user: alice, requestedID: nil, device: DeviceDetails(), source: "")
            else {
                Issue.record("no room after a delete"); return
            }
        }
    }
}

final class EndedSessions: Sendable {
    private let state = Mutex<[String]>([])
    func add(_ id: String) { state.withLock { $0.append(id) } }
    var ids: [String] { state.withLock { $0 } }
}
