import Foundation
import MidtierCore
import MidtierStore
import MidtierTestSupport
import Testing

/// The web console's audit pages (`StateStore.recentAudit`): newest first, paged with
/// `before`, filtered by a user or a registration by exact bytes, on SQLite and PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct AuditQueryTests {
    static let idpAlice = UserIdentity(realm: "https://idp.example", id: "alice")

    /// The trail the tests query, in the order it is appended; each entry's `detail` is its
    /// label, `e0` to `e13`.
    static let trail: [(actor: String, action: String, target: String)] = [
        ("admin#1", "user.block", "alice"),  // e0: about alice
        ("user:alice", "registration.create", "ra1"),  // e1: by alice
        ("admin#1", "user.block", "bob"),  // e2: about bob
        ("admin#1", "registration.lock", "r1"),  // e3: about r1
        ("user:\(idpAlice)", "registration.create", "ra2"),  // e4: by alice of the IdP
        ("admin#1", "user.block", idpAlice.description),  // e5: about alice of the IdP
        ("admin#1", "registration.unlock", "r1"),  // e6: about r1
        ("user:bob", "registration.create", "rb1"),  // e7: by bob
        ("admin#1", "user.block", "\u{212A}im"),  // e8: about KELVIN SIGN + "im"
        ("user:\u{212A}im", "registration.create", "rk1"),  // e9: by KELVIN SIGN + "im"
        ("admin#1", "user.unblock", "Kim"),  // e10: about Kim
        ("user:Kim", "registration.create", "rk2"),  // e11: by Kim
        ("user:alice", "registration.lock", "r1"),  // e12: by alice, about r1
        ("admin#1", "tokens.purge", "alice"),  // e13: about alice
    ]

    /// A store of `kind` holding `trail`.
    static func withTrail(_ kind: StoreKind, _ body: (any StateStore, TestStore) async throws -> Void) async throws {
        try await withTestStore(kind) { test in
            let store = try await test.open(cached: false)
            for (n, entry) in trail.enumerated() {
                try await store.appendAudit(
                    AuditEntry(
                        at: 1_000 + Int64(n), actor: entry.actor, action: entry.action, target: entry.target,
                        detail: "e\(n)", source: "127.0.0.1"))
            }
            try await body(store, test)
        }
    }

    /// The labels of the entries `subject` selects, newest first.
    static func labels(_ store: any StateStore, about subject: AuditSubject?, before: Int64? = nil, limit: Int = 100) async throws -> [String] {
        try await store.recentAudit(before: before, about: subject, limit: limit).map(\.detail)
    }

    /// Without a subject, every entry, newest first (sequence numbers strictly decreasing), with
    /// its fields as appended.
    @Test(arguments: StoreKind.allCases) func allEntriesNewestFirst(_ kind: StoreKind) async throws {
        try await Self.withTrail(kind) { store, _ async throws in
            let entries = try await store.recentAudit(before: nil, about: nil, limit: 100)
            #expect(entries.map(\.detail) == (0..<Self.trail.count).reversed().map { "e\($0)" })
            #expect(zip(entries, entries.dropFirst()).allSatisfy { $0.sequence > $1.sequence }, "\(entries.map(\.sequence))")
            let oldest = try #require(entries.last)
            #expect(
                oldest
                    == AuditEntry(
                        sequence: oldest.sequence, at: 1_000, actor: "admin#1", action: "user.block", target: "alice",
                        detail: "e0", source: "127.0.0.1"))
            #expect(try await Self.labels(store, about: nil, limit: 3) == ["e13", "e12", "e11"], "the newest `limit`")
        }
    }

    /// A local user's entries: those about the user (target) and those the user made (actor
    /// `user:<id>`), not those of the IdP user with the same id, nor another user's.
    @Test(arguments: StoreKind.allCases) func entriesOfAUser(_ kind: StoreKind) async throws {
        try await Self.withTrail(kind) { store, _ async throws in
            #expect(try await Self.labels(store, about: .user(.local("alice"))) == ["e13", "e12", "e1", "e0"])
            #expect(try await Self.labels(store, about: .user(Self.idpAlice)) == ["e5", "e4"])
            #expect(try await Self.labels(store, about: .user(.local("bob"))) == ["e7", "e2"])
            #expect(try await Self.labels(store, about: .user(.local("carol"))) == [])
            #expect(try await Self.labels(store, about: .user(.local("Alice"))) == [], "no case folding")
        }
    }

    /// A registration's entries: those whose target is its id, whoever made them.
    @Test(arguments: StoreKind.allCases) func entriesOfARegistration(_ kind: StoreKind) async throws {
        try await Self.withTrail(kind) { store, _ async throws in
            #expect(try await Self.labels(store, about: .registration("r1")) == ["e12", "e6", "e3"])
            #expect(try await Self.labels(store, about: .registration("ra1")) == ["e1"])
            #expect(try await Self.labels(store, about: .registration("R1")) == [])
            #expect(try await Self.labels(store, about: .registration("alice")) == ["e13", "e0"], "a target is a target")
        }
    }

    /// Users compare by exact bytes: "Kim" does not select the entries of "\u{212A}im" (KELVIN
    /// SIGN), which Swift's `==` calls equal, nor the other way round.
    @Test(arguments: StoreKind.allCases) func userIdsCompareByBytes(_ kind: StoreKind) async throws {
        #expect("\u{212A}im" == "Kim", "the premise: String == merges the two")
        try await Self.withTrail(kind) { store, _ async throws in
            #expect(try await Self.labels(store, about: .user(.local("Kim"))) == ["e11", "e10"])
            #expect(try await Self.labels(store, about: .user(.local("\u{212A}im"))) == ["e9", "e8"])
            #expect(try await Self.labels(store, about: .registration("\u{212A}im")) == ["e8"])
        }
    }

    /// Paging with `before` set to the last sequence number seen goes on where the page before
    /// ended: no entry twice, none left out, then an empty page.
    @Test(arguments: StoreKind.allCases) func pagingWithBefore(_ kind: StoreKind) async throws {
        try await Self.withTrail(kind) { store, _ async throws in
            for (subject, expected) in [
                (nil, (0..<Self.trail.count).reversed().map { "e\($0)" }),
                (AuditSubject.user(.local("alice")), ["e13", "e12", "e1", "e0"]),
                (AuditSubject.registration("r1"), ["e12", "e6", "e3"]),
            ] as [(AuditSubject?, [String])] {
                var seen: [String] = []
                var before: Int64?
                var pages = 0
                while pages <= Self.trail.count {
                    let page = try await store.recentAudit(before: before, about: subject, limit: 2)
                    pages += 1
                    guard let last = page.last else { break }
                    #expect(page.count <= 2)
                    if let before { #expect(page.allSatisfy { $0.sequence < before }) }
                    seen += page.map(\.detail)
                    before = last.sequence
                }
                #expect(seen == expected, "\(String(describing: subject))")
                #expect(pages == (expected.count + 1) / 2 + 1, "full pages, then an empty one")
            }
            let all = try await store.recentAudit(before: nil, about: nil, limit: 100)
            #expect(try await store.recentAudit(before: all.last?.sequence, about: nil, limit: 100) == [], "nothing before the first")
        }
    }

    /// The memory cache an instance puts in front of the store asks the store.
    @Test(arguments: StoreKind.allCases) func cachedStoreGivesTheSame(_ kind: StoreKind) async throws {
        try await Self.withTrail(kind) { store, test in
            let cached = try await test.open(cached: true)
            for subject in [nil, .user(.local("alice")), .registration("r1")] as [AuditSubject?] {
                #expect(
                    try await cached.recentAudit(before: nil, about: subject, limit: 100)
                        == store.recentAudit(before: nil, about: subject, limit: 100))
            }
        }
    }
}
