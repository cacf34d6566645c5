import Foundation
import MidtierCore
import MidtierServer
import MidtierStore
import MidtierTestSupport
import NIOHTTP1
import Registrations
import Testing

/// The Storage service's `currentuser` and `device` levels (docs/device-api.md, "User and
/// device storage"), through the HTTP routes, on SQLite and on PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct UserStorageTests {
    static let root = "/mobileservices/application/demo/Storage/v1/runtime/application/demo"
    static let mdkRoot = "/mobileservices/Storage/v1/runtime/application/demo"

    static func onboard(_ env: TestEnvironment, _ user: TestUser, device: String) async throws -> String {
        let reply = try await DeviceCalls.onboard(env, user, body: #"{"DeviceType":"iOS","DeviceId":"\#(device)"}"#)
        return try #require(reply.header("X-SMP-APPCID"), "\(reply.status) \(reply.text)")
    }

    @Test(arguments: StoreKind.allCases) func aUsersDocumentsAreTheirsAlone(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let bob = [("Authorization", TestUser.bob.basic)]
            let put = try await env.call(
                .PUT, "\(Self.root)/currentuser/HomeScreen", headers: alice,
                body: #"{"Menu":{"AutoHiding":false,"Style":"blue"},"ShortCuts":["Overview","Profile"]}"#)
            #expect(put.status == 200, "\(put.text)")
            let whole = try await env.call(.GET, "\(Self.root)/currentuser/HomeScreen", headers: alice)
            #expect(whole.status == 200 && (whole.json["Menu"] as? [String: Any])?["Style"] as? String == "blue", "\(whole.text)")
            // A key path answers the value there, on the MDK form too.
            let deep = try await env.call(.GET, "\(Self.mdkRoot)/currentuser/HomeScreen/Menu", headers: alice)
            #expect(deep.status == 200 && deep.json["Style"] as? String == "blue", "\(deep.text)")
            // A PUT at a key path sets the value there, the rest stays.
            let set = try await env.call(.PUT, "\(Self.root)/currentuser/HomeScreen/Menu", headers: alice, body: #"{"AutoHiding":true}"#)
            #expect(set.status == 200, "\(set.text)")
            let after = try await env.call(.GET, "\(Self.root)/currentuser/HomeScreen", headers: alice)
            #expect((after.json["Menu"] as? [String: Any])?["AutoHiding"] as? Bool == true && after.json["ShortCuts"] != nil, "\(after.text)")
            // Another user has nothing there, and cannot reach Alice's through her registration.
            let other = try await env.call(.GET, "\(Self.root)/currentuser/HomeScreen", headers: bob)
            #expect(other.status == 404, "\(other.status) \(other.text)")
            let aliceDevice = try await Self.onboard(env, .alice, device: "phone-a")
            let viaDevice = try await env.call(.GET, "\(Self.root)/device/\(aliceDevice)/HomeScreen", headers: bob)
            #expect(viaDevice.status == 403, "\(viaDevice.status) \(viaDevice.text)")
            let bobWrites = try await env.call(.PUT, "\(Self.root)/device/\(aliceDevice)/HomeScreen", headers: bob, body: "{}")
            #expect(bobWrites.status == 403, "\(bobWrites.status) \(bobWrites.text)")
            // Malformed JSON and bodies too large are refused, naming what is wrong.
            let malformed = try await env.call(.PUT, "\(Self.root)/currentuser/HomeScreen", headers: alice, body: #"{"a":1,}"#)
            #expect(malformed.status == 400, "\(malformed.status) \(malformed.text)")
            let big = "{\"x\":\"" + String(repeating: "a", count: 70 * 1024) + "\"}"
            let tooLarge = try await env.call(.PUT, "\(Self.root)/currentuser/Big", headers: alice, body: big)
            #expect(tooLarge.status == 413, "\(tooLarge.status)")
            // DELETE of a key, then of the document.
            let removeKey = try await env.call(.DELETE, "\(Self.root)/currentuser/HomeScreen/ShortCuts", headers: alice)
            #expect(removeKey.status == 200, "\(removeKey.text)")
            let gone = try await env.call(.GET, "\(Self.root)/currentuser/HomeScreen/ShortCuts", headers: alice)
            #expect(gone.status == 404)
            let removeDocument = try await env.call(.DELETE, "\(Self.root)/currentuser/HomeScreen", headers: alice)
            #expect(removeDocument.status == 200)
            let none = try await env.call(.GET, "\(Self.root)/currentuser/HomeScreen", headers: alice)
            #expect(none.status == 404)
            let nameless = try await env.call(.POST, "\(Self.root)/currentuser", headers: alice, body: "{}")
            #expect(nameless.status == 400 && nameless.text.contains("needs a document name"), "\(nameless.status) \(nameless.text)")
        }
    }

    /// Two document names that differ only in Unicode normalization (é composed, e + U+0301)
    /// are two documents, and listing the level shows both, each under its own bytes.
    @Test(arguments: StoreKind.allCases) func documentNamesAreKeptByTheirBytes(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let composed = try await env.call(.PUT, "\(Self.root)/currentuser/%C3%A9", headers: alice, body: #"{"v":1}"#)
            let decomposed = try await env.call(.PUT, "\(Self.root)/currentuser/e%CC%81", headers: alice, body: #"{"v":2}"#)
            #expect(composed.status == 200 && decomposed.status == 200, "\(composed.text) \(decomposed.text)")
            let one = try await env.call(.GET, "\(Self.root)/currentuser/%C3%A9/v", headers: alice)
            let two = try await env.call(.GET, "\(Self.root)/currentuser/e%CC%81/v", headers: alice)
            #expect(one.text == "1" && two.text == "2", "\(one.text) \(two.text)")
            let level = try await env.call(.GET, "\(Self.root)/currentuser", headers: alice)
            let bytes = Array(level.text.utf8)
            // Byte comparisons: Swift's String.contains would take either spelling for the other.
            #expect(bytes.firstRange(of: Array("\"\u{E9}\":{\"v\":1}".utf8)) != nil, "\(level.text)")
            #expect(bytes.firstRange(of: Array("\"e\u{301}\":{\"v\":2}".utf8)) != nil, "\(level.text)")
        }
    }

    /// SAP's runtime API also has POST (create), PATCH (merge) and `?overwrite=true` on a GET
    /// (the levels above merged in: the app's global settings, then the user's documents).
    @Test(arguments: StoreKind.allCases) func postCreatesPatchMergesOverwriteMergesTheLevelsAbove(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let post = try await env.call(
                .POST, "\(Self.root)/currentuser/Prefs", headers: alice, body: #"{"theme":"dark","font":{"size":12,"face":"serif"}}"#)
            #expect(post.status == 200, "\(post.status) \(post.text)")
            let again = try await env.call(.POST, "\(Self.root)/currentuser/Prefs", headers: alice, body: #"{"theme":"light"}"#)
            #expect(again.status == 409, "POST does not replace: \(again.status) \(again.text)")
            let deeper = try await env.call(.POST, "\(Self.root)/currentuser/Prefs/colors", headers: alice, body: #"{"accent":"red"}"#)
            #expect(deeper.status == 200, "a POST at a new key inside the document creates it: \(deeper.status) \(deeper.text)")
            // PATCH: members set, null removes, objects merge, the rest stays (RFC 7396).
            let patch = try await env.call(.PATCH, "\(Self.root)/currentuser/Prefs", headers: alice, body: #"{"theme":null,"font":{"size":14}}"#)
            #expect(patch.status == 200, "\(patch.status) \(patch.text)")
            let after = try await env.call(.GET, "\(Self.root)/currentuser/Prefs", headers: alice)
            let font = after.json["font"] as? [String: Any]
            #expect(
                after.json["theme"] == nil && font?["size"] as? Int == 14 && font?["face"] as? String == "serif"
                    && (after.json["colors"] as? [String: Any])?["accent"] as? String == "red", "\(after.text)")
            let badPatch = try await env.call(.PATCH, "\(Self.root)/currentuser/Prefs", headers: alice, body: "[1]")
            #expect(badPatch.status == 400, "\(badPatch.status) \(badPatch.text)")

            // overwrite=true on the device level: global settings, then the user's, then the device's.
            let device = try await Self.onboard(env, .alice, device: "phone-o")
            let own = try await env.call(.PUT, "\(Self.root)/device/\(device)/Prefs", headers: alice, body: #"{"font":{"size":20}}"#)
            #expect(own.status == 200, "\(own.text)")
            let plain = try await env.call(.GET, "\(Self.root)/device/\(device)/Prefs", headers: alice)
            #expect(
                plain.json["colors"] == nil && (plain.json["font"] as? [String: Any])?["size"] as? Int == 20, "only the device's own: \(plain.text)")
            let merged = try await env.call(.GET, "\(Self.root)/device/\(device)/Prefs?overwrite=true", headers: alice)
            let mergedFont = merged.json["font"] as? [String: Any]
            #expect(
                merged.status == 200 && mergedFont?["size"] as? Int == 20 && mergedFont?["face"] as? String == "serif"
                    && (merged.json["colors"] as? [String: Any])?["accent"] as? String == "red", "\(merged.status) \(merged.text)")
            let all = try await env.call(.GET, "\(Self.root)/device/\(device)?overwrite=true", headers: alice)
            #expect(
                all.status == 200 && all.json["mobileservices"] != nil && all.json["Prefs"] != nil, "the global settings are merged in: \(all.text)")
            let setting = try await env.call(
                .GET, "\(Self.root)/currentuser/mobileservices/settingsExchange/blockWipingPolicy?overwrite=true", headers: alice)
            #expect(setting.status == 200 && setting.json["blockWipeEnabled"] != nil, "\(setting.status) \(setting.text)")
            let withoutOverwrite = try await env.call(.GET, "\(Self.root)/currentuser/mobileservices", headers: alice)
            #expect(withoutOverwrite.status == 404, "\(withoutOverwrite.status) \(withoutOverwrite.text)")
            // Bob sees none of Alice's documents, overwrite or not.
            let bob = try await env.call(.GET, "\(Self.root)/currentuser?overwrite=true", headers: [("Authorization", TestUser.bob.basic)])
            #expect(bob.status == 200 && bob.json["Prefs"] == nil, "\(bob.text)")
        }
    }

    @Test(arguments: StoreKind.allCases) func aBlockedUserOrALockedRegistrationIsRefusedAsByTheProxy(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic)]
            let id = try await Self.onboard(env, .alice, device: "phone-l")
            let put = try await env.call(.PUT, "\(Self.root)/currentuser/Prefs", headers: alice, body: "{}")
            #expect(put.status == 200)
            let locked = try await env.admin(.POST, "/admin/v1/registrations/\(id)/lock")
            #expect(locked.status == 200, "\(locked.text)")
            for path in ["device/\(id)/Prefs", "currentuser/Prefs"] {
                let reply = try await env.call(.GET, "\(Self.root)/\(path)", headers: alice + [("X-SMP-APPCID", id)])
                #expect(reply.status == 403 && reply.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(path): \(reply.status) \(reply.text)")
            }
            let blocked = try await env.admin(.PUT, "/admin/v1/users/alice/block", body: #"{"type":"traffic","reason":"test"}"#)
            #expect(blocked.status == 200 || blocked.status == 204, "\(blocked.status) \(blocked.text)")
            let reply = try await env.call(.GET, "\(Self.root)/currentuser/Prefs", headers: alice)
            #expect(reply.status == 403 && reply.header("x-message-code") == "TRAFFIC_BLOCKED", "\(reply.status) \(reply.text)")
        }
    }

    /// A document name is stored text (docs/identity.md, "Stored text"): no control characters.
    @Test(arguments: StoreKind.allCases) func aDocumentNameWithAControlCharacterIsRefusedNamingIt(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic)]
            for method in [HTTPMethod.PUT, .GET, .DELETE] {
                let reply = try await env.call(method, "\(Self.root)/currentuser/a%00b", headers: alice, body: method == .PUT ? "{}" : nil)
                #expect(reply.status == 400 && reply.text.contains("name"), "\(method): \(reply.status) \(reply.text)")
            }
        }
    }

    /// Instances sharing a store share the documents, and the per-user limit counts what every
    /// instance wrote.
    @Test(arguments: StoreKind.allCases) func instancesOnOneStoreShareTheDocuments(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let first = try await test.open(), second = try await test.open()
            let user = UserIdentity(realm: "https://idp.example", id: "alice")
            let key = StorageKey(app: "demo", user: user, level: .user, name: "Prefs")
            let written: StorageWrite<String> = try await first.writeStorage(key, userLimit: 100, now: 1) { _ in .set(#"{"a":1}"#) }
            guard case .written = written else { Issue.record("\(written)"); return }
            #expect(try await second.storageDocument(key) == #"{"a":1}"#)
            // The same id in another realm is another user.
            #expect(
                try await second.storageDocument(StorageKey(app: "demo", user: UserIdentity(realm: "", id: "alice"), level: .user, name: "Prefs"))
                    == nil)
            let tooMuch: StorageWrite<String> = try await second.writeStorage(
                StorageKey(app: "demo", user: user, level: .user, name: "More"),
                userLimit: 100, now: 2
            ) { _ in .set(String(repeating: "x", count: 95)) }
            guard case .overUserLimit(100) = tooMuch else { Issue.record("\(tooMuch)"); return }
            // A document's size counts its name: "Prefs" and {"a":1}.
            #expect(try await first.storageEntries(of: user).map(\.size) == [5 + 7])
        }
    }

    @Test(arguments: StoreKind.allCases) func aUsersDocumentsTogetherStayWithinTheLimit(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic)]
            let document = "{\"x\":\"" + String(repeating: "a", count: 60 * 1024) + "\"}"
            var refused = false
            for index in 0..<20 {
                let reply = try await env.call(.PUT, "\(Self.root)/currentuser/doc\(index)", headers: alice, body: document)
                if reply.status == 413 { refused = true; break }
                #expect(reply.status == 200, "\(reply.status) \(reply.text)")
            }
            #expect(refused, "the 1 MiB per user is enforced")
        }
    }

    /// A path of thousands of segments stopped the process (the document was built key by key,
    /// recursively, before its size was checked). The path, its names and the document's
    /// nesting are bounded before anything is built, each refusal naming the limit.
    @Test func theKeyPathNamesAndNestingAreBoundedFirst() async throws {
        try await TestEnvironment.withMidtier(.sqlite) { env in
            let alice = [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")]
            let deep = try await env.curl(
                "\(Self.root)/currentuser/d" + String(repeating: "/a", count: 16_000), method: "PUT", headers: alice, body: "{}")
            #expect(deep.status == 400 && deep.body.contains("at most 32"), "\(deep.status) \(deep.body.prefix(300))")
            let most = try await env.call(.PUT, "\(Self.root)/currentuser/d" + String(repeating: "/a", count: 31), headers: alice, body: "{}")
            #expect(most.status == 200, "32 segments are fine: \(most.status) \(most.text)")
            let readBack = try await env.call(.GET, "\(Self.root)/currentuser/d" + String(repeating: "/a", count: 31), headers: alice)
            #expect(readBack.status == 200 && readBack.text == "{}", "\(readBack.status) \(readBack.text)")
            // 31 keys and a body nested 80 deep would be a document of 111 levels, which the
            // strict reader could not read back.
            let nested = String(repeating: #"{"n":"#, count: 79) + "{}" + String(repeating: "}", count: 79)
            let tooDeep = try await env.call(.PUT, "\(Self.root)/currentuser/e" + String(repeating: "/a", count: 31), headers: alice, body: nested)
            #expect(tooDeep.status == 400 && tooDeep.text.contains("100 levels"), "\(tooDeep.status) \(tooDeep.text)")
            let fits = try await env.call(.PUT, "\(Self.root)/currentuser/e" + String(repeating: "/a", count: 20), headers: alice, body: nested)
            #expect(fits.status == 200, "20 keys and 80 levels are 100: \(fits.status) \(fits.text)")
            let stored = try await env.call(.GET, "\(Self.root)/currentuser/e", headers: alice)
            #expect(stored.status == 200 && stored.text.utf8.count > nested.utf8.count, "the stored document reads back whole: \(stored.status)")
            // Names and keys: at most 256 bytes once decoded.
            let longName = try await env.curl(
                "\(Self.root)/currentuser/" + String(repeating: "n", count: 30_000), method: "PUT", headers: alice, body: "{}")
            #expect(longName.status == 400 && longName.body.contains("256 bytes"), "\(longName.status) \(longName.body.prefix(200))")
            let longKey = try await env.call(
                .PUT, "\(Self.root)/currentuser/k/" + String(repeating: "%C3%A9", count: 129), headers: alice, body: "{}")
            #expect(longKey.status == 400, "258 bytes decoded: \(longKey.status)")
            let fullName = try await env.call(
                .PUT, "\(Self.root)/currentuser/" + String(repeating: "n", count: 256), headers: alice, body: #"{"a":1}"#)
            #expect(fullName.status == 200, "\(fullName.status) \(fullName.text)")
            // The quota counts the name: what admins see is name and text.
            let listed = try await env.admin(.GET, "/admin/v1/users/alice")
            let storage = listed.json["storage"] as? [[String: Any]] ?? []
            #expect(
                storage.contains { $0["name"] as? String == String(repeating: "n", count: 256) && $0["size"] as? Int == 256 + 7 },
                "\(listed.text.prefix(600))")
            #expect(try await env.call(.GET, "/healthz").status == 200)
        }
    }

    /// Names count in the per-user quota: many documents of long names and tiny bodies reach
    /// it (before, only the texts counted: 300 names of 70 000 bytes were free).
    @Test func namesCountInTheUsersQuota() async throws {
        try await withTestStore(.sqlite) { test in
            let store = try await test.open()
            let user = UserIdentity(realm: "", id: "alice")
            let name = String(repeating: "n", count: 90)
            let first: StorageWrite<String> = try await store.writeStorage(
                StorageKey(app: "demo", user: user, level: .user, name: name + "1"),
                userLimit: 200, now: 1
            ) { _ in .set("{}") }
            guard case .written = first else { Issue.record("\(first)"); return }
            // 93 bytes kept; another 93 fit, a third does not.
            let second: StorageWrite<String> = try await store.writeStorage(
                StorageKey(app: "demo", user: user, level: .user, name: name + "2"),
                userLimit: 200, now: 2
            ) { _ in .set("{}") }
            guard case .written = second else { Issue.record("\(second)"); return }
            let third: StorageWrite<String> = try await store.writeStorage(
                StorageKey(app: "demo", user: user, level: .user, name: name + "3"),
                userLimit: 200, now: 3
            ) { _ in .set("{}") }
            guard case .overUserLimit(200) = third else { Issue.record("names are not counted: \(third)"); return }
        }
    }

    @Test(arguments: StoreKind.allCases) func deviceStorageGoesWithAWipeOrADelete(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let alice = [("Authorization", TestUser.alice.basic)]
            for ending in ["wipe", "delete"] {
                let id = try await Self.onboard(env, .alice, device: "phone-\(ending)")
                let put = try await env.call(.PUT, "\(Self.root)/device/\(id)/Prefs", headers: alice, body: #"{"theme":"dark"}"#)
                #expect(put.status == 200, "\(put.text)")
                let read = try await env.call(.GET, "\(Self.root)/device/\(id)/Prefs/theme", headers: alice)
                #expect(read.status == 200 && read.text == #""dark""#, "\(read.text)")
                // Another registration of the same user cannot name it in X-SMP-APPCID.
                let mismatch = try await env.call(.GET, "\(Self.root)/device/\(id)/Prefs", headers: alice + [("X-SMP-APPCID", "other")])
                #expect(mismatch.status == 403)
                // SAPcpmsSettings names the device by the SDK's device id (X-SMP-DEVICEID), which
                // is the registration's DeviceId: the same document.
                let byDeviceId = try await env.call(.GET, "\(Self.mdkRoot)/device/phone-\(ending)/Prefs", headers: alice)
                #expect(byDeviceId.status == 200 && byDeviceId.json["theme"] as? String == "dark", "\(byDeviceId.text)")
                let listed = try await env.admin(.GET, "/admin/v1/users/alice")
                let storage = listed.json["storage"] as? [[String: Any]] ?? []
                #expect(
                    storage.contains {
                        $0["registration"] as? String == id && $0["name"] as? String == "Prefs"
                            && $0["size"] as? Int == "Prefs".utf8.count + #"{"theme":"dark"}"#.utf8.count && $0["appId"] as? String == "demo"
                    },
                    "admins see the device's documents and sizes: \(listed.text)")
                #expect(!listed.text.contains("dark"), "never their values")
                #expect(
                    try await env.server.registrations.store.storageEntries(of: UserIdentity(realm: "", id: "alice")).contains {
                        $0.key.level == .registration(id)
                    })
                if ending == "wipe" {
                    let wiped = try await env.admin(.POST, "/admin/v1/registrations/\(id)/wipe")
                    #expect(wiped.status == 200, "\(wiped.text)")
                    let refused = try await env.call(.GET, "\(Self.root)/device/\(id)/Prefs", headers: alice)
                    #expect(refused.status == 403 && refused.header("x-message-code") == "TRAFFIC_REG_WIPED", "\(refused.text)")
                } else {
                    let deleted = try await env.call(.DELETE, "\(DeviceCalls.connections)('\(id)')", headers: alice)
                    #expect(deleted.status == 204, "\(deleted.text)")
                }
                let entries = try await env.server.registrations.store.storageEntries(of: UserIdentity(realm: "", id: "alice"))
                #expect(!entries.contains { $0.key.level == .registration(id) }, "\(ending): \(entries)")
            }
        }
    }
}
