import Foundation
import MidtierCore
import MidtierTestSupport
import NIOHTTP1
import Testing

/// The registration service's `Endpoints` collection (docs/device-api.md, "Destinations"), as
/// SAP's `SAPcpmsDestinations` loads an app's destinations: only the app's own, each with
/// Midtier's URL for it and never the back end's, in JSON and Atom, read-only.
@Suite(.timeLimit(.minutes(10))) struct EndpointsCollectionTests {
    static let dotted = "com.sap.edm.sampleservice.v2"

    static func withMidtier(_ body: (TestEnvironment) async throws -> Void) async throws {
        try await TestEnvironment.withMidtier(
            .sqlite,
            adjust: { configuration in
                // A dotted destination the app may use, and one it may not.
                configuration.destinations[Self.dotted] = configuration.destinations["echo"]
                configuration.destinations["payroll-admin"] = configuration.destinations["echo"]
                configuration.apps["demo"]?.destinations.append(Self.dotted)
            }, body)
    }

    static let alice = [("Authorization", TestUser.alice.basic)]
    static let json = [("Accept", "application/json")]

    @Test func listsTheAppsDestinationsWithMidtiersURLs() async throws {
        try await Self.withMidtier { env in
            let reply = try await env.call(.GET, "/odata/applications/v1/demo/Endpoints", headers: Self.alice + Self.json)
            #expect(reply.status == 200, "\(reply.text)")
            let results = try #require((reply.json["d"] as? [String: Any])?["results"] as? [[String: Any]], "\(reply.text)")
            #expect(results.map { $0["EndpointName"] as? String } == [Self.dotted, "echo", "sf"], "sorted, only the app's own: \(reply.text)")
            for endpoint in results {
                let name = endpoint["EndpointName"] as? String ?? ""
                #expect(endpoint["RemoteURL"] as? String == "http://midtier.test:8080/\(name)", "\(endpoint)")
                #expect(endpoint["AnonymousAccess"] as? Bool == false)
            }
            #expect(!reply.text.contains("payroll-admin"), "a destination of no concern to the app is not listed")
            #expect(!reply.text.contains("127.0.0.1"), "no back-end address reaches a device: \(reply.text)")
        }
    }

    @Test func oneEndpointByItsExactName() async throws {
        try await Self.withMidtier { env in
            let one = try await env.call(.GET, "/odata/applications/latest/demo/Endpoints('\(Self.dotted)')", headers: Self.alice + Self.json)
            #expect(one.status == 200, "\(one.text)")
            let entity = try #require(one.json["d"] as? [String: Any])
            #expect(entity["EndpointName"] as? String == Self.dotted && entity["RemoteURL"] as? String == "http://midtier.test:8080/\(Self.dotted)")
            for missing in ["SF", "payroll-admin", "nope"] {
                let reply = try await env.call(.GET, "/odata/applications/v1/demo/Endpoints('\(missing)')", headers: Self.alice)
                #expect(reply.status == 404, "\(missing): \(reply.status) \(reply.text)")
            }
        }
    }

    @Test func atomWhenAskedAndInTheServiceDocumentAndMetadata() async throws {
        try await Self.withMidtier { env in
            let feed = try await env.call(.GET, "/odata/applications/v1/demo/Endpoints", headers: Self.alice + [("Accept", "application/atom+xml")])
            #expect(feed.status == 200 && feed.header("content-type")?.hasPrefix("application/atom+xml") == true, "\(feed.text)")
            #expect(
                feed.text.contains("<title type=\"text\">Endpoints</title>") && feed.text.contains("<d:EndpointName>sf</d:EndpointName>")
                    && feed.text.contains("term=\"applications.Endpoint\"")
                    && feed.text.contains("<d:AnonymousAccess m:type=\"Edm.Boolean\">false</d:AnonymousAccess>"),
                "\(feed.text)")
            let service = try await env.call(.GET, "/odata/applications/v1/demo", headers: Self.alice)
            #expect(service.text.contains("<collection href=\"Endpoints\">"), "\(service.text)")
            let json = try await env.call(.GET, "/odata/applications/v1/demo?$format=json", headers: Self.alice)
            #expect((json.json["d"] as? [String: Any])?["EntitySets"] as? [String] == ["Connections", "Endpoints"], "\(json.text)")
            let metadata = try await env.call(.GET, "/odata/applications/v1/demo/$metadata", headers: Self.alice)
            #expect(
                metadata.text.contains("<EntityType Name=\"Endpoint\"><Key><PropertyRef Name=\"EndpointName\"/></Key>")
                    && metadata.text.contains("<EntitySet Name=\"Endpoints\" EntityType=\"applications.Endpoint\"/>"), "\(metadata.text)")
        }
    }

    @Test func signedInOnlyAndReadOnly() async throws {
        try await Self.withMidtier { env in
            let anonymous = try await env.call(.GET, "/odata/applications/v1/demo/Endpoints")
            #expect(anonymous.status == 401, "\(anonymous.status) \(anonymous.text)")
            let post = try await env.call(.POST, "/odata/applications/v1/demo/Endpoints", headers: Self.alice, body: #"{"EndpointName":"x"}"#)
            #expect(post.status == 405 && post.header("allow") == "GET", "\(post.status) \(post.text)")
            let delete = try await env.call(.DELETE, "/odata/applications/v1/demo/Endpoints('sf')", headers: Self.alice)
            #expect(delete.status == 405, "\(delete.status) \(delete.text)")
            let elsewhere = try await env.call(.GET, "/odata/applications/v1/other/Endpoints", headers: Self.alice)
            #expect(elsewhere.status == 404, "\(elsewhere.status) \(elsewhere.text)")
        }
    }
}
