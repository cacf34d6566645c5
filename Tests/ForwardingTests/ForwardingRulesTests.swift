import HTTPTypes
import Hummingbird
import MidtierCore
import NIOCore
import Testing

@testable import Forwarding

@Suite struct ProxyPathTests {
    @Test func splitsDestinationAndRemainder() {
        #expect(ProxyPath(rawPath: "/sf/odata/v2/User")?.destination == "sf")
        #expect(ProxyPath(rawPath: "/sf/odata/v2/User")?.remainder == "/odata/v2/User")
        #expect(ProxyPath(rawPath: "/sf")?.remainder == "")
        #expect(ProxyPath(rawPath: "//x") == nil)
        #expect(ProxyPath(rawPath: "") == nil)
    }

    /// The one-pass shortcut for plain paths never lets through what the segment-by-segment
    /// check refuses: every path of up to five characters from an alphabet of the tricky ones.
    @Test func theShortcutForPlainPathsAgreesWithTheFullCheck() {
        let alphabet: [Character] = ["/", ".", ";", "a", "%", "2", "e", "\\", " ", "\u{7F}", "é"]
        var paths: [String] = [""]
        var frontier: [String] = [""]
        for _ in 0..<5 {
            frontier = frontier.flatMap { prefix in alphabet.map { prefix + String($0) } }
            paths += frontier
        }
        var disagreements: [String] = []
        for body in paths {
            let path = "/" + body
            if (ProxyPath.problem(in: path[...]) == nil) != (ProxyPath.problemBySegments(in: path[...]) == nil) { disagreements.append(path) }
        }
        #expect(paths.count > 170_000)
        #expect(disagreements.count == 0, "\(disagreements.prefix(10))")
    }

    @Test func refusesEverythingThatClimbsOut() {
        let bad = [
            "/..", "/.", "/a/../b", "/%2e%2e", "/%2E%2e/x", "/.%2e", "/%2e.", "/..%2f", "/a%2fb", "/a%2Fb", "/%5c", "/a\\b",
            "/%252e%252e", "/%25252e%25252e", "/..;/x", "/..;jsessionid=1", "/%2e%2e;x", "/%c0%ae%c0%ae", "/%c0%af",
            "/a%00", "/%0d%0a", "/%", "/%g1", "/a%2", "/%252f",
        ]
        for path in bad {
            #expect(ProxyPath.problem(in: path[...]) != nil, "\(path) was let through")
        }
    }

    @Test func letsOrdinaryODataPathsThrough() {
        let good = [
            "", "/", "/odata/v2/User('100001')", "/odata/v2/EmployeePayrollRunResults", "/a%20b", "/a..b", "/...",
            "/.hidden", "/x;y=1", "/%C3%BC", "/a//b", "/Connections('a%27b')", "/$metadata", "/a.b.c",
        ]
        for path in good {
            #expect(ProxyPath.problem(in: path[...]) == nil, "\(path) was refused")
        }
    }
}

@Suite struct HeaderPolicyTests {
    @Test func identityHeadersInEverySpelling() {
        for name in [
            "X-Forwarded-User", "x-forwarded-for", "X_Forwarded_For", "X-FORWARDED-HOST", "x_forwarded_proto", "Forwarded",
            "X-Real-IP", "X-Remote-User", "Remote-User", "REMOTE_USER", "X-SMP-APPCID", "X-SMP-Anything", "SAP-User",
            "sap-userid", "X-SAP-User-Name", "X-Auth-Request-Email", "X-Original-URL", "X-HTTP-Method-Override",
            // Certificates and tickets a proxy or a device might present: only Midtier's own pass.
            "SSL_CLIENT_CERT", "ssl-client-cert", "SSL_Client_Cert_Chain_1", "Client-Cert", "Client-Cert-Chain", "X-SSL-Client-Cert",
            "MYSAPSSO2", "mysapsso2", "SSLClientCert", "X-Amzn-Mtls-Clientcert", "X-WEBAUTH-USER", "X-MS-Client-Principal",
        ] {
            #expect(HeaderPolicy.isIdentityHeader(name), "\(name)")
        }
        for name in ["Accept", "Content-Type", "X-CSRF-Token", "sap-client", "sap-language", "If-Match", "MaxDataServiceVersion"] {
            #expect(!HeaderPolicy.isIdentityHeader(name), "\(name)")
        }
    }

    @Test func hopByHopAndConnectionNamedHeadersStay() {
        let tokens = HeaderPolicy.connectionTokens(["keep-alive, X-Custom"])
        #expect(!HeaderPolicy.forwardsRequestHeader("X-Custom", connectionTokens: tokens))
        #expect(!HeaderPolicy.forwardsRequestHeader("Transfer-Encoding", connectionTokens: []))
        #expect(!HeaderPolicy.forwardsRequestHeader("Authorization", connectionTokens: []))
        #expect(!HeaderPolicy.forwardsRequestHeader("Host", connectionTokens: []))
        #expect(HeaderPolicy.forwardsRequestHeader("Accept", connectionTokens: tokens))
        #expect(!HeaderPolicy.forwardsResponseHeader("Set-Cookie", connectionTokens: []))
        #expect(HeaderPolicy.forwardsResponseHeader("Content-Type", connectionTokens: []))
        // `close` and names that are hop-by-hop anyway make no token.
        #expect(HeaderPolicy.connectionTokens(["keep-alive", "Close", " Keep-Alive , TE"]).isEmpty)
        #expect(HeaderPolicy.connectionTokens(["keep-alive, X-Custom ", "x-other"]) == ["x-custom", "x-other"])
        #expect(!HeaderPolicy.forwardsResponseHeader("X-Other", connectionTokens: HeaderPolicy.connectionTokens(["x-other"])))
    }

    /// The device's own cookies reach the back end only when its destination lists them, by
    /// exact name; never a SAP logon ticket or session, Midtier's own cookie, or one of the
    /// name of a cookie Midtier keeps for the back end.
    @Test func onlyListedDeviceCookiesAndNeverASAPTicket() {
        var head = HTTPRequest(method: .get, scheme: "http", authority: "m.example", path: "/gw/x")
        head.headerFields.append(HTTPField(name: .cookie, value: "MYSAPSSO2=ticket; other=y; allowed=z"))
        head.headerFields.append(
            HTTPField(name: .cookie, value: "SAP_SESSIONID_ABC_100=s; sap-usercontext=sap-client=100; JSESSIONID=forged; X-SMP-APPCID=id"))
        let device = head.headerFields
        #expect(HeaderPolicy.deviceCookies(of: device, listed: [], kept: nil) == [])
        #expect(HeaderPolicy.deviceCookies(of: device, listed: ["allowed", "other"], kept: nil) == ["allowed=z", "other=y"])
        #expect(
            HeaderPolicy.deviceCookies(
                of: device,
                listed: [
                    "allowed", "MYSAPSSO2", "mysapsso2", "SAP_SESSIONID_ABC_100", "sap-usercontext",
                    "X-SMP-APPCID", "JSESSIONID",
                ], kept: "jsessionid=kept; ROUTE=r") == ["allowed=z"])
        #expect(HeaderPolicy.deviceCookies(of: device, listed: ["Allowed", "missing"], kept: nil) == [], "names are exact")
    }
}

/// `URL.queries.*` replace the device's parameters of the same name, however spelt.
@Suite struct FixedQueryTests {
    let destination = UpstreamDestination(
        DestinationConfiguration(
            name: "gw", url: "http://gw.example/sap/opu/odata/sap", authentication: .noAuthentication,
            extraQueries: [("sap-client", "100"), ("$format", "json")]), publicURL: "https://m.example")

    @Test func theFixedValueIsTheOnlyOne() {
        let cases: [(String?, String)] = [
            (nil, "sap-client=100&$format=json"),
            ("", "sap-client=100&$format=json"),
            ("sap-client=200", "sap-client=100&$format=json"),
            ("$top=1&sap-client=200&$skip=2&sap-client=300", "$top=1&$skip=2&sap-client=100&$format=json"),
            ("sap%2Dclient=200&SAP-CLIENT=300&Sap-Client&sap-client=", "sap-client=100&$format=json"),
            ("%24format=xml&%24FORMAT=atom&$top=1", "$top=1&sap-client=100&$format=json"),
            (
                "sap-clientx=1&xsap-client=2&sap+client=3&sap%20client=4&sap-client%ZZ=5",
                "sap-clientx=1&xsap-client=2&sap+client=3&sap%20client=4&sap-client%ZZ=5&sap-client=100&$format=json"
            ),
            ("a=sap-client&b=1", "a=sap-client&b=1&sap-client=100&$format=json"),
        ]
        for (query, expected) in cases {
            #expect(destination.target(remainder: "/SRV/Items", query: query) == "/sap/opu/odata/sap/SRV/Items?" + expected, "\(query ?? "nil")")
        }
    }
}

/// The device's query, read from the request target as Hummingbird's `URI.query` reads it.
@Suite struct RequestQueryTests {
    @Test(
        arguments: [
            ("/gw/x", nil), ("/gw/x?", ""), ("/gw/x?a=1&b=%20", "a=1&b=%20"), ("/gw/x?a=1#frag", "a=1"), ("/gw/x?a?b", "a?b"),
            ("http://h:1/gw/x?q=1", "q=1"),
        ] as [(String, String?)])
    func theQueryAsSent(target: String, query: String?) {
        let head = HTTPRequest(method: .get, scheme: "http", authority: "m.example", path: target)
        #expect(Forwarder.query(of: head) == query)
        #expect(Request(head: head, body: .init(buffer: ByteBuffer())).uri.query == query, "as Hummingbird reads it")
    }
}
