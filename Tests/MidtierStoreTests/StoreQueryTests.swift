import MidtierCore
import Testing

@testable import MidtierStore

/// A statement written once, as each store's dialect renders it: the tables' prefix, the
/// placeholders in order, the values bound and never written into the text.
@Suite struct StoreQueryTests {
    @Test func eachDialectRendersTheSameStatement() {
        let query: StoreQuery =
            "SELECT at FROM \(table: "audit") WHERE at >= \(Int64(5)) AND target = \("x'; DROP TABLE audit; --")" + " LIMIT \(10)"
        let sqlite = query.rendered(.sqlite)
        #expect(sqlite.sql == "SELECT at FROM audit WHERE at >= ? AND target = ? LIMIT ?")
        let postgres = query.rendered(.postgres)
        #expect(postgres.sql == "SELECT at FROM midtier_audit WHERE at >= $1 AND target = $2 LIMIT $3")
        #expect(sqlite.values == [.integer(5), .text("x'; DROP TABLE audit; --"), .integer(10)])
        #expect(postgres.values == sqlite.values)
    }

    /// The audit reads: a subject selects its target, or also its actor.
    @Test func theAuditReadsSelectTheirSubject() {
        let all = AuditRules.recent(before: nil, about: nil, limit: 5).rendered(.postgres)
        #expect(all.sql.hasSuffix("FROM midtier_audit WHERE sequence < $1 ORDER BY sequence DESC LIMIT $2"))
        #expect(all.values == [.integer(Int64.max), .integer(5)])
        let registration = AuditRules.recent(before: 9, about: .registration("r1"), limit: 5).rendered(.sqlite)
        #expect(registration.sql.contains("WHERE sequence < ? AND target = ? ORDER BY"))
        #expect(registration.values == [.integer(9), .text("r1"), .integer(5)])
        let user = AuditRules.recent(before: nil, about: .user(.local("alice")), limit: 5).rendered(.sqlite)
        #expect(user.sql.contains("AND (target = ? OR actor = ?)"))
        #expect(user.values.count == 4)
    }

    /// Names, apps and registration ids are ordered by their bytes in both stores: PostgreSQL
    /// is told so (`COLLATE "C"`), whatever the database's locale. (The test server here is
    /// initialised with the C locale, where both orders agree; this pins what is asked.)
    @Test func storageIsOrderedByBytesInBothStores() {
        let entries = StorageRules.entries(of: .local("alice"))
        #expect(entries.rendered(.sqlite).sql.hasSuffix("ORDER BY app_id, registration_id, name"))
        #expect(entries.rendered(.postgres).sql.hasSuffix(#"ORDER BY app_id COLLATE "C", registration_id COLLATE "C", name COLLATE "C""#))
        let documents = StorageRules.documents(app: "demo", user: .local("alice"), level: .registration("r1")).rendered(.postgres)
        #expect(documents.sql.hasSuffix(#"ORDER BY name COLLATE "C""#))
        #expect(documents.values == [.text(""), .text("alice"), .text("demo"), .text("r1")])
    }

    /// What only one store says: row locks (PostgreSQL's), how rows are skipped, how text is
    /// found; nothing and bytes are bound like every value; a list is one placeholder a value.
    @Test func whatTheDialectsSayDifferently() {
        let locked = RegistrationRules.registration(id: "r1", lock: .update)
        #expect(locked.rendered(.postgres).sql.hasSuffix("FROM midtier_registration WHERE id = $1 FOR UPDATE"))
        #expect(locked.rendered(.sqlite).sql.hasSuffix("FROM registration WHERE id = ?"))
        let shared = RegistrationRules.active(id: "r1", app: "demo", user: .local("alice"), lock: .share).rendered(.postgres)
        #expect(shared.sql.hasSuffix("AND user_realm = $3 AND user_id = $4 FOR SHARE") && shared.values.count == 4)
        #expect(
            StorageRules.document(StorageKey(app: "demo", user: .local("a"), level: .user, name: "n"), lock: .update).rendered(.postgres).sql
                .hasSuffix(" FOR UPDATE"))
        #expect(PageSessionRules.session(key: "k", site: "console").rendered(.postgres).sql.hasSuffix("site = $2 FOR UPDATE"))
        let trimmed = PageSessionRules.trim(site: "me", keeping: 3)
        #expect(trimmed.rendered(.sqlite).sql.hasSuffix("ORDER BY last_seen DESC, key LIMIT -1 OFFSET ?)"))
        #expect(trimmed.rendered(.postgres).sql.hasSuffix("ORDER BY last_seen DESC, key OFFSET $2)"))
        #expect(trimmed.rendered(.postgres).values == [.text("me"), .integer(3)])
        let search = ClientUploadRules.logs(matching: ClientUploadFilter(text: "50%_"), after: nil, limit: 5)
        #expect(search.rendered(.sqlite).sql.contains("AND instr(e.message, ?) > 0"))
        #expect(search.rendered(.postgres).sql.contains("AND strpos(e.message, $1) > 0"))
        let session = SealedBackendSession(registration: "r1", destination: "gw", sealed: [0, 255], expiresAt: nil, stamp: 7)
        #expect(BackendSessionRules.save(session).rendered(.postgres).values == [.text("r1"), .text("gw"), .bytes([0, 255]), .null, .integer(7)])
        let deletion = ClientUploadRules.delete(uploads: ["a", "b", "c"])
        #expect(deletion[1].rendered(.postgres).sql == "DELETE FROM midtier_client_uploads WHERE id IN ($1, $2, $3)")
        #expect(deletion[0].rendered(.sqlite).sql == "DELETE FROM client_log_entries WHERE upload_id IN (?, ?, ?)")
    }
}
