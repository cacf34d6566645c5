import MidtierCore
import MidtierStore
import MidtierTestSupport
import Testing

/// What goes with a registration when it is locked, wiped or deleted: one list
/// (``RegistrationRows``) that both stores delete by.
@Suite(.timeLimit(.minutes(10))) struct RegistrationRowsTests {
    @Test func theListAndItsStatements() {
        let sessions = RegistrationRows.byRegistration(table: "backend_session")
        #expect(RegistrationRows.deleted(changingTo: .locked) == [sessions])
        #expect(RegistrationRows.deleted(changingTo: .active) == [sessions])
        let wiped: [RegistrationRows] = [
            sessions, .byRegistration(table: "user_storage"),
            .through(table: "client_log_entries", column: "upload_id", parent: "client_uploads"),
            .byRegistration(table: "client_uploads"),
        ]
        #expect(RegistrationRows.deleted(changingTo: .wiped) == wiped)
        #expect(RegistrationRows.deletedWithTheRegistration == wiped)
        #expect(sessions.deletion(of: "r1").rendered(.sqlite).sql == "DELETE FROM backend_session WHERE registration_id = ?")
        let entries = wiped[2].deletion(of: "r1").rendered(.postgres)
        #expect(
            entries.sql
                == "DELETE FROM midtier_client_log_entries WHERE upload_id IN (SELECT id FROM midtier_client_uploads WHERE registration_id = $1)")
        #expect(entries.values == [.text("r1")])
    }

    /// A lock ends the back-end sessions only; a wipe deletes the device's documents and uploads
    /// too; a delete all of it. Another registration keeps everything.
    @Test(arguments: StoreKind.allCases) func whatEachEndDeletes(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            let alice = UserIdentity.local("alice")
            for id in ["r1", "r2"] {
                try await ClientUploadStoreTests.register(store, id)
                let session = SealedBackendSession(registration: id, destination: "gw", sealed: [1, 2, 3], expiresAt: nil, stamp: 1)
                #expect(try await store.saveBackendSession(session, now: 5_000) == .saved)
                let key = StorageKey(app: "demo", user: alice, level: .registration(id), name: "Prefs")
                guard case .written = try await store.writeStorage(key, userLimit: 1_000, now: 5_000, { _ -> StorageEdit<Never> in .set("{}") })
                else {
                    Issue.record("\(id): no document written"); return
                }
                try await ClientUploadStoreTests.save(
                    store, ClientUploadStoreTests.upload("u-\(id)", registration: id), [ClientUploadStoreTests.entry("u-\(id)", 0, at: 9_000)])
            }
            func held(_ id: String) async throws -> (session: Bool, document: Bool, upload: Bool) {
                let session = try await store.backendSession(registration: id, destination: "gw", now: 5_000) != nil
                let document = try await store.storageEntries(of: alice).contains { $0.key.level == .registration(id) }
                let upload = try await ClientUploadStoreTests.uploads(store, .log).contains("u-\(id)")
                return (session, document, upload)
            }
            func audit(_ action: String) -> AuditEntry { AuditEntry(at: 6_000, actor: "admin#1", action: action, target: "r1") }

            _ = try await store.transition(id: "r1", to: .locked, allowedFrom: [.active], audit: audit("registration.lock"))
            #expect(try await held("r1") == (false, true, true), "a lock ends the sessions only")
            _ = try await store.transition(id: "r1", to: .wiped, allowedFrom: [.locked], audit: audit("registration.wipe"))
            #expect(try await held("r1") == (false, false, false), "a wipe deletes the device's data")
            #expect(await ClientUploadStoreTests.entryRemains(test, upload: "u-r1") == false, "with the upload's entries")
            #expect(try await held("r2") == (true, true, true), "another registration keeps all")

            #expect(try await store.delete(id: "r2", allowedFrom: [.active], audit: nil) != .notFound)
            #expect(try await held("r2") == (false, false, false), "a delete takes all")
            #expect(await ClientUploadStoreTests.entryRemains(test, upload: "u-r2") == false)
        }
    }
}
