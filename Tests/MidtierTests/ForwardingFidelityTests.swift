import Foundation
import MidtierCore
import NIOCore
import Testing
@testable import Forwarding
@testable import MetadataPatching

/// Back ends' absolute URLs, CSRF sessions and `$metadata` through Midtier, over sockets.
@Suite struct ForwardingFidelityTests {
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

            let post = try await env.call(.POST, "/echo/sap/opu/odata/SRV/Items", headers: headers + [("X-CSRF-Token", token), ("Content-Type", "application/json")], body: #"{"Id":"7"}"#)
            #expect(post.status == 201, "\(post.text)")
            #expect(post.header("Location") == "http://midtier.test:8080/echo/sap/opu/odata/SRV/Items('7')")
            #expect(post.text.contains("\"uri\":\"http://midtier.test:8080/echo/sap/opu/odata/SRV/Items('7')\""))

            // Another registration of the same user has its own session: alice's token is no good there.
            let other = try await env.register(.alice)
            let foreign = try await env.call(.POST, "/echo/sap/opu/odata/SRV/Items", headers: [("Authorization", TestUser.alice.basic), ("X-SMP-APPCID", other), ("X-CSRF-Token", token)], body: "{}")
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
                MetadataPatch(entityType: "EmployeePayrollRunResultsItems", property: "amount", set: ["Precision": "15", "Scale": "2"]),
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
            #expect(metadata.text.range(of: #"<Property Name="amount" Type="Edm.Decimal"[^>]*Precision="15""#, options: .regularExpression) != nil, "\(metadata.text)")
            #expect(metadata.text.range(of: #"<Property Name="amount" Type="Edm.Decimal"[^>]*Scale="2""#, options: .regularExpression) != nil)
        }
    }
}

@Suite struct CredentialRedactionTests {
    @Test func findsTheCredentialInEveryFormAndNothingElse() {
        let bearer = CredentialRedaction(authorization: "Bearer abc.DEF-123_token")
        #expect(bearer.redact("error: token abc.DEF-123_token rejected; again abc.DEF-123_token") == "error: token [redacted] rejected; again [redacted]")
        #expect(bearer.redact("nothing here") == nil)
        #expect(bearer.redact(Array("abc.DEF-123_toke".utf8)) == nil, "a prefix is not the token")

        let basic = CredentialRedaction(authorization: "Basic " + Data("TECH:secret-password".utf8).base64EncodedString())
        let encoded = Data("TECH:secret-password".utf8).base64EncodedString()
        #expect(basic.redact("Authorization: Basic \(encoded)") == "Authorization: Basic [redacted]")
        #expect(basic.redact("user TECH:secret-password") == "user [redacted]")
        #expect(basic.redact("password secret-password") == "password [redacted]")

        #expect(CredentialRedaction(authorization: "Basic " + Data("u:pw".utf8).base64EncodedString()).redact("pw u:pw") == nil,
                "values under 8 bytes would match ordinary text")
        #expect(CredentialRedaction(authorization: nil).isEmpty)
    }
}

@Suite struct URLRewriterTests {
    let rewriter = URLRewriter(backendBase: "http://backend:8081/base", deviceBase: "https://m.example/sf")

    func rewrite(_ text: String, chunk: Int) async throws -> String {
        let bytes = Array(text.utf8)
        let chunks = stride(from: 0, to: bytes.count, by: chunk).map { ByteBuffer(bytes: bytes[$0..<min($0 + chunk, bytes.count)]) }
        let stream = AsyncStream<ByteBuffer> { continuation in
            for buffer in chunks { continuation.yield(buffer) }
            continuation.finish()
        }
        var output = ""
        for try await buffer in rewriter.rewriting(stream) { output += String(buffer: buffer) }
        return output
    }

    @Test func rewritesAcrossEveryChunkBoundary() async throws {
        let input = #"{"uri":"http://backend:8081/base/X('1')","__next":"http:\/\/backend:8081\/base\/X?$skip=2","other":"http://backend:8081/basement/x","far":"http://elsewhere/base/x","root":"http://backend:8081/base"}"#
        let expected = #"{"uri":"https://m.example/sf/X('1')","__next":"https:\/\/m.example\/sf\/X?$skip=2","other":"http://backend:8081/basement/x","far":"http://elsewhere/base/x","root":"https://m.example/sf"}"#
        for chunk in [1, 2, 3, 7, 16, 1000] {
            #expect(try await rewrite(input, chunk: chunk) == expected, "chunk size \(chunk)")
        }
    }

    @Test func rewritesHeaderValuesAndKnowsWhatIsText() {
        #expect(rewriter.rewrite("http://backend:8081/base/Items('7')") == "https://m.example/sf/Items('7')")
        #expect(rewriter.rewrite("http://backend:8081/base") == "https://m.example/sf")
        #expect(rewriter.rewrite("http://other/x") == "http://other/x")
        #expect(URLRewriter.isRewritable(contentType: "application/json;odata=verbose"))
        #expect(URLRewriter.isRewritable(contentType: "application/atom+xml;type=feed"))
        #expect(URLRewriter.isRewritable(contentType: "multipart/mixed; boundary=x"))
        #expect(!URLRewriter.isRewritable(contentType: "application/pdf"))
        #expect(!URLRewriter.isRewritable(contentType: nil))
    }
}

@Suite struct MetadataPatcherTests {
    static let document = """
    <?xml version="1.0" encoding="utf-8"?><edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx">\
    <edmx:DataServices><Schema Namespace="SFOData" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">\
    <EntityType Name="Items"><Property Name="amount" Type="Edm.Decimal" Nullable="true"/><Property Name="other" Type="Edm.String"/></EntityType>\
    </Schema></edmx:DataServices></edmx:Edmx>
    """

    @Test func setsFacetsAndReportsWhatMatchedNothing() throws {
        let result = try MetadataPatcher.apply([
            MetadataPatch(entityType: "Items", property: "amount", set: ["Precision": "15", "Scale": "2"]),
            MetadataPatch(entityType: "Items", property: "missing", set: ["Scale": "2"]),
        ], to: Array(Self.document.utf8))
        let text = String(decoding: result.document, as: UTF8.self)
        #expect(text.contains(#"<Property Name="amount" Type="Edm.Decimal" Nullable="true" Precision="15" Scale="2"/>"#), "\(text)")
        #expect(text.contains(#"<Property Name="other" Type="Edm.String"/>"#))
        #expect(result.unmatched.map(\.property) == ["missing"])
    }

    /// Whether a Scale fits is judged on the patched document: a Scale alone fits the
    /// back end's own Precision; one without a Precision, or above it, is reported.
    @Test func judgesScaleOnThePatchedDocument() throws {
        let document = """
        <?xml version="1.0" encoding="utf-8"?><edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx">\
        <edmx:DataServices><Schema Namespace="SFOData" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">\
        <EntityType Name="Items"><Property Name="fits" Type="Edm.Decimal" Precision="15"/><Property Name="bare" Type="Edm.Decimal"/>\
        <Property Name="narrow" Type="Edm.Decimal" Precision="1"/><Property Name="variable" Type="Edm.Decimal"/>\
        <Property Name="untouched" Type="Edm.Decimal" Scale="4"/></EntityType>\
        </Schema></edmx:DataServices></edmx:Edmx>
        """
        let result = try MetadataPatcher.apply([
            MetadataPatch(entityType: "Items", property: "fits", set: ["Scale": "2"]),
            MetadataPatch(entityType: "Items", property: "bare", set: ["Scale": "2"]),
            MetadataPatch(entityType: "Items", property: "narrow", set: ["Scale": "2"]),
            MetadataPatch(entityType: "Items", property: "narrow", set: ["MaxLength": "9"]),
            MetadataPatch(entityType: "Items", property: "variable", set: ["Scale": "variable"]),
        ], to: Array(document.utf8))
        #expect(result.unmatched.isEmpty)
        #expect(result.unfittingScales == [
            UnfittingScale(entityType: "Items", property: "bare", scale: 2, precision: nil),
            UnfittingScale(entityType: "Items", property: "narrow", scale: 2, precision: 1),
        ])
        #expect(result.unfittingScales.map(\.description) == [
            "property bare of entity type Items: Scale 2 has no Precision",
            "property narrow of entity type Items: Scale 2 is larger than its Precision 1",
        ])
        let text = String(decoding: result.document, as: UTF8.self)
        #expect(text.contains(#"<Property Name="fits" Type="Edm.Decimal" Precision="15" Scale="2"/>"#), "\(text)")
    }

    @Test func refusesHostileDocuments() {
        for bad in ["", "<", "<!DOCTYPE x [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]><x>&b;</x>",
                    "<!DOCTYPE x SYSTEM \"http://127.0.0.1:1/evil.dtd\"><x/>"] {
            #expect(throws: MetadataPatchError.self) { try MetadataPatcher.apply([], to: Array(bad.utf8)) }
        }
    }
}
