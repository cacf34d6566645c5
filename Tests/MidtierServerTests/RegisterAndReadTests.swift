import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import SAMLSigning
import SuccessFactorsSandbox
import Testing

/// The spine, through real sockets: a device registers, reads its own user's payroll through
/// Midtier, and nothing about the request path can be bent to read someone else's.
@Suite(.timeLimit(.minutes(10))) struct RegisterAndReadTests {
    static func results(_ reply: TestEnvironment.Reply) -> [[String: Any]] {
        ((reply.json["d"] as? [String: Any])?["results"] as? [[String: Any]]) ?? []
    }

    @Test func aDeviceReadsItsOwnUsersPayroll() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            let reply = try await env.call(.GET, DeviceCalls.seedQuery, headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)])
            #expect(reply.status == 200, "\(reply.text)")
            let runs = Self.results(reply)
            #expect(runs.count == 5)
            #expect(runs.allSatisfy { $0["userId"] as? String == "100001" })
            let payDates = runs.compactMap { $0["payDate"] as? String }
            #expect(payDates == payDates.sorted { Self.millis($0) > Self.millis($1) }, "newest first")
            let items = (runs.first?["employeePayrollRunResultsItems"] as? [String: Any])?["results"] as? [[String: Any]]
            #expect((items?.count ?? 0) > 0, "items are expanded")
            #expect(reply.text.contains("bankNav"), "the bank expansion is there")
            // The cookie alone also identifies the registration.
            let viaCookie = try await env.call(
                .GET, DeviceCalls.seedQuery, headers: [("Authorization", TestUser.alice.basic), ("Cookie", "X-SMP-APPCID=\(id)")])
            #expect(viaCookie.status == 200)
        }
    }

    /// SAP SDK clients send `X-SMP-APPID` and `X-SMP-DEVICEID` on every call: without
    /// `X-SMP-APPCID`, they name the signed-in user's one registration of that device.
    @Test func theSDKsAppAndDeviceHeadersFindTheUsersRegistration() async throws {
        try await TestEnvironment.with { env in
            func register(_ user: TestUser, device: String) async throws -> String {
                let reply = try await env.call(
                    .POST, "/odata/applications/v1/demo/Connections",
                    headers: [("Authorization", user.basic), ("Content-Type", "application/json")],
                    body: #"{"DeviceType":"iOS","DeviceModel":"iPhone15,2","DeviceId":"\#(device)"}"#)
                return try #require(reply.header("X-SMP-APPCID"), "registration failed: \(reply.status) \(reply.text)")
            }
            let aliceID = try await register(.alice, device: "device-1")
            let sdk = [("X-SMP-APPID", "demo"), ("X-SMP-DEVICEID", "device-1")]
            let alice = try await env.call(.GET, DeviceCalls.seedQuery, headers: sdk + [("Authorization", TestUser.alice.basic)])
            #expect(alice.status == 200, "\(alice.text)")
            #expect(Self.results(alice).allSatisfy { $0["userId"] as? String == "100001" })
            // Not signed in: the named app's challenge.
            let anonymous = try await env.call(.GET, DeviceCalls.seedQuery, headers: sdk)
            #expect(anonymous.status == 401 && anonymous.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
            // Another user naming alice's device has no registration of it.
            let bob = try await env.call(.GET, DeviceCalls.seedQuery, headers: sdk + [("Authorization", TestUser.bob.basic)])
            #expect(bob.status == 403, "\(bob.text)")
            // An app that is not the registration's is refused, with the id or without.
            let otherApp = try await env.call(
                .GET, DeviceCalls.seedQuery,
                headers: [
                    ("X-SMP-APPID", "other"), ("X-SMP-APPCID", aliceID),
                    ("Authorization", TestUser.alice.basic),
                ])
            #expect(otherApp.status == 403, "\(otherApp.text)")
            // Two registrations of the same device: which one is meant must be said.
            _ = try await register(.alice, device: "device-1")
            let ambiguous = try await env.call(.GET, DeviceCalls.seedQuery, headers: sdk + [("Authorization", TestUser.alice.basic)])
            #expect(ambiguous.status == 403 && ambiguous.text.contains("X-SMP-APPCID"), "\(ambiguous.text)")
        }
    }

    static func millis(_ date: String) -> Int64 {
        Int64(date.dropFirst("/Date(".count).prefix { $0.isNumber }) ?? 0
    }

    @Test func aSecondUserSeesOnlyTheirOwnRows() async throws {
        try await TestEnvironment.with { env in
            let bob = try await env.register(.bob)
            let headers = [("Authorization", TestUser.bob.basic), ("X-SMP-APPCID", bob)]
            let others = try await env.call(.GET, DeviceCalls.seedQuery, headers: headers)
            #expect(others.status == 200)
            #expect(Self.results(others).isEmpty, "bob asking for alice's rows gets none")
            let own = try await env.call(.GET, "/sf/odata/v2/EmployeePayrollRunResults?%24top=100", headers: headers)
            #expect(own.status == 200)
            #expect(!Self.results(own).isEmpty)
            #expect(Self.results(own).allSatisfy { $0["userId"] as? String == "100002" })
        }
    }

    @Test func twoHundredConcurrentFirstCallsCauseOneExchange() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        try await env.call(
                            .GET, "/sf/odata/v2/User('100001')", headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
                        ).status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 200)
            #expect(statuses.allSatisfy { $0 == 200 }, "\(Set(statuses))")
            let stats = try await env.sandboxStats()
            #expect(stats["exchanges"] as? Int == 1)
            #expect((stats["exchangesByUser"] as? [String: Int])?["100001"] == 1)
        }
    }

    @Test func spoofedIdentityHeadersChangeNothingAndAreNotForwarded() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            let spoofs = [
                ("X-Forwarded-User", "bob"), ("X_Forwarded_User", "bob"), ("X-Remote-User", "bob"), ("Remote-User", "bob"),
                ("X-Forwarded-For", "10.9.9.9"), ("X-Forwarded-Host", "evil.example"), ("X-Forwarded-Proto", "gopher"),
                ("Forwarded", "for=10.9.9.9;host=evil"), ("X-Real-IP", "10.9.9.9"), ("SAP-User", "bob"),
                ("X-SMP-User", "bob"), ("X-Auth-Request-User", "bob"), ("X-SMP-APPID", "demo"), ("X-SMP-DEVICEID", "device-1"),
            ]
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)] + spoofs
            // Through the sandbox: still alice's data.
            let reply = try await env.call(.GET, "/sf/odata/v2/EmployeePayrollRunResults?%24top=50", headers: headers)
            #expect(reply.status == 200)
            #expect(!Self.results(reply).isEmpty)
            #expect(Self.results(reply).allSatisfy { $0["userId"] as? String == "100001" })
            // At the echo back end: none of them arrive; Midtier's own X-Forwarded-* do.
            let echoed = try await env.call(.GET, "/echo/who?x=1", headers: headers + [("Cookie", "X-SMP-APPCID=\(id); theme=dark")])
            #expect(echoed.status == 200)
            let seen = try #require(env.echo.requests.last)
            for (name, _) in spoofs where !name.lowercased().hasPrefix("x-forwarded") {
                #expect(seen.header(name).isEmpty, "\(name) was forwarded")
            }
            #expect(seen.header("X_Forwarded_User").isEmpty)
            #expect(seen.header("X-Forwarded-User").isEmpty)
            #expect(seen.header("X-SMP-APPCID").isEmpty)
            #expect(seen.header("X-Forwarded-For") == ["127.0.0.1"])
            #expect(seen.header("X-Forwarded-Host") == ["midtier.test:8080"])
            #expect(seen.header("X-Forwarded-Proto") == ["http"])
            #expect(seen.header("Cookie").isEmpty, "Midtier's own cookie stays with Midtier, the device's with the device (docs/forwarding.md)")
            let authorization = try #require(seen.header("Authorization").first)
            #expect(authorization.hasPrefix("Bearer "), "the device's Basic credentials never reach the back end")
            #expect(seen.path == "/base/who")
            #expect(seen.query == "x=1")
        }
    }

    @Test func pathTricksNeverLeaveTheDestination() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            let tricks = [
                "/echo/../x", "/echo/%2e%2e/x", "/echo/%2E%2E/x", "/echo/..%2fx", "/echo/..%2Fx", "/echo/a/../../x",
                "/echo/%252e%252e/x", "/echo/..;/x", "/echo/.%2e/x", "/echo/%c0%ae%c0%ae/x", "/echo/a%5c..%5cx",
                "/echo/./x", "/echo/a%00b", "/echo/%zz",
            ]
            for trick in tricks {
                let reply = try await env.curl(trick, headers: headers)
                #expect(reply.status == 400, "\(trick) gave \(reply.status)")
                #expect(reply.body.contains("\"error\""), "\(trick): OData error body")
            }
            #expect(env.echo.requests.isEmpty, "nothing reached the back end: \(env.echo.requests.map(\.path))")
            let fine = try await env.curl("/echo/a/b%20c/Connections('x')", headers: headers)
            #expect(fine.status == 200)
            #expect(env.echo.requests.map(\.path) == ["/base/a/b%20c/Connections('x')"])
        }
    }

    @Test func callsWithoutAValidRegistrationAreRefused() async throws {
        try await TestEnvironment.with { env in
            let alice = try await env.register(.alice)
            let bob = try await env.register(.bob)
            let path = "/sf/odata/v2/User('100001')"
            let none = try await env.call(.GET, path, headers: [("Authorization", TestUser.alice.basic)])
            #expect(none.status == 403)
            #expect(none.errorMessage != nil, "OData error body")
            let unknown = try await env.call(.GET, path, headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", "no-such-id")])
            #expect(unknown.status == 403)
            let someoneElses = try await env.call(.GET, path, headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", bob)])
            #expect(someoneElses.status == 403)
            let wrongPassword = try await env.call(
                .GET, path, headers: [("Authorization", "Basic " + Data("alice:nope".utf8).base64EncodedString()), ("X-SMP-APPCID", alice)])
            #expect(wrongPassword.status == 401)
            #expect(wrongPassword.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
            let noCredentials = try await env.call(.GET, path, headers: [("X-SMP-APPCID", alice)])
            #expect(noCredentials.status == 401)
            let unknownDestination = try await env.call(
                .GET, "/nowhere/x", headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", alice)])
            #expect(unknownDestination.status == 404)
            #expect(unknownDestination.errorMessage != nil)
            let stats = try await env.sandboxStats()
            #expect(stats["exchanges"] as? Int == 0, "no refused call caused an exchange")
        }
    }

    @Test func registrationsBelongToTheirOwner() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice, requestedID: "alice-phone-1")
            #expect(id == "alice-phone-1", "a free client-supplied id is kept")
            let taken = try await env.register(.bob, requestedID: "alice-phone-1")
            #expect(taken != "alice-phone-1", "a taken id is not")
            let path = "/odata/applications/latest/demo/Connections('alice-phone-1')"
            let own = try await env.call(.GET, path, headers: [("Authorization", TestUser.alice.basic), ("Accept", "application/json")])
            #expect(own.status == 200)
            let entity = try #require(own.json["d"] as? [String: Any])
            #expect(entity["ApplicationConnectionId"] as? String == "alice-phone-1")
            #expect(entity["UserName"] as? String == "alice")
            #expect(entity["DeviceType"] as? String == "iOS")
            #expect((entity["CreatedAt"] as? String)?.hasPrefix("/Date(") == true)
            #expect(
                ((entity["__metadata"] as? [String: Any])?["uri"] as? String)
                    == "http://midtier.test:8080\(path.replacingOccurrences(of: "latest", with: "latest"))")
            for key in [
                "DeviceModel", "DeviceId", "FormFactor", "ApnsDeviceToken", "AndroidGcmRegistrationId", "BlockWipeEnabled",
                "BlockDisconnectedPeriod", "WipeDisconnectedPeriod", "IsWiped",
            ] {
                #expect(entity[key] != nil, "missing \(key)")
            }
            #expect(try await env.call(.GET, path, headers: [("Authorization", TestUser.bob.basic)]).status == 404)
            #expect(try await env.call(.DELETE, path, headers: [("Authorization", TestUser.bob.basic)]).status == 404)
            #expect(try await env.call(.DELETE, path, headers: [("Authorization", TestUser.alice.basic)]).status == 204)
            #expect(try await env.call(.GET, path, headers: [("Authorization", TestUser.alice.basic)]).status == 404)
            let after = try await env.call(
                .GET, "/sf/odata/v2/User('100001')", headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)])
            #expect(after.status == 403, "a deleted registration carries no traffic")
        }
    }

    @Test func registrationResponseCarriesTheIdInHeaderAndCookie() async throws {
        try await TestEnvironment.with { env in
            let reply = try await env.call(
                .POST, "/odata/applications/v4/demo/Connections",
                headers: [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json")],
                body: #"{"d":{"DeviceType":"Android"}}"#)
            #expect(reply.status == 201)
            let id = try #require(reply.header("X-SMP-APPCID"))
            #expect(reply.header("Set-Cookie")?.hasPrefix("X-SMP-APPCID=\(id);") == true)
            #expect((reply.json["d"] as? [String: Any])?["DeviceType"] as? String == "Android")
            let bad = try await env.call(
                .POST, "/odata/applications/v1/demo/Connections",
                headers: [("Authorization", TestUser.alice.basic)], body: #"{"DeviceType": 7}"#)
            #expect(bad.status == 400)
            #expect(bad.errorMessage?.contains("DeviceType") == true)
            let unknownApp = try await env.call(.POST, "/odata/applications/v1/nope/Connections", headers: [("Authorization", TestUser.alice.basic)])
            #expect(unknownApp.status == 404)
            let noAuth = try await env.call(.POST, "/odata/applications/v1/demo/Connections")
            #expect(noAuth.status == 401)
        }
    }

    @Test func aRejectedTokenIsRenewedOnceWithNewToken() async throws {
        try await TestEnvironment.with { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            #expect(try await env.call(.GET, "/sf/odata/v2/User('100001')", headers: headers).status == 200)
            env.sandbox.tokens.revokeAll()
            let reply = try await env.call(.GET, "/sf/odata/v2/User('100001')", headers: headers)
            #expect(reply.status == 200, "\(reply.text)")
            let stats = try await env.sandboxStats()
            #expect(stats["exchanges"] as? Int == 2)
            #expect(stats["newTokenRequests"] as? Int == 1)
        }
    }
}

/// Failures of the token service and the back end, as the device sees them.
@Suite(.timeLimit(.minutes(10))) struct BackEndFailureTests {
    @Test func aRefusedExchangeIs502WithTheReasonAndCachesNothing() async throws {
        try await TestEnvironment.with(adjust: { configuration, sandboxPort, _ in
            guard case .samlBearer(var settings) = configuration.destinations["sf"]!.authentication else { return }
            settings.audience = "not-successfactors"
            configuration.destinations["sf"]!.authentication = .samlBearer(settings)
        }) { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            for _ in 0..<2 {
                let reply = try await env.call(.GET, "/sf/odata/v2/User('100001')", headers: headers)
                #expect(reply.status == 502)
                #expect(reply.errorMessage?.contains("audience") == true, "\(reply.errorMessage ?? "")")
                #expect(reply.errorMessage?.contains("PHNhbWwy") == false, "no assertion in the message")
            }
            let stats = try await env.sandboxStats()
            #expect(stats["rejected"] as? Int == 2, "the failure was not cached: each call tried again")
        }
    }

    @Test func anUnreachableBackEndIs502AndASlowOneIs504() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.destinations["echo"]!.url = "http://127.0.0.1:1"
            configuration.destinations["echo"]!.authentication = .noAuthentication
            configuration.destinations["slow"] = DestinationConfiguration(
                name: "slow", url: "http://127.0.0.1:\(SlowServer.shared.port)",
                authentication: .noAuthentication, timeoutMilliseconds: 300)
            configuration.apps["demo"]!.destinations.append("slow")
        }) { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            let unreachable = try await env.call(.GET, "/echo/x", headers: headers)
            #expect(unreachable.status == 502)
            #expect(unreachable.errorMessage != nil)
            let slow = try await env.call(.GET, "/slow/x", headers: headers)
            #expect(slow.status == 504)
            #expect(slow.errorMessage?.contains("300 ms") == true)
        }
    }
}

/// A TCP listener that accepts connections and never answers (a back end that hangs).
final class SlowServer: Sendable {
    static let shared = SlowServer()
    let port: Int
    private let descriptor: Int32

    private init() {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        listen(listener, 128)
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        descriptor = listener
        port = Int(UInt16(bigEndian: bound.sin_port))
    }
}

/// The sandbox's token endpoint judged over HTTP, as SuccessFactors would.
@Suite(.timeLimit(.minutes(10))) struct SandboxTokenEndpointTests {
    @Test func theSandboxRejectsTamperedWrongAudienceWrongRecipientAndExpiredAssertions() async throws {
        try await TestEnvironment.with { env in
            let directory = env.directory
            let keys = TestKeyPair(keyPath: "\(directory)/signing.key", certificatePath: "\(directory)/signing.crt")
            let signer = try AssertionSigner(keyPEM: keys.keyPEM, passphrase: nil, certificatePEM: keys.certificatePEM)
            let recipient = "\(env.sandboxURL)/oauth/token"
            func assertion(audience: String = "www.successfactors.com", recipient: String = recipient, at: Date = Date()) throws -> String {
                try signer.sign(
                    SAMLAssertion(
                        issueInstant: at, issuer: TestEnvironment.clientKey, nameID: "100001",
                        recipient: recipient, audience: audience, apiKey: TestEnvironment.clientKey))
            }
            func post(_ xml: String, company: String = TestEnvironment.companyID) async throws -> (Int, String) {
                var request = HTTPClientRequest(url: recipient)
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
                let encoded = Data(xml.utf8).base64EncodedString().addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                request.body = .bytes(
                    ByteBuffer(
                        string:
                            "company_id=\(company)&client_id=\(TestEnvironment.clientKey)&grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Asaml2-bearer&assertion=\(encoded)"
                    ))
                let response = try await env.client.execute(request, timeout: .seconds(10))
                let body = try await response.body.collect(upTo: 1 << 20)
                return (Int(response.status.code), String(buffer: body))
            }
            let good = try await post(assertion())
            #expect(good.0 == 200, "\(good.1)")
            #expect(good.1.contains("access_token"))
            let tampered = try assertion().replacingOccurrences(of: ">100001<", with: ">100002<")
            let cases: [(String, (Int, String))] = [
                ("tampered", try await post(tampered)),
                ("wrong audience", try await post(try assertion(audience: "other"))),
                ("wrong recipient", try await post(try assertion(recipient: "http://elsewhere/oauth/token"))),
                ("expired", try await post(try assertion(at: Date().addingTimeInterval(-3600)))),
                ("wrong company", try await post(try assertion(), company: "OTHERCO")),
            ]
            for (name, (status, body)) in cases {
                #expect(status == 401, "\(name): \(status) \(body)")
                #expect(!body.contains("access_token"), "\(name)")
            }
        }
    }
}
