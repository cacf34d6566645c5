import AsyncHTTPClient
import DeviceAuthentication
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MidtierCore
import MidtierHTTP
import MidtierStore
import MidtierTestSupport
import NIOCore
import Registrations
import Testing

@testable import Callers

/// Who calls and with which registration, on its own (docs/identity.md): the proxy's admission
/// and onboarding, as `Callers` decides them for the proxy and every device route, on an SQLite
/// store. The same rules through the server are in MidtierServerTests and Tests/e2e.
@Suite(.timeLimit(.minutes(10))) struct CallersTests {
    static let alice = UserIdentity.local("alice")
    static let bob = UserIdentity.local("bob")
    static func basic(_ user: String, _ password: String) -> String { "Basic " + Data("\(user):\(password)".utf8).base64EncodedString() }

    /// The callers of a configuration with apps `demo` (implicit registration on) and `other`,
    /// users alice and bob of `users.json`, on a fresh SQLite store.
    static func withCallers(_ body: (Callers, CallerSignIn) async throws -> Void) async throws {
        let testStore = try await TestStore.make(.sqlite)
        var demo = AppConfiguration(id: "demo", destinations: ["echo"])
        demo.implicitRegistration = true
        let configuration = MidtierConfiguration(
            server: ServerSettings(),
            apps: ["demo": demo, "other": AppConfiguration(id: "other")],
            destinations: [:],
            users: [
                "alice": LocalUser(id: "alice", passwordHash: SecretHashing.hash("alice-pw", cost: 4)),
                "bob": LocalUser(id: "bob", passwordHash: SecretHashing.hash("bob-pw", cost: 4)),
            ])
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            let store = try await testStore.open()
            let callers = Callers(registrations: RegistrationService(store: store), logger: Logger(label: "test"))
            try await body(callers, CallerSignIn(configuration: configuration, httpClient: client))
        } catch {
            try? await client.shutdown()
            await testStore.remove()
            throw error
        }
        try await client.shutdown()
        await testStore.remove()
    }

    static func request(_ fields: [(String, String)]) -> Request {
        var headers = HTTPFields()
        for (name, value) in fields { headers.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        let head = HTTPRequest(method: .get, scheme: "http", authority: "m.example", path: "/echo/x", headerFields: headers)
        return Request(head: head, body: RequestBody(buffer: ByteBuffer()))
    }

    static func onboard(_ callers: CallerSignIn, _ service: Callers, user: UserIdentity, app: String = "demo") async throws -> Registration {
        try await service.onboard(
            app: callers.configuration.apps[app] ?? AppConfiguration(id: app), user: user, requestedID: nil,
            device: DeviceDetails(deviceId: "phone-\(user.id)"), source: "test")
    }

    @Test func theOwnerIsAdmittedWithTheRegistrationsApp() async throws {
        try await Self.withCallers { callers, signIn in
            let made = try await Self.onboard(signIn, callers, user: Self.alice)
            let call = try await callers.admit(
                Self.request([("Authorization", Self.basic("alice", "alice-pw")), ("X-SMP-APPCID", made.id)]), signIn: signIn, client: nil)
            #expect(call.registration.id == made.id)
            #expect(call.app.id == "demo")
            #expect(call.user.identity == Self.alice)
        }
    }

    /// A caller without valid credentials hears the same refusal whether the id exists or not.
    @Test func badCredentialsAreRefusedBeforeTheIdIsLookedAt() async throws {
        try await Self.withCallers { callers, signIn in
            let made = try await Self.onboard(signIn, callers, user: Self.alice)
            var refusals: [Refusal] = []
            for id in [made.id, "no-such-registration"] {
                let request = Self.request([("Authorization", Self.basic("alice", "wrong")), ("X-SMP-APPCID", id)])
                if let found = await refusal(of: { () async throws(Refusal) in _ = try await callers.admit(request, signIn: signIn, client: nil) }) {
                    refusals.append(found)
                }
            }
            #expect(refusals.count == 2)
            #expect(refusals.allSatisfy { $0.status == .unauthorized })
            #expect(refusals.first?.message == refusals.last?.message)
        }
    }

    /// Another user's registration is answered as an unknown one, and so is an app mismatch.
    @Test func onlyTheOwnerAndOnlyInTheRegistrationsApp() async throws {
        try await Self.withCallers { callers, signIn in
            let made = try await Self.onboard(signIn, callers, user: Self.alice)
            let asBob = Self.request([("Authorization", Self.basic("bob", "bob-pw")), ("X-SMP-APPCID", made.id)])
            let bob = await refusal { () async throws(Refusal) in _ = try await callers.admit(asBob, signIn: signIn, client: nil) }
            #expect(bob?.status == .forbidden)
            let otherApp = Self.request([
                ("Authorization", Self.basic("alice", "alice-pw")), ("X-SMP-APPCID", made.id), ("X-SMP-APPID", "other"),
            ])
            let mismatch = await refusal { () async throws(Refusal) in _ = try await callers.admit(otherApp, signIn: signIn, client: nil) }
            #expect(mismatch?.status == .forbidden)
            #expect(mismatch?.message.contains("X-SMP-APPID") == true)
        }
    }

    /// A call naming the registration twice, differently, is refused before sign-in.
    @Test func repeatedRegistrationHeadersAreRefused() async throws {
        try await Self.withCallers { callers, signIn in
            let request = Self.request([("X-SMP-APPCID", "a"), ("X-SMP-APPCID", "b")])
            let refusal = await refusal { () async throws(Refusal) in _ = try await callers.admit(request, signIn: signIn, client: nil) }
            #expect(refusal?.status == .badRequest)
        }
    }

    /// The registration block holds for a Connections POST and an implicit registration alike,
    /// and nothing is stored: the one onboarding path checks it.
    @Test func aRegistrationBlockRefusesEveryOnboarding() async throws {
        try await Self.withCallers { callers, signIn in
            let store = callers.registrations.store
            try await store.setBlock(
                UserBlock(user: Self.alice, kind: .registration, reason: "test", since: 1, by: "test"),
                audit: AuditEntry(at: 1, actor: "test", action: "user.block", target: "alice", source: "test"))
            let explicit = await refusal { () async throws(Refusal) in _ = try await Self.onboardRefusing(signIn, callers) }
            #expect(explicit?.status == .forbidden)
            #expect(explicit?.messageCode == "REG_BLOCKED")
            let implicit = Self.request([
                ("Authorization", Self.basic("alice", "alice-pw")), ("X-SMP-APPID", "demo"), ("X-SMP-DEVICEID", "phone-1"),
            ])
            let refusal = await refusal { () async throws(Refusal) in _ = try await callers.admit(implicit, signIn: signIn, client: nil) }
            #expect(refusal?.status == .forbidden)
            #expect(refusal?.messageCode == "REG_BLOCKED")
            #expect(try await store.registrations(matching: RegistrationFilter(user: Self.alice)).isEmpty)
        }
    }

    static func onboardRefusing(_ signIn: CallerSignIn, _ callers: Callers) async throws(Refusal) -> Registration {
        try await callers.onboard(
            app: signIn.configuration.apps["demo"] ?? AppConfiguration(id: "demo"), user: alice, requestedID: nil,
            device: DeviceDetails(deviceId: "phone-1"), source: "test")
    }

    /// `X-SMP-APPID` + `X-SMP-DEVICEID` without a registration: the app's implicit registration
    /// makes one, and the next call finds the same one.
    @Test func anImplicitRegistrationIsMadeOnceAndFoundAgain() async throws {
        try await Self.withCallers { callers, signIn in
            let request = Self.request([
                ("Authorization", Self.basic("alice", "alice-pw")), ("X-SMP-APPID", "demo"), ("X-SMP-DEVICEID", "phone-1"),
            ])
            let first = try await callers.admit(request, signIn: signIn, client: nil)
            let second = try await callers.admit(request, signIn: signIn, client: nil)
            #expect(first.registration.id == second.registration.id)
            let made = try await callers.registrations.store.registration(id: first.registration.id)
            #expect(made?.deviceId == "phone-1")
            // In an app without implicit registration, the device must onboard first.
            let other = Self.request([
                ("Authorization", Self.basic("alice", "alice-pw")), ("X-SMP-APPID", "other"), ("X-SMP-DEVICEID", "phone-1"),
            ])
            let refusal = await refusal { () async throws(Refusal) in _ = try await callers.admit(other, signIn: signIn, client: nil) }
            #expect(refusal?.status == .forbidden)
        }
    }

    /// A device path's `{id}` is the caller's registration id or its DeviceId, never another
    /// user's.
    @Test func aDevicePathNamesOnlyTheCallersOwnRegistration() async throws {
        try await Self.withCallers { callers, signIn in
            let alices = try await Self.onboard(signIn, callers, user: Self.alice)
            let bobs = try await Self.onboard(signIn, callers, user: Self.bob)
            let app = try #require(signIn.configuration.apps["demo"])
            let none = Self.request([])
            #expect(try await callers.registration(namedByDevicePath: alices.id, request: none, app: app, user: Self.alice) == alices.id)
            #expect(try await callers.registration(namedByDevicePath: "phone-alice", request: none, app: app, user: Self.alice) == alices.id)
            for named in [bobs.id, "phone-bob"] {
                let refusal = await refusal { () async throws(Refusal) in
                    _ = try await callers.registration(namedByDevicePath: named, request: none, app: app, user: Self.alice)
                }
                #expect(refusal?.status == .forbidden)
            }
        }
    }
}
