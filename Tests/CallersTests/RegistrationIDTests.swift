import HTTPTypes
import Hummingbird
import MidtierHTTP
import NIOCore
import Testing

@testable import Callers

/// Which registration a call names: `X-SMP-APPCID`, said the same way each time it is repeated,
/// else the cookie of that name.
@Suite struct RegistrationIDTests {
    func request(_ fields: [(String, String)]) -> Request {
        var headers = HTTPFields()
        for (name, value) in fields { headers.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        let head = HTTPRequest(method: .get, scheme: "http", authority: "m.example", path: "/sf/x", headerFields: headers)
        return Request(head: head, body: RequestBody(buffer: ByteBuffer()))
    }

    @Test func theHeaderThenTheCookie() {
        #expect(RegistrationHeaders.registrationID(of: request([("X-SMP-APPCID", "reg-1")])) == "reg-1")
        #expect(RegistrationHeaders.registrationID(of: request([("X-SMP-APPCID", "reg-1"), ("x-smp-appcid", "reg-1")])) == "reg-1")
        #expect(RegistrationHeaders.registrationID(of: request([("Cookie", "X-SMP-APPCID=reg-2")])) == "reg-2")
        #expect(RegistrationHeaders.registrationID(of: request([("X-SMP-APPCID", ""), ("Cookie", "X-SMP-APPCID=reg-2")])) == "reg-2")
        #expect(RegistrationHeaders.registrationID(of: request([("X-SMP-APPCID", "")])) == nil)
        #expect(RegistrationHeaders.registrationID(of: request([])) == nil)
    }

    /// Two spellings Swift's `==` calls equal are two different ids: repeated, they name none.
    @Test func repeatedHeadersMustSayTheSameBytes() {
        #expect("caf\u{E9}" == "cafe\u{301}", "the premise")
        #expect(RegistrationHeaders.registrationID(of: request([("X-SMP-APPCID", "caf\u{E9}"), ("X-SMP-APPCID", "cafe\u{301}")])) == nil)
        #expect(
            RegistrationHeaders.registrationID(
                of: request([
                    ("X-SMP-APPCID", "reg-1"), ("X-SMP-APPCID", "reg-2"),
                    ("Cookie", "X-SMP-APPCID=reg-3"),
                ])) == nil)
    }

    @Test func fieldsAreCountedByName() {
        let fields = request([("X-SMP-APPCID", "a"), ("Accept", "x"), ("x-smp-appcid", "b")]).headers
        #expect(fields.count(of: RegistrationHeaders.registration) == 2)
        #expect(fields.count(of: .accept) == 1)
        #expect(fields.count(of: .cookie) == 0)
    }
}
