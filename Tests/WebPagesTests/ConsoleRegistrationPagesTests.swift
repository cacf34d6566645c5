import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierServer
import MidtierStore
import MidtierTestSupport
import NIOHTTP1
import Registrations
import Testing

/// The console's Registrations page a page at a time (docs/console.md, "Registrations"): 100
/// registrations in the order of their ids' bytes, a "Next page" link that carries the cursor
/// and the filters, a "First page" link back; a malformed cursor is a `400`.
@Suite(.timeLimit(.minutes(10))) struct ConsoleRegistrationPagesTests {
    /// The registration ids of a page's table, in order.
    static func rows(_ page: TestEnvironment.Reply) -> [String] {
        page.text.components(separatedBy: #"<tr id="registration-"#).dropFirst().map { String($0.prefix { $0 != "\"" }) }
    }

    /// The `href` of the link `id`, its `&amp;` read as `&`.
    static func link(_ page: TestEnvironment.Reply, _ id: String) -> String? {
        let text = page.text
        guard let end = text.range(of: #"" id="\#(id)""#),
            let start = text.range(of: #"href=""#, options: .backwards, range: text.startIndex..<end.lowerBound)
        else { return nil }
        return String(text[start.upperBound..<end.lowerBound]).replacingOccurrences(of: "&amp;", with: "&")
    }

    @Test(arguments: StoreKind.allCases) func theRegistrationsPageGoesOnWithItsFilters(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            var demo: [String] = []
            for index in 0..<230 {
                let id = String(format: "reg-%04d", index)
                let app = index % 10 == 9 ? "other" : "demo"
                let registration = Registration(id: id, appId: app, user: .local("alice"), deviceType: "iOS", createdAt: Int64(index))
                #expect(try await env.server.registrations.store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
                if app == "demo" { demo.append(id) }
            }
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
            do {
                let console = try await ConsoleSession.signIn(env, client)
                var seen: [String] = []
                var sizes: [Int] = []
                var path = "/console/registrations?user=alice&app=demo"
                for _ in 0..<10 {
                    let page = try await console.call(client, .GET, path)
                    #expect(page.status == 200, "\(path): \(page.status)")
                    seen += Self.rows(page)
                    sizes.append(Self.rows(page).count)
                    if sizes.count > 1 {
                        #expect(Self.link(page, "first-page") == "/console/registrations?user=alice&app=demo", "\(page.text)")
                    } else {
                        #expect(Self.link(page, "first-page") == nil)
                    }
                    guard let next = Self.link(page, "next-page") else { break }
                    #expect(next.hasPrefix("/console/registrations?user=alice&app=demo&after=r1."), "\(next)")
                    path = next
                }
                #expect(sizes == [100, 100, 7])
                #expect(seen == demo)
                let bad = try await console.call(client, .GET, "/console/registrations?after=nonsense")
                #expect(bad.status == 400, "\(bad.status)")
                #expect(bad.text.contains("after is malformed"), "\(bad.text.prefix(500))")
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
        }
    }
}
