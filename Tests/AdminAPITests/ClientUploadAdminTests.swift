import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierServer
import MidtierStore
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import Registrations
import Testing

/// Admins list and search the client logs and usage reports devices uploaded, through the
/// admin API (`/admin/v1/client-logs`, `/admin/v1/client-usage`) and the console's "Client
/// logs" and "Usage reports" pages (docs/admin.md, docs/console.md), on the real admin
/// listener, on SQLite and PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct ClientUploadAdminTests {
    static let alice = UserIdentity.local("alice")
    /// The same id in an identity provider's realm: another user.
    static let idpAlice = UserIdentity(realm: "https://idp.test/realms/corp", id: "alice")
    /// "José" composed and decomposed: canonically equal, other bytes, other users.
    static let composed = UserIdentity.local("Jos\u{E9}")
    static let decomposed = UserIdentity.local("Jose\u{301}")
    static let roomy = ClientUploadBounds(bytesPerRegistration: 1 << 30, uploadsPerWindow: 1_000, window: 60_000)

    static func register(_ env: TestEnvironment, _ id: String, _ user: UserIdentity, app: String = "demo") async throws {
        let registration = Registration(id: id, appId: app, user: user, deviceType: "iOS", deviceId: "dev-\(id)", createdAt: 1_000)
        #expect(try await env.server.registrations.store.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
    }

    static func save(_ env: TestEnvironment, _ upload: ClientUpload, _ entries: [ClientLogEntry] = []) async throws {
        let saved = try await env.server.registrations.store.saveClientUpload(upload, entries: entries, bounds: roomy, now: upload.receivedAt)
        #expect(saved == .saved(dropped: 0), "\(upload.id)")
    }

    static func log(_ id: String, _ registration: String, _ user: UserIdentity, app: String = "demo", at: Int64 = 10_000) -> ClientUpload {
        ClientUpload(
            id: id, kind: .log, app: app, user: user, registration: registration, deviceId: "dev-\(registration)",
            receivedAt: at, size: 100, report: "")
    }

    static func entry(_ upload: String, _ sequence: Int, _ time: Int64, _ severity: ClientLogSeverity, _ message: String) -> ClientLogEntry {
        ClientLogEntry(
            upload: upload, sequence: sequence, time: time, severity: severity, correlationId: "c-\(sequence)",
            source: "App", location: "Main.swift:\(sequence)", message: message)
    }

    /// Four users' registrations and uploads: the messages, newest first, are
    /// idp, nfd, nfc, slow, crash, hello, boot.
    static func seed(_ env: TestEnvironment) async throws {
        try await register(env, "reg-alice", alice)
        try await register(env, "reg-idp", idpAlice, app: "corp")
        try await register(env, "reg-nfc", composed)
        try await register(env, "reg-nfd", decomposed)
        try await save(
            env, log("up-alice", "reg-alice", alice),
            [
                entry("up-alice", 0, 1_000, .debug, "boot"),
                entry("up-alice", 1, 2_000, .info, "hello <script>alert(1)</script>"),
                entry("up-alice", 2, 3_000, .error, "crash in payroll"),
                entry("up-alice", 3, 3_000, .warn, "slow"),
            ])
        try await save(env, log("up-nfc", "reg-nfc", composed, at: 11_000), [entry("up-nfc", 0, 4_000, .fatal, "nfc")])
        try await save(env, log("up-nfd", "reg-nfd", decomposed, at: 12_000), [entry("up-nfd", 0, 5_000, .info, "nfd")])
        try await save(env, log("up-idp", "reg-idp", idpAlice, app: "corp", at: 13_000), [entry("up-idp", 0, 6_000, .info, "idp")])
        try await save(
            env,
            ClientUpload(
                id: "use-alice", kind: .usage, app: "demo", user: alice, registration: "reg-alice",
                deviceId: "dev-reg-alice", receivedAt: 20_000, size: 31, report: #"{"a":1,"b":[true,null,"x"]}"#))
        let long = #"{"events":[\#((0..<40).map { #"{"n":\#($0),"tag":"<b>"}"# }.joined(separator: ","))]}"#
        try await save(
            env,
            ClientUpload(
                id: "use-nfc", kind: .usage, app: "demo", user: composed, registration: "reg-nfc",
                deviceId: "", receivedAt: 21_000, size: long.utf8.count, report: long))
    }

    static func messages(_ reply: TestEnvironment.Reply) -> [String] {
        (reply.json["entries"] as? [[String: Any]] ?? []).compactMap { $0["message"] as? String }
    }

    @Test(arguments: StoreKind.allCases) func theAdminAPIListsAndFiltersClientLogs(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            try await Self.seed(env)
            let all = try await env.admin(.GET, "/admin/v1/client-logs")
            #expect(all.status == 200, "\(all.text)")
            #expect(Self.messages(all) == ["idp", "nfd", "nfc", "slow", "crash in payroll", "hello <script>alert(1)</script>", "boot"])
            #expect(all.json["next"] is NSNull, "\(all.text)")
            let first = try #require((all.json["entries"] as? [[String: Any]])?.first)
            #expect(first["time"] as? String == "1970-01-01T00:00:06Z")
            #expect(first["severity"] as? String == "INFO")
            #expect(first["correlationId"] as? String == "c-0")
            #expect(first["source"] as? String == "App" && first["location"] as? String == "Main.swift:0")
            let upload = try #require(first["upload"] as? [String: Any])
            #expect(upload["id"] as? String == "up-idp" && upload["registration"] as? String == "reg-idp" && upload["app"] as? String == "corp")
            #expect(upload["userId"] as? String == "alice" && upload["realm"] as? String == Self.idpAlice.realm)
            #expect(upload["deviceId"] as? String == "dev-reg-idp" && upload["receivedAt"] as? String == "1970-01-01T00:00:13Z")

            let filtered: [(String, [String])] = [
                ("registration=reg-alice", ["slow", "crash in payroll", "hello <script>alert(1)</script>", "boot"]),
                // Users by realm and exact bytes.
                ("userId=alice", ["slow", "crash in payroll", "hello <script>alert(1)</script>", "boot"]),
                ("userId=alice&realm=https%3A%2F%2Fidp.test%2Frealms%2Fcorp", ["idp"]),
                ("userId=Jos%C3%A9", ["nfc"]),
                ("userId=Jose%CC%81", ["nfd"]),
                ("userId=JOS%C3%A9", []),
                ("app=corp", ["idp"]),
                ("level=WARN", ["nfc", "slow", "crash in payroll"]),
                ("level=DEBUG", ["idp", "nfd", "nfc", "slow", "crash in payroll", "hello <script>alert(1)</script>", "boot"]),
                ("from=1970-01-01T00:00:02Z&until=1970-01-01T00:00:04Z", ["slow", "crash in payroll", "hello <script>alert(1)</script>"]),
                ("from=1970-01-01T01:00:05%2B01:00", ["idp", "nfd"]),
                ("text=payroll", ["crash in payroll"]),
                ("text=%3Cscript%3E", ["hello <script>alert(1)</script>"]),
                ("text=PAYROLL", []),
                ("registration=reg-alice&level=ERROR&text=crash", ["crash in payroll"]),
                // Empty filters are no filters; a realm without a user is ignored.
                (
                    "registration=&userId=&app=&level=&text=&from=&until=&cursor=",
                    [
                        "idp", "nfd", "nfc", "slow", "crash in payroll",
                        "hello <script>alert(1)</script>", "boot",
                    ]
                ),
            ]
            for (query, expected) in filtered {
                let reply = try await env.admin(.GET, "/admin/v1/client-logs?\(query)")
                #expect(reply.status == 200, "\(query): \(reply.status) \(reply.text)")
                #expect(Self.messages(reply) == expected, "\(query)")
            }

            // Paging: three at a time, following next, gives the whole list once.
            var seen: [String] = []
            var next: String? = nil
            var pages = 0
            repeat {
                let cursor = next.map { "&cursor=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0)" } ?? ""
                let page = try await env.admin(.GET, "/admin/v1/client-logs?limit=3\(cursor)")
                #expect(page.status == 200, "\(page.text)")
                seen += Self.messages(page)
                next = page.json["next"] as? String
                pages += 1
            } while next != nil && pages < 10
            #expect(pages == 3)
            #expect(seen == Self.messages(all))
            // A filter applies on every page.
            let alicePage = try await env.admin(.GET, "/admin/v1/client-logs?userId=alice&limit=2")
            #expect(Self.messages(alicePage) == ["slow", "crash in payroll"])
            let aliceNext = try #require(alicePage.json["next"] as? String)
            let aliceRest = try await env.admin(.GET, "/admin/v1/client-logs?userId=alice&limit=2&cursor=\(aliceNext)")
            #expect(Self.messages(aliceRest) == ["hello <script>alert(1)</script>", "boot"], "\(aliceRest.text)")
            #expect(aliceRest.json["next"] is NSNull)

            // Bad parameters: 400 naming them.
            let refused: [(String, String)] = [
                ("level=LOUD", "level must be one of DEBUG, INFO, WARN, ERROR, FATAL"),
                ("level=warn", "level must be one of DEBUG, INFO, WARN, ERROR, FATAL"),
                ("from=yesterday", "from must be an RFC 3339 date-time (2025-03-01T08:15:00Z)"),
                ("until=2025-02-30T00:00:00Z", "until must be an RFC 3339 date-time (2025-03-01T08:15:00Z)"),
                ("limit=0", "limit must be a whole number from 1 to 500"),
                ("limit=501", "limit must be a whole number from 1 to 500"),
                ("limit=abc", "limit must be a whole number from 1 to 500"),
                ("limit=", "limit must be a whole number from 1 to 500"),
                ("limit=%2B5", "limit must be a whole number from 1 to 500"),
                ("limit=05", "limit must be a whole number from 1 to 500"),
                ("cursor=garbage", "cursor is malformed: pass the previous page's next value unchanged"),
                ("cursor=1.2", "cursor is malformed: pass the previous page's next value unchanged"),
                ("cursor=1.2.up%00x", "cursor is malformed: pass the previous page's next value unchanged"),
                ("cursor=99999999999999999999.0.up", "cursor is malformed: pass the previous page's next value unchanged"),
                ("registration=reg%00alice", "registration contains control characters"),
                ("userId=ali%0Ace", "userId contains control characters"),
                ("userId=alice&realm=x%00y", "realm contains control characters"),
                ("app=de%7Fmo", "app contains control characters"),
                ("text=a%C2%85b", "text contains control characters"),
                ("text=\(String(repeating: "x", count: 1001))", "text is longer than 1000 characters"),
                ("level=INFO&level=WARN", "level is given more than once"),
            ]
            for (query, message) in refused {
                let reply = try await env.admin(.GET, "/admin/v1/client-logs?\(query)")
                #expect(reply.status == 400, "\(query): \(reply.status) \(reply.text)")
                #expect(reply.errorMessage == message, "\(query): \(reply.text)")
            }
            // No token, no logs.
            let anonymous = try await env.admin(.GET, "/admin/v1/client-logs", token: nil)
            #expect(anonymous.status == 401 && !anonymous.text.contains("payroll"))
            let wrong = try await env.admin(.GET, "/admin/v1/client-logs", token: "not-the-admin-token")
            #expect(wrong.status == 401 && !wrong.text.contains("payroll"))
        }
    }

    @Test(arguments: StoreKind.allCases) func theAdminAPIListsUsageReports(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            try await Self.seed(env)
            let all = try await env.admin(.GET, "/admin/v1/client-usage")
            #expect(all.status == 200, "\(all.text)")
            let reports = try #require(all.json["reports"] as? [[String: Any]])
            #expect(reports.compactMap { $0["id"] as? String } == ["use-nfc", "use-alice"])
            #expect(all.json["next"] is NSNull)
            let alice = reports[1]
            #expect(alice["registration"] as? String == "reg-alice" && alice["userId"] as? String == "alice" && alice["realm"] as? String == "")
            #expect(alice["app"] as? String == "demo" && alice["deviceId"] as? String == "dev-reg-alice" && alice["size"] as? Int == 31)
            #expect(alice["receivedAt"] as? String == "1970-01-01T00:00:20Z")
            // The report as JSON, not as a string.
            let report = try #require(alice["report"] as? [String: Any], "\(all.text)")
            #expect(report["a"] as? Int == 1 && (report["b"] as? [Any])?.count == 3)
            #expect((reports[0]["report"] as? [String: Any])?["events"] as? [Any] != nil)

            let byUser = try await env.admin(.GET, "/admin/v1/client-usage?userId=Jose%CC%81")
            #expect((byUser.json["reports"] as? [Any])?.count == 0, "\(byUser.text)")
            let composed = try await env.admin(.GET, "/admin/v1/client-usage?userId=Jos%C3%A9")
            #expect((composed.json["reports"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["use-nfc"])
            let window = try await env.admin(.GET, "/admin/v1/client-usage?from=1970-01-01T00:00:20Z&until=1970-01-01T00:00:21Z")
            #expect((window.json["reports"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["use-alice"])

            let firstPage = try await env.admin(.GET, "/admin/v1/client-usage?limit=1")
            #expect((firstPage.json["reports"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["use-nfc"])
            let next = try #require(firstPage.json["next"] as? String, "\(firstPage.text)")
            let secondPage = try await env.admin(.GET, "/admin/v1/client-usage?limit=1&cursor=\(next)")
            #expect((secondPage.json["reports"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["use-alice"])
            #expect(secondPage.json["next"] is NSNull)

            for (query, message) in [
                ("level=INFO", "level filters client logs only, not usage reports"),
                ("text=x", "text filters client logs only, not usage reports"),
                ("limit=1000", "limit must be a whole number from 1 to 500"),
                ("cursor=1.2.3.%01", "cursor is malformed: pass the previous page's next value unchanged"),
                ("from=2025-03-01", "from must be an RFC 3339 date-time (2025-03-01T08:15:00Z)"),
                ("userId=a%00b", "userId contains control characters"),
            ] {
                let reply = try await env.admin(.GET, "/admin/v1/client-usage?\(query)")
                #expect(reply.status == 400 && reply.errorMessage == message, "\(query): \(reply.status) \(reply.text)")
            }
            #expect(try await env.admin(.GET, "/admin/v1/client-usage", token: nil).status == 401)

            // Large reports: a page stops at 8 MiB of them (at least one), with a next.
            try await Self.register(env, "reg-big", Self.alice)
            let big = #"{"blob":""# + String(repeating: "x", count: 3 << 20) + #""}"#
            for n in 0..<3 {
                try await Self.save(
                    env,
                    ClientUpload(
                        id: "big-\(n)", kind: .usage, app: "demo", user: Self.alice, registration: "reg-big",
                        deviceId: "", receivedAt: 40_000 + Int64(n), size: big.utf8.count, report: big))
            }
            let heavy = try await env.admin(.GET, "/admin/v1/client-usage?registration=reg-big&limit=500")
            #expect((heavy.json["reports"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["big-2", "big-1"])
            let heavyNext = try #require(heavy.json["next"] as? String, "\(heavy.text.prefix(200))")
            let rest = try await env.admin(.GET, "/admin/v1/client-usage?registration=reg-big&limit=500&cursor=\(heavyNext)")
            #expect((rest.json["reports"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["big-0"])
            #expect(rest.json["next"] is NSNull)
        }
    }

    @Test(arguments: StoreKind.allCases) func theConsoleShowsClientLogsAndUsageReportsEscaped(_ kind: StoreKind) async throws {
        try await TestEnvironment.withMidtier(kind) { env in
            try await Self.seed(env)
            // 55 more entries of one upload, for a second page.
            try await Self.save(
                env, Self.log("up-many", "reg-alice", Self.alice, at: 30_000),
                (0..<55).map { Self.entry("up-many", $0, 100_000 + Int64($0), .info, "many \($0)") })
            // All 62 in one page of the admin API: read from the store in batches of 50.
            let everything = try await env.admin(.GET, "/admin/v1/client-logs?limit=500")
            #expect(Self.messages(everything).count == 62 && Self.messages(everything).last == "boot" && everything.json["next"] is NSNull)
            let fifty = try await env.admin(.GET, "/admin/v1/client-logs?limit=50")
            #expect(Self.messages(fifty).count == 50 && fifty.json["next"] is String)
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
            do {
                try await Self.checkConsole(env, client)
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
        }
    }

    static func checkConsole(_ env: TestEnvironment, _ client: HTTPClient) async throws {
        // Without a session: the sign-in page, nothing of the logs.
        let stranger = AdminStoredTextTests.Console(base: "http://127.0.0.1:\(env.adminPort)", cookie: "")
        for path in ["/console/client-logs", "/console/client-usage", "/console/client-usage/report?registration=reg-alice&at=20000&id=use-alice"] {
            let reply = try await stranger.call(client, .GET, path)
            #expect(reply.status == 303 && reply.header("Location") == "/console/sign-in", "\(path): \(reply.status)")
            #expect(!reply.text.contains("payroll") && !reply.text.contains("events"))
        }
        let console = try await AdminStoredTextTests.signIn(env, client)

        let page = try await console.call(client, .GET, "/console/client-logs")
        #expect(page.status == 200, "\(page.text.prefix(300))")
        #expect(page.header("Content-Security-Policy")?.contains("default-src 'none'") == true)
        #expect(page.text.contains(#"message">many 54 "#) && page.text.contains(#"message">many 5 "#) && !page.text.contains(#"message">many 4 "#))
        #expect(page.text.components(separatedBy: "class=\"client-log\"").count - 1 == 50, "50 a page")
        #expect(page.text.contains(#"href="/console/client-logs?registration=reg-alice""#), "each row links its registration's logs")
        #expect(page.text.contains(#"href="/console/client-logs" aria-current="page""#), "in the navigation")
        // The next page through the "Older" link: the rest, oldest last.
        let marker = #"<a href=""#
        let older = try #require(page.text.range(of: #"" id="older">"#), "an Older link")
        let href = String(page.text[..<older.lowerBound].components(separatedBy: marker).last ?? "").replacingOccurrences(of: "&amp;", with: "&")
        let second = try await console.call(client, .GET, href)
        #expect(second.status == 200, "\(href): \(second.status)")
        #expect(second.text.components(separatedBy: "class=\"client-log\"").count - 1 == 12, "\(href)")
        #expect(second.text.contains("hello &lt;script&gt;alert(1)&lt;/script&gt;"), "the device's text is escaped")
        #expect(!second.text.contains("<script>"), "no device-supplied markup")
        #expect(second.text.contains(#"href="/console/client-logs" id="newest""#), "back to the newest page")
        #expect(second.text.contains(#"message">many 4 "#) && second.text.contains(#"message">boot "#) && !second.text.contains(#"id="older""#))

        // Filters as the form sends them (an empty realm, a datetime-local time).
        let filtered = try await console.call(
            client, .GET,
            "/console/client-logs?registration=&userId=alice&realm=&app=&level=ERROR&from=1970-01-01T00%3A00&until=&text=")
        #expect(
            filtered.status == 200 && filtered.text.contains("crash in payroll") && !filtered.text.contains(#"message">slow "#),
            "\(filtered.text.prefix(300))")
        let byte = try await console.call(client, .GET, "/console/client-logs?userId=Jose%CC%81&realm=")
        #expect(byte.text.contains(#"message">nfd "#) && !byte.text.contains(#"message">nfc "#), "users by exact bytes")
        for (path, status) in [
            ("/console/client-logs?level=LOUD", 400), ("/console/client-logs?from=soon", 400),
            ("/console/client-logs?registration=a%00b", 400), ("/console/client-logs?cursor=x", 400),
            ("/console/client-usage/report?registration=reg-alice&at=20000&id=nope", 404),
            ("/console/client-usage/report?registration=reg-alice&at=soon&id=use-alice", 400),
        ] {
            let reply = try await console.call(client, .GET, path)
            #expect(reply.status == status, "\(path): \(reply.status)")
            #expect(reply.text.contains(#"id="problem""#), "\(path): the console's problem page")
        }

        // The registrations page links each registration's logs.
        let registrations = try await console.call(client, .GET, "/console/registrations?user=alice")
        #expect(registrations.text.contains(#"<a href="/console/client-logs?registration=reg-alice" class="client-logs">Logs</a>"#))

        // Usage reports: escaped, truncated, with the whole report a click away.
        let usage = try await console.call(client, .GET, "/console/client-usage")
        #expect(usage.status == 200)
        #expect(usage.text.contains("&lt;b&gt;") && !usage.text.contains("<b>"), "the report's text is escaped")
        #expect(usage.text.contains(#"{&quot;a&quot;:1,&quot;b&quot;:[true,null,&quot;x&quot;]}"#))
        #expect(!usage.text.contains(#"&quot;n&quot;:39"#), "a long report is cut short in the list")
        let full = #"/console/client-usage/report?registration=reg-nfc&at=21000&id=use-nfc"#
        #expect(usage.text.contains(full.replacingOccurrences(of: "&", with: "&amp;")))
        let report = try await console.call(client, .GET, full)
        #expect(report.status == 200 && report.text.contains(#"&quot;n&quot;:39"#) && !report.text.contains("<b>"), "\(report.text.prefix(300))")
    }
}
