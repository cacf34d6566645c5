import Foundation
import MidtierTestSupport
import NIOHTTP1
import Testing

/// A wiped device is told what is true (docs/identity.md, "The same device"): it cannot onboard
/// again until an admin deletes the wiped registration — and then it can.
@Suite(.timeLimit(.minutes(10))) struct WipedDeviceMessageTests {
    static let message = "the registration is wiped; this device cannot onboard again until an admin deletes the wiped registration"

    @Test func aWipedDeviceIsToldItsWayBack() async throws {
        try await TestEnvironment.withMidtier(.sqlite) { env in
            let body = #"{"DeviceType":"iOS","DeviceId":"wiped-phone-1"}"#
            let first = try await DeviceCalls.onboard(env, .alice, body: body)
            let id = try #require(first.header("X-SMP-APPCID"), "\(first.status) \(first.text)")
            #expect(try await env.admin(.POST, "/admin/v1/registrations/\(id)/wipe").status == 200)

            let proxied = try await env.call(
                .GET, DeviceCalls.seedQuery, headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)])
            #expect(proxied.status == 403 && proxied.header("x-message-code") == "TRAFFIC_REG_WIPED", "\(proxied.status) \(proxied.text)")
            #expect(proxied.text.contains(Self.message), "\(proxied.text)")

            // What it says holds: onboarding again is refused until an admin deletes the wiped
            // registration, then it works.
            let again = try await DeviceCalls.onboard(env, .alice, body: body)
            #expect(again.status == 403 && again.header("x-message-code") == "TRAFFIC_REG_WIPED", "\(again.status) \(again.text)")
            #expect(try await env.admin(.DELETE, "/admin/v1/registrations/\(id)").status == 204)
            let afterDelete = try await DeviceCalls.onboard(env, .alice, body: body)
            #expect(afterDelete.status == 201, "\(afterDelete.status) \(afterDelete.text)")
        }
    }
}
