import MidtierTestSupport
import Testing

/// Admin API paths spelt with an empty segment (issue 38): the router drops empty segments, so
/// `GET /admin/v1/registrations/` — one registration's path with its id left out — answered the
/// whole list. Over a real socket (curl `--path-as-is`, so the path arrives as typed).
@Suite(.timeLimit(.minutes(10))) struct AdminPathCheckTests {
    @Test func aPathWithAnEmptySegmentIsNotFound() async throws {
        try await TestEnvironment.with { env in
            func status(_ path: String) async throws -> Int {
                let result = try await runOffThePool(
                    "/usr/bin/curl",
                    [
                        "-s", "--path-as-is", "-o", "/dev/null", "-w", "%{http_code}",
                        "-H", "Authorization: Bearer \(TestEnvironment.adminToken)", "http://127.0.0.1:\(env.adminPort)\(path)",
                    ])
                return Int(result.output) ?? -1
            }
            for path in [
                "/admin/v1/registrations/", "/admin/v1/audit/", "/admin//v1/registrations", "/admin/v1/users/alice/", "/admin/v1/destinations/",
            ] {
                let got = try await status(path)
                #expect(got == 404, "\(path)")
            }
            for path in ["/admin/v1/registrations", "/admin/v1/audit", "/admin/v1/destinations", "/console/"] {
                let got = try await status(path)
                #expect(got != 404 && got > 0, "\(path): \(got)")
            }
        }
    }
}
