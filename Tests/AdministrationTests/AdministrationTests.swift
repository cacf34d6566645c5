import HTTPTypes
import Logging
import MidtierCore
import MidtierHTTP
import MidtierStore
import MidtierTestSupport
import Registrations
import Testing
import TokenExchange

@testable import Administration

/// The admin operations on their own (docs/admin.md), on an SQLite store: who can be blocked,
/// what a block does to the user's tokens and leaves in the audit trail, and the wipe of a
/// registration. The same through the admin API and the console are `AdminAPITests`,
/// `WebPagesTests` and `Tests/e2e`.
@Suite(.timeLimit(.minutes(10))) struct AdministrationTests {
    static let alice = UserIdentity.local("alice")
    static let admin = AuditActor(name: "admin#1", source: "127.0.0.1")

    /// The operations over a fresh store, with `users.json` holding `users` and the apps
    /// signing users into `realms`.
    static func withAdministration(
        users: [String] = ["alice", "Jos\u{E9}"], realms: [String] = ["https://idp.example", "backend:gw"],
        _ body: (Administration) async throws -> Void
    ) async throws {
        let testStore = try await TestStore.make(.sqlite)
        do {
            let store = try await testStore.open()
            let administration = Administration(
                registrations: RegistrationService(store: store), tokens: TokenCache(), destinations: { [] },
                knownUser: { user in user.isLocal && users.contains { UserIdentity.sameBytes($0, user.id) } },
                localUserIDs: { users }, realms: { realms }, reload: { _ in .rejected([]) }, logger: Logger(label: "test"))
            try await body(administration)
        } catch {
            await testStore.remove()
            throw error
        }
        await testStore.remove()
    }

    /// A block drops the user's cached tokens at once and is audited with the admin's name.
    @Test func aBlockDropsTheUsersTokensAndIsAudited() async throws {
        try await Self.withAdministration { administration in
            let key = TokenCacheKey(destination: "sf", user: Self.alice, nameID: "100001")
            _ = try await administration.tokens.token(for: key) { _, _ in AccessToken(value: "t", lifetimeSeconds: 3600) }
            let other = TokenCacheKey(destination: "sf", user: .local("bob"), nameID: "100002")
            _ = try await administration.tokens.token(for: other) { _, _ in AccessToken(value: "u", lifetimeSeconds: 3600) }
            #expect(administration.tokens.count == 2)
            let outcome = try await administration.block(Self.alice, kind: .traffic, reason: "lost badge", by: Self.admin)
            #expect(outcome.block.kind == .traffic && !outcome.seen)
            #expect(administration.tokens.count == 1, "only alice's token is dropped")
            let audit = try await administration.recentAudit(before: nil, about: nil, limit: 10)
            #expect(audit.first?.action == "user.block" && audit.first?.actor == "admin#1" && audit.first?.detail == "traffic: lost badge")
            try await administration.unblock(Self.alice, by: Self.admin)
            let again = await refusal { () async throws(Refusal) in try await administration.unblock(Self.alice, by: Self.admin) }
            #expect(again?.status == .notFound, "nothing left to lift")
        }
    }

    /// Nobody can sign in as an id that is not in users.json byte for byte, nor in a realm no
    /// app names: 404, with the near miss spelled out by code point.
    @Test func onlyUsersSomeoneCanSignInAsCanBeBlocked() async throws {
        try await Self.withAdministration { administration in
            let twin = await refusal { () async throws(Refusal) in
                _ = try await administration.block(.local("Jose\u{301}"), kind: .all, reason: "", by: Self.admin)
            }
            #expect(twin?.status == .notFound)
            #expect(twin?.message.contains("Jos<U+00E9>") == true, "\(twin?.message ?? "")")
            #expect(twin?.message.contains("Jose<U+0301>") == true)
            let realm = await refusal { () async throws(Refusal) in
                _ = try await administration.block(UserIdentity(realm: "https://other.example", id: "x"), kind: .all, reason: "", by: Self.admin)
            }
            #expect(realm?.status == .notFound)
            let lower = await refusal { () async throws(Refusal) in
                _ = try await administration.block(UserIdentity(realm: "backend:gw", id: "alice"), kind: .all, reason: "", by: Self.admin)
            }
            #expect(lower?.message.contains("\"ALICE\"") == true, "a back end's users are named in upper case")
            _ = try await administration.block(UserIdentity(realm: "backend:gw", id: "ALICE"), kind: .all, reason: "", by: Self.admin)
            _ = try await administration.block(UserIdentity(realm: "https://idp.example", id: "kim"), kind: .all, reason: "", by: Self.admin)
            let long = await refusal { () async throws(Refusal) in
                _ = try await administration.block(Self.alice, kind: .all, reason: String(repeating: "x", count: 1001), by: Self.admin)
            }
            #expect(long?.status == .badRequest)
        }
    }

    /// A wipe holds the registration (and cannot be undone by a lock), and an unknown id is a
    /// 404 that names it by code point.
    @Test func aWipeHoldsTheRegistration() async throws {
        try await Self.withAdministration { administration in
            guard
                case .registered(let made) = try await administration.registrations.register(
                    app: "demo", user: Self.alice, requestedID: nil, device: DeviceDetails(deviceId: "d1"), source: "test")
            else {
                Issue.record("no registration")
                return
            }
            let wiped = try await administration.apply(.wipe, to: made.id, by: Self.admin)
            #expect(wiped.state == .wiped)
            let lock = await refusal { () async throws(Refusal) in _ = try await administration.apply(.lock, to: made.id, by: Self.admin) }
            #expect(lock != nil, "a wiped registration is not locked instead")
            let unknown = await refusal { () async throws(Refusal) in _ = try await administration.registration(id: "no\u{7}such") }
            #expect(unknown?.status == .notFound)
            #expect(unknown?.message.contains("no<U+0007>such") == true)
        }
    }

    /// Over a store that keeps no push notifications (some test stores; SQLite and PostgreSQL
    /// always do), every push operation — the list, one notification, a test notification, as
    /// the admin API and the console ask for them — is `503 PUSH_UNAVAILABLE`, never a `500`,
    /// and sends nothing.
    @Test func withoutAPushStoreEveryPushOperationIsUnavailable() async throws {
        try await Self.withAdministration { administration in
            #expect(administration.pushStore == nil)
            let refusals = [
                await refusal { () async throws(Refusal) in _ = try await administration.recentPushNotifications(app: nil, limit: 50) },
                await refusal { () async throws(Refusal) in _ = try await administration.pushNotification(id: "n-1") },
                await refusal { () async throws(Refusal) in
                    _ = try await administration.sendTestNotification(user: Self.alice, app: "demo", alert: "hi", by: Self.admin)
                },
            ]
            for refused in refusals {
                #expect(refused?.status == .serviceUnavailable && refused?.code == "PUSH_UNAVAILABLE", "\(String(describing: refused))")
            }
            let audit = try await administration.recentAudit(before: nil, about: nil, limit: 10)
            #expect(!audit.contains { $0.action == "push.test" })
        }
    }
}
