import Foundation
import MidtierCore
import MidtierTestSupport
import NIOHTTP1
import Testing

/// `GET …/Connections` and one Connection in both forms (docs/device-api.md, "Onboarding"): the
/// caller's own registrations only, each property typed by what it is, never by what its text
/// looks like.
@Suite(.timeLimit(.minutes(10))) struct ConnectionsCollectionTests {
    @Test func theCollectionListsTheCallersOwnInJSONAndAtom() async throws {
        try await TestEnvironment.withMidtier(.sqlite) { env in
            var mine: [String] = []
            for device in ["phone-1", "phone-2"] {
                let made = try await DeviceCalls.onboard(env, .alice, body: #"{"DeviceId":"\#(device)","CustomCustom1":"/Date(1)/"}"#)
                mine.append(try #require(made.header("X-SMP-APPCID"), "\(made.status) \(made.text)"))
            }
            let bobs = try await DeviceCalls.onboard(env, .bob, body: #"{"DeviceId":"phone-b"}"#)
            #expect(bobs.status == 201, "\(bobs.text)")

            let alice = [("Authorization", TestUser.alice.basic)]
            let listed = try await env.call(.GET, DeviceCalls.connections, headers: alice + [("Accept", "application/json")])
            let results = try #require((listed.json["d"] as? [String: Any])?["results"] as? [[String: Any]], "\(listed.status) \(listed.text)")
            #expect(results.compactMap { $0["ApplicationConnectionId"] as? String }.sorted() == mine.sorted(), "\(listed.text)")
            let first = try #require(results.first)
            #expect((first["__metadata"] as? [String: Any])?["type"] as? String == "applications.Connection")
            #expect(first["IsWiped"] as? Bool == false && first["BlockDisconnectedPeriod"] is Int, "\(first)")
            #expect((first["CreatedAt"] as? String)?.hasPrefix("/Date(") == true && first["CustomCustom1"] as? String == "/Date(1)/", "\(first)")

            // In Atom, CreatedAt is a DateTime; a device's text that looks like one stays a string.
            let feed = try await env.call(.GET, DeviceCalls.connections + "?$format=atom", headers: alice)
            #expect(feed.text.contains("<d:CreatedAt m:type=\"Edm.DateTime\">"), "\(feed.text)")
            #expect(feed.text.contains("<d:CustomCustom1>/Date(1)/</d:CustomCustom1>"), "\(feed.text)")
            #expect(!feed.text.contains("phone-b"), "bob's registration is not alice's")
        }
    }

    /// A read that does not say which format it wants gets OData v2's own, Atom, as from SAP's
    /// registration service (a bare `curl`); `Accept: */*` says nothing either. JSON is asked for.
    @Test func aReadThatDoesNotSayGetsAtom() async throws {
        try await TestEnvironment.with { env in
            let made = try await DeviceCalls.onboard(env, .alice, body: #"{"DeviceId":"phone-1"}"#)
            let id = try #require(made.header("X-SMP-APPCID"), "\(made.status) \(made.text)")
            let alice = [("Authorization", TestUser.alice.basic)]
            for (path, root) in [
                ("\(DeviceCalls.connections)('\(id)')", "<entry"), (DeviceCalls.connections, "<feed"),
                ("/odata/applications/v1/demo/Endpoints", "<feed"),
            ] {
                for headers in [alice, alice + [("Accept", "*/*")]] {
                    let reply = try await env.call(.GET, path, headers: headers)
                    #expect(
                        reply.status == 200 && reply.header("Content-Type")?.hasPrefix("application/atom+xml") == true, "\(path): \(reply.status)")
                    #expect(reply.text.contains(root), "\(path): \(reply.text)")
                }
                let json = try await env.call(.GET, path, headers: alice + [("Accept", "application/json")])
                #expect(json.json["d"] != nil, "\(path): \(json.text)")
            }
        }
    }
}
