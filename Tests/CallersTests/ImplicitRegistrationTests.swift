import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierTestSupport
import NIOHTTP1
import Testing

/// `implicitRegistration` (docs/device-api.md, "Implicit registration"): with the app option
/// on, a signed-in call naming its app and device (`X-SMP-APPID`, `X-SMP-DEVICEID`) without a
/// registration of that device onboards it through the same rules as a Connections POST.
/// Through HTTP, on SQLite and on PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct ImplicitRegistrationTests {
    static func sdkHeaders(_ user: TestUser?, device: String) -> [(String, String)] {
        (user.map { [("Authorization", $0.basic)] } ?? []) + [("X-SMP-APPID", "demo"), ("X-SMP-DEVICEID", device)]
    }

    static func registrations(_ env: TestEnvironment, _ user: TestUser) async throws -> [[String: Any]] {
        let listed = try await env.admin(.GET, "/admin/v1/registrations?user=\(user.id)")
        return listed.json["registrations"] as? [[String: Any]] ?? []
    }

    static func withMidtier(_ kind: StoreKind, implicit: Bool, maximum: Int? = nil, _ body: (TestEnvironment) async throws -> Void) async throws {
        try await TestEnvironment.withMidtier(
            kind,
            adjust: { configuration in
                configuration.apps["demo"]?.implicitRegistration = implicit
                if let maximum { configuration.server.maxRegistrationsPerUser = maximum }
            }, body)
    }

    @Test(arguments: StoreKind.allCases) func offByDefaultAnUnregisteredDeviceIsRefused(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind, implicit: false) { env in
            let reply = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "phone-1"))
            #expect(reply.status == 403, "\(reply.text)")
            #expect(try await Self.registrations(env, .alice).isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases) func onTheFirstCallRegistersAndTheNextReusesIt(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind, implicit: true) { env in
            let first = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "phone-1"))
            #expect(first.status == 200, "\(first.status) \(first.text)")
            let made = try await Self.registrations(env, .alice)
            #expect(
                made.count == 1 && made.first?["deviceId"] as? String == "phone-1" && made.first?["appId"] as? String == "demo",
                "\(made)")
            let audit = try await env.admin(.GET, "/admin/v1/audit")
            let entries = (audit.json["entries"] as? [[String: Any]] ?? []).filter { $0["action"] as? String == "registration.create" }
            #expect(entries.count == 1 && (entries.first?["detail"] as? String ?? "").contains("implicit"), "\(entries)")

            let second = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "phone-1"))
            #expect(second.status == 200, "\(second.status) \(second.text)")
            #expect(try await Self.registrations(env, .alice).count == 1, "the second call reuses the registration")

            // A device id with control characters is refused, as in a POST; nothing is made.
            let control = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "ph\tone"))
            #expect(control.status == 400, "\(control.status) \(control.text)")
            #expect(try await Self.registrations(env, .alice).count == 1)

            // No credentials: 401, nothing made.
            let anonymous = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(nil, device: "phone-2"))
            #expect(anonymous.status == 401, "\(anonymous.status) \(anonymous.text)")
            let wrong = TestUser(id: "alice", password: "wrong", sfUserId: "100001")
            let badPassword = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(wrong, device: "phone-3"))
            #expect(badPassword.status == 401, "\(badPassword.status) \(badPassword.text)")
            #expect(try await Self.registrations(env, .alice).count == 1)
        }
    }

    @Test(arguments: StoreKind.allCases) func aLockedDeviceIsRefusedAndNotRegisteredAgain(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind, implicit: true) { env in
            let first = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "lost-phone"))
            #expect(first.status == 200, "\(first.text)")
            let id = try #require(try await Self.registrations(env, .alice).first?["id"] as? String)
            let locked = try await env.admin(.POST, "/admin/v1/registrations/\(id)/lock")
            #expect(locked.status == 200, "\(locked.text)")
            let again = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "lost-phone"))
            #expect(again.status == 403 && again.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(again.status) \(again.text)")
            #expect(try await Self.registrations(env, .alice).count == 1, "no new registration of a held device")
        }
    }

    @Test(arguments: StoreKind.allCases) func aUserBlockedForRegistrationIsRefused(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind, implicit: true) { env in
            let blocked = try await env.admin(.PUT, "/admin/v1/users/alice/block", body: #"{"type":"registration","reason":"x"}"#)
            #expect(blocked.status == 200 || blocked.status == 204, "\(blocked.text)")
            let reply = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "phone-1"))
            #expect(reply.status == 403 && reply.header("x-message-code") == "REG_BLOCKED", "\(reply.status) \(reply.text)")
            #expect(try await Self.registrations(env, .alice).isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases) func overThePerUserLimitIsRefusedAsAPost(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind, implicit: true, maximum: 1) { env in
            let first = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "phone-1"))
            #expect(first.status == 200, "\(first.text)")
            let post = try await DeviceCalls.onboard(env, .alice, body: #"{"DeviceId":"phone-2"}"#)
            let implicit = try await env.call(.GET, DeviceCalls.seedQuery, headers: Self.sdkHeaders(.alice, device: "phone-2"))
            #expect(post.status == 403 && implicit.status == 403, "\(post.status) \(implicit.status) \(implicit.text)")
            #expect(DeviceCalls.errorCode(implicit) == DeviceCalls.errorCode(post), "the same answer as a POST: \(implicit.text)")
            #expect(try await Self.registrations(env, .alice).count == 1)
        }
    }
}
