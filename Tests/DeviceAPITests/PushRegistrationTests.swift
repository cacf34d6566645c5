import Foundation
import MidtierCore
import MidtierServer
import MidtierStore
import MidtierTestSupport
import NIOHTTP1
import Registrations
import Testing

/// SAP's push registration path and the Connection entity's tokens (docs/push.md,
/// "Registering a device"), through the HTTP routes, on SQLite and on PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct PushRegistrationTests {
    static let push = "/mobileservices/push/v1/runtime/applications/demo/os"

    /// The demo app with APNs and FCM settings (no key is loaded unless something is sent).
    static func withPush(_ kind: StoreKind, _ body: (TestEnvironment) async throws -> Void) async throws {
        try await TestEnvironment.withMidtier(
            kind,
            adjust: { configuration in
                configuration.apps["demo"]?.push = PushSettings(
                    apns: APNsSettings(
                        teamID: "TEAM123456", keyID: "KEY1234567", privateKeyPEM: "unused", topic: "com.example.demo", environment: .sandbox),
                    fcm: FCMSettings(projectID: "demo", clientEmail: "push@demo.example", privateKeyPEM: "unused"))
            }, body)
    }

    static func tokens(_ env: TestEnvironment, _ user: TestUser, _ id: String) async throws -> (apns: String?, fcm: String?) {
        let reply = try await env.call(
            .GET, "\(DeviceCalls.connections)('\(id)')", headers: [("Authorization", user.basic), ("Accept", "application/json")])
        let entity = (reply.json["d"] as? [String: Any]) ?? [:]
        return (entity["ApnsDeviceToken"] as? String, entity["AndroidGcmRegistrationId"] as? String)
    }

    @Test(arguments: StoreKind.allCases) func aDeviceSetsReplacesAndRemovesItsToken(_ kind: StoreKind) async throws {
        try await Self.withPush(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let id = try await UserStorageTests.onboard(env, .alice, device: "phone-1")
            let set = try await env.call(.POST, "\(Self.push)/ios/devices/\(id)", headers: alice, body: #"{"pushToken":"ab01cd","userLocale":"de"}"#)
            #expect(set.status == 201, "\(set.status) \(set.text)")
            #expect(try await Self.tokens(env, .alice, id).apns == "ab01cd")
            // By DeviceId too, and a new token replaces the old one.
            let replace = try await env.call(.PUT, "\(Self.push)/ios/devices/phone-1", headers: alice, body: #"{"pushToken":"ef02"}"#)
            #expect(replace.status == 200, "\(replace.status) \(replace.text)")
            #expect(try await Self.tokens(env, .alice, id).apns == "ef02")
            let android = try await env.call(.PUT, "\(Self.push)/android/devices/\(id)", headers: alice, body: #"{"pushToken":"fcm:token-1"}"#)
            #expect(android.status == 200, "\(android.text)")
            let remove = try await env.call(.DELETE, "\(Self.push)/ios/devices/\(id)", headers: alice)
            #expect(remove.status == 204, "\(remove.status) \(remove.text)")
            let after = try await Self.tokens(env, .alice, id)
            #expect(after.apns == "" && after.fcm == "fcm:token-1", "\(after)")
        }
    }

    @Test(arguments: StoreKind.allCases) func badRegistrationsAreRefusedNamingWhatIsWrong(_ kind: StoreKind) async throws {
        try await Self.withPush(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let id = try await UserStorageTests.onboard(env, .alice, device: "phone-2")
            let cases: [(String, String, Int, String)] = [
                ("windows", #"{"pushToken":"ab"}"#, 400, "APNs (os ios) and FCM (os android)"),
                ("ios", #"{"pushToken":"not hex"}"#, 400, "space"),
                ("ios", #"{"pushToken":"zz"}"#, 400, "hexadecimal"),
                ("ios", #"{"pushToken":""}"#, 400, "pushToken is missing"),
                ("android", #"{"pushToken":5}"#, 400, "pushToken is missing"),
                ("android", #"{"pushToken":"t","pushGroup":7}"#, 400, "pushGroup must be a string"),
                ("android", #"{"pushToken":"t",}"#, 400, "not a JSON object"),
            ]
            for (os, body, status, words) in cases {
                let reply = try await env.call(.POST, "\(Self.push)/\(os)/devices/\(id)", headers: alice, body: body)
                #expect(reply.status == status && reply.text.contains(words), "\(os) \(body): \(reply.status) \(reply.text)")
            }
            // Another user's registration is not the caller's.
            let bob = try await env.call(
                .POST, "\(Self.push)/ios/devices/\(id)", headers: [("Authorization", TestUser.bob.basic)], body: #"{"pushToken":"ab"}"#)
            #expect(bob.status == 403, "\(bob.status) \(bob.text)")
            let anonymous = try await env.call(.POST, "\(Self.push)/ios/devices/\(id)", body: #"{"pushToken":"ab"}"#)
            #expect(anonymous.status == 401)
        }
    }

    /// SAP's push path lets the device choose its own device id: an id that names none of the
    /// user's registrations is bound to the call's own one (X-SMP-APPCID, or the user's only
    /// active registration of the app) and names it from then on. It never reaches another
    /// user's registration, even when it is that registration's id.
    @Test(arguments: StoreKind.allCases) func aDeviceChosenIdIsBoundToTheCallersOwnRegistration(_ kind: StoreKind) async throws {
        try await Self.withPush(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let first = try await UserStorageTests.onboard(env, .alice, device: "phone-1")
            let chosen = "sdk-device-7f3a"
            let set = try await env.call(.POST, "\(Self.push)/ios/devices/\(chosen)", headers: alice, body: #"{"pushToken":"ab01"}"#)
            #expect(set.status == 201, "\(set.status) \(set.text)")
            #expect(try await Self.tokens(env, .alice, first).apns == "ab01")
            let again = try await env.call(.PUT, "\(Self.push)/ios/devices/\(chosen)", headers: alice, body: #"{"pushToken":"ab02"}"#)
            let afterPut = try await Self.tokens(env, .alice, first).apns
            #expect(again.status == 200 && afterPut == "ab02", "\(again.status) \(again.text)")

            // Bob names Alice's registration id as his device id: his own registration gets it.
            let bobs = try await UserStorageTests.onboard(env, .bob, device: "phone-b")
            let bob = [("Authorization", TestUser.bob.basic), ("Content-Type", "application/json")]
            let taken = try await env.call(.POST, "\(Self.push)/ios/devices/\(first)", headers: bob, body: #"{"pushToken":"cd01"}"#)
            #expect(taken.status == 201, "\(taken.status) \(taken.text)")
            #expect(try await Self.tokens(env, .bob, bobs).apns == "cd01")
            #expect(try await Self.tokens(env, .alice, first).apns == "ab02", "Alice's registration keeps its token")

            // With two registrations, the call names its own.
            let second = try await UserStorageTests.onboard(env, .alice, device: "tablet-1")
            let unnamed = try await env.call(.POST, "\(Self.push)/android/devices/tablet-sdk", headers: alice, body: #"{"pushToken":"t1"}"#)
            #expect(unnamed.status == 403 && unnamed.text.contains("X-SMP-APPCID"), "\(unnamed.status) \(unnamed.text)")
            let named = try await env.call(
                .POST, "\(Self.push)/android/devices/tablet-sdk", headers: alice + [("X-SMP-APPCID", second)], body: #"{"pushToken":"t1"}"#)
            let tablet = try await Self.tokens(env, .alice, second).fcm
            #expect(named.status == 201 && tablet == "t1", "\(named.status) \(named.text)")
            // The first registration's chosen id names it, not the one the call names.
            let crossed = try await env.call(
                .PUT, "\(Self.push)/ios/devices/\(chosen)", headers: alice + [("X-SMP-APPCID", second)], body: #"{"pushToken":"ab03"}"#)
            #expect(crossed.status == 403, "\(crossed.status) \(crossed.text)")
            let removed = try await env.call(.DELETE, "\(Self.push)/ios/devices/\(chosen)", headers: alice)
            let afterDelete = try await Self.tokens(env, .alice, first).apns
            #expect(removed.status == 204 && afterDelete == "", "\(removed.status) \(removed.text)")
            let control = try await env.call(.POST, "\(Self.push)/ios/devices/a%07b", headers: alice, body: #"{"pushToken":"ab"}"#)
            #expect(control.status == 400, "\(control.status) \(control.text)")
        }
    }

    /// Found by the outside attack of issue 36: two of one user's registrations binding the same
    /// new device id at once both kept it, so a sender's device path then reached both phones.
    /// A device id names one registration: of two at once, at most one keeps it, and a call
    /// whose registration does not keep it is answered 409.
    @Test(arguments: StoreKind.allCases) func aChosenIdClaimedByTwoRegistrationsAtOnceNamesOne(_ kind: StoreKind) async throws {
        try await Self.withPush(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let phone = try await UserStorageTests.onboard(env, .alice, device: "race-phone")
            let tablet = try await UserStorageTests.onboard(env, .alice, device: "race-tablet")
            for round in 0..<12 {
                let chosen = "sdk-race-\(round)"
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for (own, token) in [(phone, "aa\(round)0"), (tablet, "bb\(round)0")] {
                        group.addTask {
                            try await env.call(
                                .POST, "\(Self.push)/ios/devices/\(chosen)", headers: alice + [("X-SMP-APPCID", own)],
                                body: #"{"pushToken":"\#(token)"}"#
                            ).status
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let owned = try await env.server.registrations.store.registrations(
                    matching: RegistrationFilter(user: UserIdentity(realm: UserIdentity.localRealm, id: TestUser.alice.id), app: "demo"))
                // The detail Callers.pushDeviceIdDetail names.
                let holders = owned.filter { $0.details["PushDeviceId"] == chosen }.map(\.id)
                #expect(holders.count <= 1, "round \(round): \(holders) both hold \(chosen); answers \(statuses)")
                #expect(statuses.filter { $0 == 201 }.count == holders.count, "round \(round): answers \(statuses), holders \(holders)")
                #expect(statuses.allSatisfy { $0 == 201 || $0 == 409 || $0 == 403 }, "round \(round): \(statuses)")
            }
        }
    }

    /// Found by an outside attack: an APNs token is hex, which APNs reads in either case, so Bob
    /// naming Alice's token in upper case took her phone's notifications; a locked phone without
    /// X-SMP-APPCID bound its id to the user's other, active registration and moved its token
    /// there; and a chosen id and another registration's DeviceId named different registrations
    /// for the device and for a sender. Each failed before the fix.
    @Test(arguments: StoreKind.allCases) func anAttackersDeviceIdsAndTokensReachNoOtherRegistration(_ kind: StoreKind) async throws {
        try await Self.withPush(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let bob = [("Authorization", TestUser.bob.basic), ("Content-Type", "application/json")]
            let hers = try await UserStorageTests.onboard(env, .alice, device: "phone-a")
            let set = try await env.call(.POST, "\(Self.push)/ios/devices/\(hers)", headers: alice, body: #"{"pushToken":"a1b2c3"}"#)
            #expect(set.status == 201)
            let his = try await UserStorageTests.onboard(env, .bob, device: "phone-b")
            let upper = try await env.call(.POST, "\(Self.push)/ios/devices/\(his)", headers: bob, body: #"{"pushToken":"A1B2C3"}"#)
            #expect(upper.status == 409, "the same token in upper case: \(upper.status) \(upper.text)")
            let entity = try await env.call(
                .PATCH, "\(DeviceCalls.connections)('\(his)')", headers: bob, body: #"{"ApnsDeviceToken":"A1b2C3"}"#)
            #expect(entity.status == 409, "through the Connection entity: \(entity.status) \(entity.text)")
            let bobsToken = try await Self.tokens(env, .bob, his).apns
            #expect(bobsToken == "", "\(bobsToken ?? "-")")
            // A token is kept in lower case.
            let mixed = try await env.call(.PUT, "\(Self.push)/ios/devices/\(hers)", headers: alice, body: #"{"pushToken":"DEADbeef"}"#)
            let kept = try await Self.tokens(env, .alice, hers).apns
            #expect(mixed.status == 200 && kept == "deadbeef", "\(kept ?? "-")")

            // Alice's second phone is locked; a call without X-SMP-APPCID binds nothing.
            let lost = try await UserStorageTests.onboard(env, .alice, device: "phone-lost")
            #expect(try await env.admin(.POST, "/admin/v1/registrations/\(lost)/lock").status == 200)
            let unnamed = try await env.call(.POST, "\(Self.push)/ios/devices/sdk-lost", headers: alice, body: #"{"pushToken":"ff01"}"#)
            #expect(unnamed.status == 403 && unnamed.text.contains("X-SMP-APPCID"), "\(unnamed.status) \(unnamed.text)")
            let cleared = try await env.call(.DELETE, "\(Self.push)/ios/devices/sdk-other", headers: alice)
            #expect(cleared.status == 403, "\(cleared.status) \(cleared.text)")
            let still = try await Self.tokens(env, .alice, hers).apns
            #expect(still == "deadbeef", "the active phone keeps its token: \(still ?? "-")")

            // A chosen id names its registration before another registration's DeviceId does.
            let bound = try await env.call(
                .POST, "\(Self.push)/ios/devices/Phone-X", headers: alice + [("X-SMP-APPCID", hers)], body: #"{"pushToken":"ab12"}"#)
            #expect(bound.status == 201, "\(bound.status) \(bound.text)")
            let tablet = try await UserStorageTests.onboard(env, .alice, device: "phone-x")
            let again = try await env.call(
                .PUT, "\(Self.push)/ios/devices/Phone-X", headers: alice + [("X-SMP-APPCID", hers)], body: #"{"pushToken":"ab13"}"#)
            let hersNow = try await Self.tokens(env, .alice, hers).apns
            let tabletNow = try await Self.tokens(env, .alice, tablet).apns
            #expect(again.status == 200 && hersNow == "ab13" && tabletNow == "", "\(again.status) \(hersNow ?? "-") \(tabletNow ?? "-")")
        }
    }

    /// A push token moves only between one user's own registrations. Bob naming the token Alice's
    /// registration holds moved it to him silently, and her notifications reached whoever had
    /// named it: now that is 409 and Alice keeps it — through SAP's push path and the Connection
    /// entity alike. Alice's own new registration takes it from her earlier one, as before.
    @Test(arguments: StoreKind.allCases) func aTokenMovesOnlyBetweenOneUsersRegistrations(_ kind: StoreKind) async throws {
        try await Self.withPush(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let bob = [("Authorization", TestUser.bob.basic), ("Content-Type", "application/json")]
            let aliceID = try await UserStorageTests.onboard(env, .alice, device: "alices-phone")
            #expect(try await env.call(.PUT, "\(Self.push)/ios/devices/\(aliceID)", headers: alice, body: #"{"pushToken":"aa11"}"#).status == 200)
            let bobID = try await UserStorageTests.onboard(env, .bob, device: "bobs-phone")
            let taken = try await env.call(.PUT, "\(Self.push)/ios/devices/\(bobID)", headers: bob, body: #"{"pushToken":"aa11"}"#)
            #expect(taken.status == 409, "\(taken.status) \(taken.text)")
            #expect(try await Self.tokens(env, .alice, aliceID).apns == "aa11", "Alice keeps her phone's token")
            #expect(try await Self.tokens(env, .bob, bobID).apns == "")
            let onboarding = try await DeviceCalls.onboard(
                env, .bob, body: #"{"DeviceType":"iOS","DeviceId":"bobs-other","ApnsDeviceToken":"aa11"}"#)
            #expect(onboarding.status == 409 && onboarding.header("X-SMP-APPCID") == nil, "\(onboarding.status) \(onboarding.text)")
            let entity = try await env.call(
                .PUT, "\(DeviceCalls.connections)('\(bobID)')", headers: bob, body: #"{"ApnsDeviceToken":"aa11"}"#)
            #expect(entity.status == 409, "\(entity.status) \(entity.text)")
            #expect(try await Self.tokens(env, .alice, aliceID).apns == "aa11")

            // Alice's own new registration takes her token from her earlier one.
            let again = try await DeviceCalls.onboard(
                env, .alice, body: #"{"DeviceType":"iOS","DeviceId":"alices-new","ApnsDeviceToken":"aa11"}"#)
            let newID = try #require(again.header("X-SMP-APPCID"), "\(again.status) \(again.text)")
            #expect(try await Self.tokens(env, .alice, aliceID).apns == "", "her earlier registration no longer holds it")
            #expect(try await Self.tokens(env, .alice, newID).apns == "aa11")
            // Once Alice's registrations let go of it (she signs out: deletes it), Bob's phone may take it.
            #expect(try await env.call(.DELETE, "\(DeviceCalls.connections)('\(newID)')", headers: alice).status == 204)
            #expect(try await env.call(.PUT, "\(Self.push)/ios/devices/\(bobID)", headers: bob, body: #"{"pushToken":"aa11"}"#).status == 200)
        }
    }
}
