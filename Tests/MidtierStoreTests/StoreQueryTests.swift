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
}
