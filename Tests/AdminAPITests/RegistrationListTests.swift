import Foundation
import MidtierCore
import MidtierServer
import MidtierStore
import MidtierTestSupport
import NIOHTTP1
import Registrations
import Testing

/// `GET /admin/v1/registrations` a page at a time (docs/admin.md, "Listing registrations"), on
/// the real admin listener, on SQLite and PostgreSQL: `limit` (default 100, at most 1000) and
/// `after` (the previous page's `next`), `next` only while more may follow, the filters kept
/// from page to page; a bad `limit` or `after` is a `400` naming it. And the push notifications
/// listing's `after` and `next` the same way.
@Suite(.timeLimit(.minutes(10))) struct RegistrationListTests {
    static func ids(_ reply: TestEnvironment.Reply, _ items: String = "registrations") -> [String] {
        (reply.json[items] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    static func insert(_ env: TestEnvironment, _ count: Int, app: String = "demo", user: UserIdentity = .local("alice")) async throws -> [String] {
        var ids: [String] = []
        for index in 0..<count {
            let id = "\(app)-\(user.id)-\(String(format: "%04d", index))"
            let registration = Registration(id: id, appId: app, user: user, deviceType: "iOS", createdAt: Int64(index))
            #expect(try await env.server.registrations.store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
            ids.append(id)
        }
        return ids
    }

    /// Walks the listing at `path` (with its filters) `limit` at a time: the pages' sizes and ids.
    static func walk(_ env: TestEnvironment, _ path: String, limit: Int?) async throws -> (sizes: [Int], ids: [String]) {
        var sizes: [Int] = []
        var ids: [String] = []
        var after: String?
        for _ in 0..<100 {
            var query = path.contains("?") ? "&" : "?"
            if let limit { query += "limit=\(limit)&" }
            if let after { query += "after=\(after.percentEncoded())" }
            let reply = try await env.admin(.GET, path + query)
            #expect(reply.status == 200, "\(path + query): \(reply.status) \(reply.text)")
            sizes.append(Self.ids(reply).count)
            ids += Self.ids(reply)
            guard let next = reply.json["next"] as? String else { return (sizes, ids) }
            after = next
        }
        Issue.record("\(path): no last page after 100 pages")
        return (sizes, ids)
    }

    @Test(arguments: StoreKind.allCases) func theListComesAPageAtATimeInTheOrderOfIds(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            let demo = try await Self.insert(env, 250)
            let other = try await Self.insert(env, 30, app: "other", user: .local("bob"))
            _ = try await env.server.registrations.store.transition(
                id: demo[7], to: .locked, allowedFrom: [.active],
                audit: AuditEntry(at: 1, actor: "admin#1", action: "registration.lock", target: demo[7]))

            let pages = try await Self.walk(env, "/admin/v1/registrations?app=demo", limit: 100)
            #expect(pages.sizes == [100, 100, 50])
            #expect(pages.ids == demo)
            // The default page is 100; without a filter, every registration once.
            let everything = try await Self.walk(env, "/admin/v1/registrations", limit: nil)
            #expect(everything.sizes == [100, 100, 80])
            #expect(everything.ids == demo + other)
            // Filters are kept from page to page, and a page that ends the list has no next.
            let bob = try await Self.walk(env, "/admin/v1/registrations?user=bob&state=active", limit: 7)
            #expect(bob.ids == other)
            #expect(bob.sizes == [7, 7, 7, 7, 2])
            let locked = try await env.admin(.GET, "/admin/v1/registrations?state=locked&limit=1")
            #expect(Self.ids(locked) == [demo[7]])
            #expect(locked.json["next"] == nil, "exactly one locked: the one page is the last")
            let exact = try await env.admin(.GET, "/admin/v1/registrations?user=bob&limit=30")
            #expect(Self.ids(exact) == other && exact.json["next"] == nil, "a page of exactly what is left has no next")
            let biggest = try await env.admin(.GET, "/admin/v1/registrations?limit=1000")
            #expect(Self.ids(biggest).count == 280)
            // A cursor is a place: after the last demo registration, the others; empty is the first page.
            let place = try await env.admin(.GET, "/admin/v1/registrations?limit=2&after=r1.\(demo[249])")
            #expect(Self.ids(place) == Array(other.prefix(2)))
            let empty = try await env.admin(.GET, "/admin/v1/registrations?limit=2&after=")
            #expect(Self.ids(empty) == Array(demo.prefix(2)))
        }
    }

    @Test(arguments: StoreKind.allCases) func aBadLimitOrCursorIsRefusedNamingIt(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            _ = try await Self.insert(env, 3)
            let limit = "limit must be a whole number from 1 to 1000"
            let cursor = "after is malformed: pass the previous page's next value unchanged"
            let refused: [(String, String)] = [
                ("limit=0", limit), ("limit=1001", limit), ("limit=-1", limit), ("limit=abc", limit), ("limit=", limit),
                ("limit=%2B5", limit), ("limit=1.5", limit), ("limit=99999999999999999999", limit), ("limit=%201", limit),
                ("limit=1&limit=2", "limit is given more than once"),
                ("after=garbage", cursor), ("after=r1.", cursor), ("after=r2.demo-alice-0001", cursor), ("after=r1.a%00b", cursor),
                ("after=r1.a%20b", cursor), ("after=r1.\(String(repeating: "x", count: 129))", cursor), ("after=%C3%A9", cursor),
                ("after=r1.a&after=r1.b", "after is given more than once"),
                // A filter given twice is not "either" (found by the outside attack: the first
                // one counted, silently).
                ("user=alice&user=bob", "user is given more than once"), ("app=demo&app=x", "app is given more than once"),
                ("state=locked&state=active", "state is given more than once"),
                ("realm=a&realm=b&user=alice", "realm is given more than once"),
            ]
            for (query, message) in refused {
                let reply = try await env.admin(.GET, "/admin/v1/registrations?\(query)")
                #expect(reply.status == 400, "\(query): \(reply.status) \(reply.text)")
                #expect(reply.errorMessage == message, "\(query): \(reply.text)")
            }
            let fine = try await env.admin(.GET, "/admin/v1/registrations?limit=1000&after=r1.\(String(repeating: "x", count: 128))")
            #expect(fine.status == 200, "\(fine.text)")
        }
    }

    @Test(arguments: StoreKind.allCases) func pushNotificationsComeAPageAtATime(_ kind: StoreKind) async throws {
        try await PushAdminTests.withMidtier(kind) { env, store in
            var expected: [String] = []
            for index in 0..<12 {
                let id = "n-\(String(format: "%02d", index))"
                try await store.enqueue(
                    PushNotificationRecord(id: id, app: "demo", sender: "erp", payload: #"{"alert":"a"}"#, createdAt: 1_000 + Int64(index / 2)),
                    registrations: ["r"])
                expected.insert(id, at: 0)
            }
            var seen: [String] = []
            var sizes: [Int] = []
            var after = ""
            while true {
                let reply = try await env.admin(.GET, "/admin/v1/push/notifications?app=demo&limit=5&after=\(after)")
                #expect(reply.status == 200, "\(reply.text)")
                seen += Self.ids(reply, "notifications")
                sizes.append(Self.ids(reply, "notifications").count)
                guard let next = reply.json["next"] as? String else { break }
                after = next.percentEncoded()
            }
            #expect(sizes == [5, 5, 2])
            #expect(seen == expected)
            for bad in ["x", "1000", "1000.", ".n-1", "1.5.%00", "%2B1.n", "1234567890123456789.n"] {
                let reply = try await env.admin(.GET, "/admin/v1/push/notifications?after=\(bad)")
                #expect(reply.status == 400, "after=\(bad): \(reply.status)")
                #expect(reply.errorMessage == "after is malformed: pass the previous page's next value unchanged", "after=\(bad): \(reply.text)")
            }
        }
    }
}
