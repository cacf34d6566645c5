import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierStore
import MidtierTestSupport
import NIOHTTP1
import Registrations
import Testing

/// A lock or wipe holds for the device, not only for its registration (docs/identity.md,
/// "The same device"): while a user's registration of a device (app + `DeviceId` + user, by
/// exact bytes) is locked or wiped, that device cannot onboard again for that user, nor can
/// another of the user's registrations take its `DeviceId`, until an admin unlocks it or
/// deletes it. Through the HTTP routes, on SQLite and on PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct OnboardingLockTests {
    @Test(arguments: StoreKind.allCases) func aLockedOrWipedDeviceCannotOnboardAgainUntilAnAdminActs(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = TestUser.alice
            let first = try await DeviceCalls.onboard(env, alice, body: #"{"DeviceType":"iOS","DeviceId":"lost-phone-1"}"#)
            let lost = try #require(first.header("X-SMP-APPCID"), "\(first.status) \(first.text)")

            // The user locks the lost phone through self-service; its calls are refused.
            let locked = try await env.call(.POST, "/mobileservices/me/registrations/\(lost)/lock", headers: [("Authorization", alice.basic)])
            #expect(locked.status == 200, "\(locked.text)")
            let proxied = try await env.call(.GET, DeviceCalls.seedQuery, headers: [("Authorization", alice.basic), ("X-SMP-APPCID", lost)])
            #expect(proxied.status == 403 && proxied.header("x-message-code") == "TRAFFIC_REG_LOCKED")

            // Onboarding the same device again is refused the same way, in both body forms.
            for body in [#"{"DeviceId":"lost-phone-1"}"#, #"{"d":{"DeviceType":"iOS","DeviceId":"lost-phone-1"}}"#] {
                let again = try await DeviceCalls.onboard(env, alice, body: body)
                #expect(again.status == 403, "\(body): \(again.status) \(again.text)")
                #expect(again.header("x-message-code") == "TRAFFIC_REG_LOCKED")
                #expect(DeviceCalls.errorCode(again) == DeviceCalls.errorCode(proxied), "the same OData error as the proxy's: \(again.text)")
                #expect(again.header("X-SMP-APPCID") == nil)
            }
            // Nor through the SDK's own headers: the device id still finds the locked registration.
            let bySDK = try await env.call(
                .GET, DeviceCalls.seedQuery,
                headers: [
                    ("Authorization", alice.basic), ("X-SMP-APPID", "demo"),
                    ("X-SMP-DEVICEID", "lost-phone-1"),
                ])
            #expect(bySDK.status == 403 && bySDK.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(bySDK.status) \(bySDK.text)")

            // The locked registration cannot move away from its device id...
            let moved = try await env.call(
                .PUT, "\(DeviceCalls.connections)('\(lost)')", headers: [("Authorization", alice.basic)],
                body: #"{"DeviceId":"somewhere-else"}"#)
            #expect(moved.status == 403 && moved.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(moved.status) \(moved.text)")
            // ...and another registration of the user cannot take it.
            let newPhone = try await DeviceCalls.onboard(env, alice, body: #"{"DeviceId":"new-phone-2"}"#)
            #expect(newPhone.status == 201, "a new phone onboards: \(newPhone.text)")
            let newID = try #require(newPhone.header("X-SMP-APPCID"))
            for method in [HTTPMethod.PUT, .PATCH] {
                let taken = try await env.call(
                    method, "\(DeviceCalls.connections)('\(newID)')", headers: [("Authorization", alice.basic)],
                    body: #"{"DeviceId":"lost-phone-1"}"#)
                #expect(taken.status == 403 && taken.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(method): \(taken.status) \(taken.text)")
            }
            let otherFields = try await env.call(
                .PATCH, "\(DeviceCalls.connections)('\(newID)')", headers: [("Authorization", alice.basic)],
                body: #"{"DeviceModel":"Pixel 9"}"#)
            #expect(otherFields.status == 204, "the new registration's other fields still change: \(otherFields.text)")
            // Another user's device of that id is another device.
            let bob = try await DeviceCalls.onboard(env, .bob, body: #"{"DeviceId":"lost-phone-1"}"#)
            #expect(bob.status == 201, "\(bob.text)")

            // An admin unlocks it: the device onboards again.
            let unlocked = try await env.admin(.POST, "/admin/v1/registrations/\(lost)/unlock")
            #expect(unlocked.status == 200, "\(unlocked.text)")
            let afterUnlock = try await DeviceCalls.onboard(env, alice, body: #"{"DeviceId":"lost-phone-1"}"#)
            #expect(afterUnlock.status == 201, "\(afterUnlock.text)")

            // Wiped: refused until an admin deletes the wiped registration.
            let wipedReply = try await DeviceCalls.onboard(env, alice, body: #"{"DeviceId":"wiped-phone-3"}"#)
            let wiped = try #require(wipedReply.header("X-SMP-APPCID"))
            let wipe = try await env.call(.POST, "/mobileservices/me/registrations/\(wiped)/wipe", headers: [("Authorization", alice.basic)])
            #expect(wipe.status == 200, "\(wipe.text)")
            let afterWipe = try await DeviceCalls.onboard(env, alice, body: #"{"DeviceId":"wiped-phone-3"}"#)
            #expect(afterWipe.status == 403 && afterWipe.header("x-message-code") == "TRAFFIC_REG_WIPED", "\(afterWipe.status) \(afterWipe.text)")
            #expect(DeviceCalls.errorCode(afterWipe) == "TRAFFIC_REG_WIPED")
            let unlockWiped = try await env.admin(.POST, "/admin/v1/registrations/\(wiped)/unlock")
            #expect(unlockWiped.status == 409, "a wipe is never undone: \(unlockWiped.status)")
            let deleted = try await env.admin(.DELETE, "/admin/v1/registrations/\(wiped)")
            #expect(deleted.status == 204, "\(deleted.status) \(deleted.text)")
            let afterDelete = try await DeviceCalls.onboard(env, alice, body: #"{"DeviceId":"wiped-phone-3"}"#)
            #expect(afterDelete.status == 201, "\(afterDelete.text)")
        }
    }

    /// A lock made through one instance holds at once on another that still has the
    /// registration in memory as active: the device cannot move off its `DeviceId` there, and
    /// cannot onboard again there.
    /// Respelling the `DeviceId` (case, spaces at the ends, a zero-width space, fullwidth
    /// letters) onboarded the locked device again; "the same device" is now the id's normal
    /// form (``DeviceIdentity``, docs/identity.md). Another id is another device.
    @Test func aRespelledDeviceIdIsTheSameLockedDevice() async throws {
        try await TestEnvironment.withMidtier(.sqlite) { env in
            let first = try await DeviceCalls.onboard(env, .bob, body: #"{"DeviceType":"iOS","DeviceId":"bob-dev-1"}"#)
            let id = try #require(first.header("X-SMP-APPCID"), "\(first.status) \(first.text)")
            let locked = try await env.admin(.POST, "/admin/v1/registrations/\(id)/lock")
            #expect(locked.status == 200, "\(locked.text)")
            for spelling in [
                "bob-dev-1", "BOB-DEV-1", "bob-dev-1 ", " bob-dev-1", "bob-dev-1\u{200B}", "\u{FF42}\u{FF4F}\u{FF42}-dev-1", "Bob-\u{00AD}dev-1",
            ] {
                let escaped = spelling.unicodeScalars.map { $0.isASCII ? String($0) : String(format: "\\u%04X", $0.value) }.joined()
                let again = try await DeviceCalls.onboard(env, .bob, body: #"{"DeviceType":"iOS","DeviceId":"\#(escaped)"}"#)
                #expect(again.status == 403 && again.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(escaped): \(again.status) \(again.text)")
                // Nor through the SDK's headers without X-SMP-APPCID.
                let bySDK = try await env.call(
                    .GET, DeviceCalls.seedQuery,
                    headers: [
                        ("Authorization", TestUser.bob.basic), ("X-SMP-APPID", "demo"),
                        ("X-SMP-DEVICEID", spelling.trimmingCharacters(in: .whitespaces)),
                    ])
                #expect(bySDK.status == 403, "\(escaped): \(bySDK.status) \(bySDK.text)")
            }
            let other = try await DeviceCalls.onboard(env, .bob, body: #"{"DeviceType":"iOS","DeviceId":"bob-dev-2"}"#)
            #expect(other.status == 201, "another device onboards: \(other.status) \(other.text)")
            // Nor can another registration take the locked device's id respelled.
            let otherID = try #require(other.header("X-SMP-APPCID"))
            let moved = try await env.call(
                .PUT, "\(DeviceCalls.connections)('\(otherID)')",
                headers: [("Authorization", TestUser.bob.basic), ("Content-Type", "application/json")],
                body: #"{"DeviceId":"BOB-DEV-1"}"#)
            #expect(moved.status == 403 && moved.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(moved.status) \(moved.text)")
        }
    }

    @Test(arguments: StoreKind.allCases) func aLockThroughAnotherInstanceHoldsAtOnce(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let one = RegistrationService(store: try await test.open()), other = RegistrationService(store: try await test.open())
            let alice = UserIdentity.local("alice")
            guard
                case .registered(let phone) = try await one.register(
                    app: "demo", user: alice, requestedID: nil,
                    device: DeviceDetails(deviceId: "phone-1"), source: "")
            else {
                Issue.record("no registration"); return
            }
            #expect(try await other.owned(id: phone.id, user: alice, app: "demo")?.state == .active, "the other instance has it in memory")
            guard case .changed = try await one.apply(.lock, to: phone.id, by: .user(alice, source: "")) else { Issue.record("no lock"); return }
            let moved = try await other.updateDevice(id: phone.id, user: alice, app: "demo", source: "") { $0.deviceId = "phone-2" }
            #expect(moved == .deviceHeld(try #require(try await one.store.currentRegistration(id: phone.id))))
            let again = try await other.register(app: "demo", user: alice, requestedID: nil, device: DeviceDetails(deviceId: "phone-1"), source: "")
            guard case .deviceHeld(let held) = again else { Issue.record("onboarded again: \(again)"); return }
            #expect(held.id == phone.id && held.state == .locked)
        }
    }

    /// A registration without a `DeviceId` names no device: locking it stops that registration
    /// only, and onboarding without a `DeviceId` is not matched against it.
    @Test func aRegistrationWithoutADeviceIdLocksOnlyItself() async throws {
        try await TestEnvironment.withMidtier(.sqlite) { env in
            let first = try await DeviceCalls.onboard(env, .alice, body: #"{"DeviceType":"browser"}"#)
            let id = try #require(first.header("X-SMP-APPCID"))
            #expect(try await env.admin(.POST, "/admin/v1/registrations/\(id)/lock").status == 200)
            let again = try await DeviceCalls.onboard(env, .alice, body: #"{"DeviceType":"browser","DeviceId":""}"#)
            #expect(again.status == 201, "\(again.text)")
        }
    }

    /// A registration the app's offline policy has locked (`blockDisconnectedPeriod`) is
    /// locked for onboarding too, even before its device calls again.
    @Test(arguments: StoreKind.allCases) func theOfflinePolicyHoldsForOnboarding(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(
            kind,
            adjust: { configuration in
                configuration.apps["demo"]?.blockWipingPolicy = BlockWipingPolicy(blockWipeEnabled: true, blockDisconnectedPeriod: 30)
            }
        ) { env in
            let first = try await DeviceCalls.onboard(env, .alice, body: #"{"DeviceId":"idle-phone"}"#)
            let id = try #require(first.header("X-SMP-APPCID"))
            env.clock.advance(days: 31)
            let again = try await DeviceCalls.onboard(env, .alice, body: #"{"DeviceId":"idle-phone"}"#)
            #expect(again.status == 403 && again.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(again.status) \(again.text)")
            let state = try await env.admin(.GET, "/admin/v1/registrations/\(id)")
            #expect(state.json["state"] as? String == "locked", "\(state.text)")
        }
    }
}
