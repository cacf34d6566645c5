import MidtierCore
import MidtierStore
import MidtierTestSupport
import Testing

/// The Storage service's levels as the stores keep them (docs/device-api.md, "User and device
/// storage"): `registration_id` '' is the user level, a registration's id its device level.
@Suite(.timeLimit(.minutes(5))) struct StorageLevelTests {
    @Test func theStoredColumn() {
        #expect(StorageLevel.user.storedRegistration == "")
        #expect(StorageLevel.registration("r1").storedRegistration == "r1")
        #expect(StorageLevel(storedRegistration: "") == .user)
        #expect(StorageLevel(storedRegistration: "r1") == .registration("r1"))
        #expect(StorageLevel.user.registration == nil)
        #expect(StorageLevel.registration("r1").registration == "r1")
    }

    @Test(arguments: StoreKind.allCases) func bothLevelsAsStored(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            let alice = UserIdentity.local("alice")
            let registration = Registration(id: "r1", appId: "demo", user: alice, deviceType: "iPad", createdAt: 1_000)
            #expect(try await store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
            func write(_ level: StorageLevel, _ name: String, _ text: String) async throws -> StorageWrite<Never> {
                try await store.writeStorage(StorageKey(app: "demo", user: alice, level: level, name: name), userLimit: 1_000, now: 5) { _ in
                    .set(text)
                }
            }
            guard case .written = try await write(.user, "Home", #"{"a":1}"#) else { Issue.record("user level not written"); return }
            guard case .written = try await write(.registration("r1"), "Home", #"{"b":2}"#) else {
                Issue.record("device level not written"); return
            }
            guard case .registrationInactive = try await write(.registration("gone"), "Home", "{}") else {
                Issue.record("a level of no registration written"); return
            }
            #expect(try await store.storageDocument(StorageKey(app: "demo", user: alice, level: .user, name: "Home")) == #"{"a":1}"#)
            #expect(
                try await store.storageDocuments(app: "demo", user: alice, level: .registration("r1")) == [
                    StoredDocument(name: "Home", text: #"{"b":2}"#)
                ])
            #expect(try await store.storageEntries(of: alice).map(\.key.level) == [.user, .registration("r1")])

            // The columns as before the level was a type: '' for the user level.
            let table = kind == .sqlite ? "user_storage" : "midtier_user_storage"
            try await test.execute("UPDATE \(table) SET name = 'Seen' WHERE registration_id = ''")
            try await test.execute("UPDATE \(table) SET name = 'Device' WHERE registration_id = 'r1'")
            #expect(try await store.storageDocuments(app: "demo", user: alice, level: .user).map(\.name) == ["Seen"])
            #expect(try await store.storageDocuments(app: "demo", user: alice, level: .registration("r1")).map(\.name) == ["Device"])
        }
    }
}
