import MidtierCore
import MidtierStore
import MidtierTestSupport
import Registrations
import Synchronization
import Testing

/// The registration rules on their own (docs/identity.md, "Registrations"), on an SQLite store:
/// which ids a client may choose, that an id is never handed out twice, and who a registration
/// admits. The same rules through the server are in MidtierServerTests and Tests/e2e.
@Suite(.timeLimit(.minutes(10))) struct RegistrationServiceTests {
    static let alice = UserIdentity.local("alice")
    static let bob = UserIdentity.local("bob")

    /// Milliseconds since 1970 that the test sets.
    final class Clock: Sendable {
        let milliseconds = Atomic<Int64>(1_800_000_000_000)
        func advance(days: Int64) { milliseconds.add(days * 86_400_000, ordering: .relaxed) }
    }

    /// A service on a fresh SQLite store whose clock the test sets.
    static func withService(_ body: (RegistrationService, Clock) async throws -> Void) async throws {
        let testStore = try await TestStore.make(.sqlite)
        let clock = Clock()
        do {
            let store = try await testStore.open()
            try await body(RegistrationService(store: store, clock: WallClock { clock.milliseconds.load(ordering: .relaxed) }), clock)
        } catch {
            await testStore.remove()
            throw error
        }
        await testStore.remove()
    }

    @Test(arguments: [
        ("abc-DEF_1.2~3", true), ("", false), (String(repeating: "a", count: 129), false), ("a b", false), ("a/b", false),
        ("a\u{0}b", false), ("é", false), (String(repeating: "z", count: 128), true),
    ])
    func acceptableIDsAreOfAPlainAlphabet(id: String, acceptable: Bool) {
        #expect(RegistrationService.isAcceptableID(id) == acceptable)
    }

    @Test func aChosenIDIsKeptOnceAndNeverHandedOutAgain() async throws {
        try await Self.withService { service, _ in
            guard
                case .registered(let first) = try await service.register(
                    app: "demo", user: Self.alice, requestedID: "my-phone", device: DeviceDetails(deviceId: "d1"), source: "test")
            else {
                Issue.record("the first registration should be made")
                return
            }
            #expect(first.id == "my-phone")
            // Deleted, the id is still not given to anyone else: it must not inherit alice's state.
            _ = try await service.delete(id: "my-phone", user: Self.alice, app: "demo", source: "test")
            guard
                case .registered(let second) = try await service.register(
                    app: "demo", user: Self.bob, requestedID: "my-phone", device: DeviceDetails(deviceId: "d2"), source: "test")
            else {
                Issue.record("bob's registration should be made")
                return
            }
            #expect(second.id != "my-phone")
            #expect(RegistrationService.isAcceptableID(second.id))
        }
    }

    @Test func onlyTheOwnerIsAdmittedAndTheOfflinePolicyLocks() async throws {
        try await Self.withService { service, clock in
            guard
                case .registered(let made) = try await service.register(
                    app: "demo", user: Self.alice, requestedID: nil, device: DeviceDetails(deviceId: "d1"), source: "test")
            else {
                Issue.record("the registration should be made")
                return
            }
            let found = try await service.store.standing(ofRegistration: made.id)
            let policy = BlockWipingPolicy(blockWipeEnabled: true, blockDisconnectedPeriod: 2)
            #expect(try await service.admit(found, user: Self.bob, policy: policy) == .unknown)
            guard case .admitted = try await service.admit(found, user: Self.alice, policy: policy) else {
                Issue.record("alice should be admitted")
                return
            }
            // Three days without contact: locked, by the server, whatever the device says.
            clock.advance(days: 3)
            #expect(try await service.admit(found, user: Self.alice, policy: policy) == .locked)
            #expect(try await service.store.currentRegistration(id: made.id)?.state == .locked)
        }
    }

    /// A `registration` or `all` block refuses onboarding in the service itself, so every way
    /// in (Connections, implicit registration) is refused the same; a `traffic` block does not.
    @Test(arguments: [UserBlock.Kind.registration, .all, .traffic])
    func aRegistrationBlockRefusesOnboarding(kind: UserBlock.Kind) async throws {
        try await Self.withService { service, _ in
            try await service.store.setBlock(
                UserBlock(user: Self.alice, kind: kind, reason: "test", since: 1, by: "test"),
                audit: AuditEntry(at: 1, actor: "test", action: "user.block", target: "alice", source: "test"))
            let outcome = try await service.register(
                app: "demo", user: Self.alice, requestedID: nil, device: DeviceDetails(deviceId: "d1"), source: "test")
            if kind.blocksRegistration {
                #expect(outcome == .blocked(kind))
                #expect(try await service.store.registrations(matching: RegistrationFilter(user: Self.alice)).isEmpty)
            } else {
                guard case .registered = outcome else {
                    Issue.record("a traffic block does not refuse onboarding: \(outcome)")
                    return
                }
            }
        }
    }
}
