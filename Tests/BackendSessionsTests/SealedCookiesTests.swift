import Testing

@testable import BackendSessions

/// The sealed form of a session's cookies: the core's JSON, readable back, and readable from
/// what earlier versions wrote (Foundation's JSONEncoder, `expiresAt` left out when nil).
@Suite struct SealedCookiesTests {
    typealias Cookie = BackendCookieJar.Cookie

    @Test func roundTrips() throws {
        let cookies = [
            Cookie(name: "SAP_SESSIONID", value: "a\"b\\c é", path: "/sap", expiresAt: 1_700_000_000_000),
            Cookie(name: "sap-usercontext", value: "", path: "/", expiresAt: nil),
        ]
        let text = SealedCookies.text(cookies)
        #expect(
            String(decoding: text, as: UTF8.self)
                == #"[{"name":"SAP_SESSIONID","value":"a\"b\\c é","path":"/sap","expiresAt":1700000000000},{"name":"sap-usercontext","value":"","path":"/"}]"#
        )
        #expect(try SealedCookies.cookies(text) == cookies)
        #expect(try SealedCookies.cookies(SealedCookies.text([])) == [])
    }

    @Test func readsWhatEarlierVersionsSealed() throws {
        let earlier = #"[{"path":"\/sap","name":"SAP_SESSIONID","value":"x","expiresAt":1700000000000},{"value":"y","name":"s","path":"\/"}]"#
        #expect(
            try SealedCookies.cookies(Array(earlier.utf8))
                == [
                    Cookie(name: "SAP_SESSIONID", value: "x", path: "/sap", expiresAt: 1_700_000_000_000),
                    Cookie(name: "s", value: "y", path: "/", expiresAt: nil),
                ])
    }

    @Test func refusesWhatIsNotASealedCookieList() {
        for bad in [
            "", "{}", #"[{"name":"a","value":"b"}]"#, #"[{"name":"a","value":"b","path":"/","expiresAt":"soon"}]"#,
            #"[{"name":"a","value":"b","path":"/","expiresAt":1.5}]"#, "[1]",
        ] {
            #expect(throws: SealedCookies.Unreadable.self, "\(bad)") { try SealedCookies.cookies(Array(bad.utf8)) }
        }
    }
}
