import Foundation
import MidtierCore
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

@testable import Forwarding
@testable import MetadataPatching

/// Back ends' absolute URLs, CSRF sessions and `$metadata` through Midtier, over sockets.
@Suite(.timeLimit(.minutes(10))) struct ForwardingFidelityTests {
    @Test func aGatewayCSRFFetchThenPostWorksAndLocationPointsAtMidtier() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.destinations["echo"]!.authentication = .noAuthentication
        }) { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            let fetch = try await env.call(.GET, "/echo/sap/opu/odata/SRV/Items", headers: headers + [("X-CSRF-Token", "Fetch")])
            #expect(fetch.status == 200)
            let token = try #require(fetch.header("X-CSRF-Token"))
            #expect(fetch.header("Set-Cookie") == nil, "the back end's session cookie stays with Midtier")
            #expect(fetch.text.contains("http://midtier.test:8080/echo/sap/opu/odata/SRV/Items('1')"), "\(fetch.text)")
            #expect(fetch.text.contains("http://midtier.test:8080/echo/sap/opu/odata/SRV/Items?$skiptoken=1"), "__next rewritten")
            #expect(!fetch.text.contains("127.0.0.1"))

            let post = try await env.call(
                .POST, "/echo/sap/opu/odata/SRV/Items", headers: headers + [("X-CSRF-Token", token), ("Content-Type", "application/json")],
                body: #"{"Id":"7"}"#)
            #expect(post.status == 201, "\(post.text)")
            #expect(post.header("Location") == "http://midtier.test:8080/echo/sap/opu/odata/SRV/Items('7')")
            #expect(post.text.contains("\"uri\":\"http://midtier.test:8080/echo/sap/opu/odata/SRV/Items('7')\""))

            // Another registration of the same user has its own session: alice's token is no good there.
            let other = try await env.register(.alice)
            let foreign = try await env.call(
                .POST, "/echo/sap/opu/odata/SRV/Items",
                headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", other), ("X-CSRF-Token", token)], body: "{}")
            #expect(foreign.status == 403)
            #expect(foreign.header("X-CSRF-Token") == "Required")
        }
    }

    @Test func aBackEndThatEchoesTheCredentialNeverShowsItToTheDevice() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, echoPort in
            configuration.destinations["tech"] = DestinationConfiguration(
                name: "tech", url: "http://127.0.0.1:\(echoPort)/base", authentication: .basic(user: "MOBILE_TECH", password: "tech-password-123"),
                timeoutMilliseconds: 5000)
            configuration.apps["demo"]!.destinations.append("tech")
        }) { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            // The echo back end answers with the Authorization it received.
            let saml = try await env.call(.GET, "/echo/x", headers: headers)
            let sent = try #require(env.echo.requests.last?.header("Authorization").first)
            #expect(sent.hasPrefix("Bearer ") && sent.count > 20, "the back end got a token")
            #expect(saml.status == 200)
            #expect(!saml.text.contains(String(sent.dropFirst(7))), "the token never reaches the device: \(saml.text)")
            #expect(saml.text.contains(#""authorization":"Bearer [redacted]""#), "\(saml.text)")
            #expect(saml.header("Content-Length") == String(saml.body.count))

            let tech = try await env.call(.GET, "/tech/x", headers: headers)
            let basic = "Basic " + Data("MOBILE_TECH:tech-password-123".utf8).base64EncodedString()
            #expect(env.echo.requests.last?.header("Authorization").first == basic, "the back end got the technical user")
            #expect(tech.status == 200)
            #expect(!tech.text.contains("tech-password-123") && !tech.text.contains(String(basic.dropFirst(6))), "\(tech.text)")
            #expect(tech.text.contains("[redacted]"))
        }
    }

    /// A back end that echoes the token in a streamed answer (chunked, or 1 MB with a
    /// `Content-Length`), cut across the pieces Midtier reads: the device sees `[redacted]`
    /// (in a download, a mask as long as the token) wherever the token was, and every other
    /// byte as sent.
    @Test func aStreamedAnswerThatEchoesTheTokenNeverShowsItToTheDevice() async throws {
        let backEnd = CredentialEchoBackEnd()
        defer { backEnd.stop() }
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.destinations["echo"]!.url = "http://127.0.0.1:\(backEnd.port)/base"
        }) { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            for kind in CredentialEchoBackEnd.Kind.allCases {
                let reply = try await env.call(.GET, "/echo/\(kind.rawValue)", headers: headers)
                let sent = try #require(backEnd.authorizations.last)
                #expect(sent.hasPrefix("Bearer ") && sent.count > 20, "the back end got a token")
                #expect(reply.status == 200)
                let token = Array(sent.utf8.dropFirst(7))
                #expect(reply.body.count > 0 && !Self.contains(token, in: reply.body), "\(kind): the token reached the device")
                // A download keeps its Content-Length: the token's mask is as long as the token.
                let mask = kind == .largeBinary ? "[redacted]" + String(repeating: "*", count: token.count - 10) : "[redacted]"
                let expected = CredentialEchoBackEnd.body(kind, authorization: "Bearer " + mask).joined()
                let asSent = reply.body == Array(expected)
                #expect(asSent, "\(kind): \(reply.body.count) bytes, \(expected.count) expected, every other byte as sent")
                if let length = reply.header("Content-Length") { #expect(Int(length) == reply.body.count) }
                #expect(
                    (reply.header("Content-Length") != nil) == (kind == .largeBinary),
                    "\(kind): only a download that is not rewritten keeps its length")
            }
        }
    }

    static func contains(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// `URL.queries.*` replace the device's parameters of the same name, in any spelling a back
    /// end might read as that name (percent-encoded, another letter case); the rest pass as sent.
    @Test func fixedQueryParametersReplaceTheDevicesOwn() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.destinations["echo"]!.authentication = .noAuthentication
            configuration.destinations["echo"]!.extraQueries = [("sap-client", "100"), ("sap-language", "EN")]
        }) { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            let reply = try await env.call(
                .GET, "/echo/x?sap-client=200&%24top=1&sap%2Dclient=300&SAP-Client=400&sap-client&sap-clientx=1&other=a%26b&Sap-Language=DE",
                headers: headers)
            #expect(reply.status == 200)
            #expect(env.echo.requests.last?.query == "%24top=1&sap-clientx=1&other=a%26b&sap-client=100&sap-language=EN")
            _ = try await env.call(.GET, "/echo/x?sap-client=200", headers: headers)
            #expect(env.echo.requests.last?.query == "sap-client=100&sap-language=EN")
            _ = try await env.call(.GET, "/echo/x?$top=2", headers: headers)
            #expect(env.echo.requests.last?.query == "$top=2&sap-client=100&sap-language=EN")
        }
    }

    /// The device's own cookies stay with the device: the back end gets the cookies Midtier
    /// keeps for the registration, plus those its destination lists in `forwardDeviceCookies`
    /// — never a SAP logon ticket, a SAP session or `sap-usercontext`, listed or not, and never
    /// one of the name of a kept cookie.
    @Test func theDevicesOwnCookiesReachTheBackEndOnlyWhenListed() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, echoPort in
            configuration.destinations["echo"]!.authentication = .noAuthentication
            configuration.destinations["echo"]!.forwardDeviceCookies = [
                "allowed", "MYSAPSSO2", "SAP_SESSIONID_ABC_100", "sap-usercontext",
                "SAP_SESSIONID", "X-SMP-APPCID",
            ]
            configuration.destinations["plain"] = DestinationConfiguration(
                name: "plain", url: "http://127.0.0.1:\(echoPort)/base",
                authentication: .noAuthentication, timeoutMilliseconds: 5000)
            configuration.apps["demo"]!.destinations.append("plain")
        }) { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            let device =
                "MYSAPSSO2=ticket; other=y; allowed=z; SAP_SESSIONID_ABC_100=s; sap-usercontext=sap-client=100; SAP_SESSIONID=forged; X-SMP-APPCID=\(id)"
            for name in ["echo", "plain"] {
                let path = "/\(name)/sap/opu/odata/SRV/Items"
                let fetch = try await env.call(.GET, path, headers: headers + [("X-CSRF-Token", "Fetch")])
                let session = try #require(fetch.header("X-CSRF-Token")?.dropFirst("csrf-".count))
                #expect(env.echo.requests.last?.header("Cookie") == [], "\(name): no cookie before the back end set one")
                _ = try await env.call(.GET, path, headers: headers + [("Cookie", device)])
                let expected = name == "echo" ? "SAP_SESSIONID=\(session); allowed=z" : "SAP_SESSIONID=\(session)"
                #expect(env.echo.requests.last?.header("Cookie") == [expected], "\(name)")
            }
        }
    }

    @Test func atomFeedLinksPointAtMidtier() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.destinations["echo"]!.authentication = .noAuthentication
        }) { env in
            let id = try await env.register(.alice)
            let feed = try await env.call(.GET, "/echo/atom/Documents", headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)])
            #expect(feed.status == 200)
            let text = feed.text
            #expect(text.contains(#"xml:base="http://midtier.test:8080/echo/atom/""#), "\(text)")
            #expect(text.contains(#"href="http://midtier.test:8080/echo/atom/Documents('a')""#))
            #expect(text.contains(#"src="http://midtier.test:8080/echo/atom/Documents('a')/$value""#))
            #expect(text.contains(#"href="http://midtier.test:8080/echo/atom/Documents?$skiptoken=2""#))
            #expect(!text.contains("127.0.0.1"))
        }
    }

    @Test func payrollPagingLinksAndMetadataPatchesThroughMidtier() async throws {
        try await TestEnvironment.with(adjust: { configuration, _, _ in
            configuration.destinations["sf"]!.metadataPatches = [
                MetadataPatch(entityType: "EmployeePayrollRunResultsItems", property: "amount", set: ["Precision": "15", "Scale": "2"])
            ]
        }) { env in
            let id = try await env.register(.alice)
            let headers = [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", id)]
            var url: String? = "/sf/odata/v2/EmployeePayrollRunResults"
            var seen = 0
            var pages = 0
            while let next = url, pages < 10 {
                let page = try await env.call(.GET, next, headers: headers)
                #expect(page.status == 200)
                let d = page.json["d"] as? [String: Any]
                seen += (d?["results"] as? [Any])?.count ?? 0
                pages += 1
                url = (d?["__next"] as? String).map { link in
                    #expect(link.hasPrefix("http://midtier.test:8080/sf/odata/v2/"), "\(link)")
                    return String(link.dropFirst("http://midtier.test:8080".count))
                }
            }
            #expect(pages > 1, "the collection is paged")
            #expect(seen == 24)
            let metadata = try await env.call(.GET, "/sf/odata/v2/$metadata", headers: headers)
            #expect(metadata.status == 200)
            #expect(
                metadata.text.range(of: #"<Property Name="amount" Type="Edm.Decimal"[^>]*Precision="15""#, options: .regularExpression) != nil,
                "\(metadata.text)")
            #expect(metadata.text.range(of: #"<Property Name="amount" Type="Edm.Decimal"[^>]*Scale="2""#, options: .regularExpression) != nil)
        }
    }
}

/// A back end that answers with the `Authorization` it was sent inside its body, as a debug
/// endpoint does, in pieces sent apart so that the credential straddles what Midtier reads at a
/// time: chunked (`text/plain`, the token cut across chunks), or 1 MB with a `Content-Length`
/// (JSON, rewritten too; or binary), the token at the start, across 64 KiB, cut across the
/// pieces, and at the very end. One answer per connection.
final class CredentialEchoBackEnd: @unchecked Sendable {
    enum Kind: String, CaseIterable, Sendable {
        case chunked, large, largeBinary
    }

    let port: Int
    private let listener: Int32
    private let seen = Mutex<[String]>([])
    var authorizations: [String] { seen.withLock { $0 } }

    init() {
        (listener, port) = listenOnLoopback()
        let listener = self.listener
        Thread { [weak self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                guard let self else { Glibc.close(connection); return }
                Thread { self.serve(connection) }.start()
            }
        }.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
    }

    /// The answer's body, in the pieces it is sent in.
    static func body(_ kind: Kind, authorization: String) -> [[UInt8]] {
        let auth = Array(authorization.utf8)
        let half = auth.count / 2
        switch kind {
        case .chunked:
            return [
                Array(#"{"seen":""#.utf8) + auth[..<half], Array(auth[half...]) + Array(#"","again":""#.utf8) + auth[..<3],
                Array(auth[3...]) + Array(#""}"#.utf8),
            ]
        case .large, .largeBinary:
            // Filler, then the credential cut in two: the first half ends a piece.
            var pieces: [[UInt8]] = [[]]
            for filler in [0, 65_530, 400_000, 534_000] {
                pieces[pieces.count - 1] += [UInt8](repeating: UInt8(ascii: "x"), count: filler) + auth[..<half]
                pieces.append(Array(auth[half...]))
            }
            return pieces
        }
    }

    private func serve(_ connection: Int32) {
        defer { Glibc.close(connection) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        var received: [UInt8] = []
        while String(decoding: received, as: UTF8.self).range(of: "\r\n\r\n") == nil {
            let count = recv(connection, &buffer, buffer.count, 0)
            if count <= 0 { return }
            received += buffer[0..<count]
        }
        let lines = String(decoding: received, as: UTF8.self).components(separatedBy: "\r\n")
        let path = lines[0].split(separator: " ").dropFirst().first ?? ""
        let authorization =
            lines.first { $0.lowercased().hasPrefix("authorization:") }.map { String($0.dropFirst(14)).trimmingCharacters(in: .whitespaces) } ?? ""
        seen.withLock { $0.append(authorization) }
        guard let kind = Kind(rawValue: String(path.split(separator: "/").last ?? "")) else { return }
        func send(_ bytes: [UInt8]) -> Bool {
            var sent = 0
            while sent < bytes.count {
                let count = bytes[sent...].withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if count <= 0 { return false }
                sent += count
            }
            return true
        }
        let pieces = Self.body(kind, authorization: authorization)
        let type = kind == .chunked ? "text/plain" : kind == .large ? "application/json" : "application/octet-stream"
        let framing = kind == .chunked ? "Transfer-Encoding: chunked" : "Content-Length: \(pieces.joined().count)"
        guard send(Array("HTTP/1.1 200 OK\r\nContent-Type: \(type)\r\n\(framing)\r\nConnection: close\r\n\r\n".utf8)) else { return }
        for piece in pieces {
            // Apart, so that Midtier most likely reads them apart (the result is the same either way).
            usleep(20_000)
            let framed = kind == .chunked ? Array(String(piece.count, radix: 16).utf8) + [13, 10] + piece + [13, 10] : piece
            guard send(framed) else { return }
        }
        if kind == .chunked { _ = send(Array("0\r\n\r\n".utf8)) }
    }
}
