import HTTPTypes
import Hummingbird
import MidtierHTTP
import NIOCore
import Testing

@testable import DeviceAPI

/// The device API's reading of paths and requests on its own (docs/device-api.md): the
/// registration service's versions and keys, the format a client asks for, SAP's Discovery
/// Service call. The routes through the server are the other suites of this target.
@Suite struct DeviceAPIRulesTests {
    static func request(_ path: String, _ fields: [(String, String)] = []) -> Request {
        var headers = HTTPFields()
        for (name, value) in fields { headers.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        let head = HTTPRequest(method: .get, scheme: "http", authority: "m.example", path: path, headerFields: headers)
        return Request(head: head, body: RequestBody(buffer: ByteBuffer()))
    }

    @Test(arguments: [
        ("latest", true), ("v1", true), ("v2", true), ("v9999", true), ("v10000", false), ("v0", false), ("v01", false),
        ("v", false), ("V1", false), ("1", false), ("vx", false), ("", false),
    ])
    func versionsAreLatestOrVAndANumber(version: String, accepted: Bool) {
        #expect(RegistrationRoutes.isVersion(version) == accepted)
    }

    @Test func entityKeysAreReadInODataSyntax() {
        #expect(RegistrationRoutes.connectionID("Connections('abc')") == "abc")
        #expect(RegistrationRoutes.connectionID("Connections('it''s')") == "it's")
        #expect(RegistrationRoutes.connectionID("Connections('')") == nil)
        #expect(RegistrationRoutes.connectionID("Connections(abc)") == nil)
        #expect(RegistrationRoutes.connectionID("Endpoints('abc')") == nil)
        #expect(EndpointsCollection.key("Endpoints('sf')") == "sf")
        #expect(EndpointsCollection.key("Endpoints('a''b')") == "a'b")
        #expect(EndpointsCollection.key("Endpoints('')") == nil)
    }

    /// `Accept` by its quality values (RFC 9110, 12.5.1): `q=0` refuses a type, and the
    /// preferred of JSON and Atom/XML wins (JSON on a tie). Before issue 36's review,
    /// `application/json;q=0` still chose JSON: the header was searched for the text.
    @Test func acceptIsReadByItsQualityValues() {
        func preference(_ accept: String) -> Bool? { ConnectionAtom.preference(Self.request("/x", [("Accept", accept)])) }
        #expect(preference("application/json;q=0") == true)
        #expect(preference("application/json; q=0.0, application/atom+xml") == true)
        #expect(preference("application/atom+xml;q=0.5, application/json;q=0.9") == false)
        #expect(preference("application/atom+xml;q=0.9, application/json;q=0.5") == true)
        #expect(preference("application/atom+xml;q=0") == false)
        #expect(preference("application/json;q=0, application/atom+xml;q=0") == nil)
        #expect(preference("APPLICATION/JSON;Q=1") == false)
        #expect(preference("text/html, */*;q=0.8") == nil)
        #expect(preference("application/json;q=banana") == false, "a malformed q is read as 1, as the type was named")
    }

    /// `$format` decides first, then `Accept`; JSON when neither says.
    @Test func theFormatAClientAsksFor() {
        #expect(ConnectionAtom.preference(Self.request("/x")) == nil)
        #expect(ConnectionAtom.preference(Self.request("/x?$format=json", [("Accept", "application/atom+xml")])) == false)
        #expect(ConnectionAtom.preference(Self.request("/x?$format=atom")) == true)
        #expect(ConnectionAtom.preference(Self.request("/x?$format=xml")) == true)
        #expect(ConnectionAtom.preference(Self.request("/x", [("Accept", "application/atom+xml")])) == true)
        #expect(ConnectionAtom.preference(Self.request("/x", [("Accept", "application/xml, application/json")])) == false)
        #expect(ConnectionAtom.isWanted(Self.request("/x")), "a read that does not say gets Atom, OData v2's own format")
        #expect(!ConnectionAtom.isWanted(Self.request("/x", [("Accept", "application/json")])))
        #expect(ConnectionAtom.isBody(Self.request("/x", [("Content-Type", "application/atom+xml; charset=utf-8")])))
        #expect(ConnectionAtom.isBody(Self.request("/x", [("Content-Type", "Text/XML")])))
        #expect(!ConnectionAtom.isBody(Self.request("/x", [("Content-Type", "application/json")])))
    }

    @Test func theDiscoveryServiceCallInEitherOrder() throws {
        let call = try DiscoveryServiceCall.parse("getApplicationConfiguration(AppConfigID='demo:1.0',EmailAddress='a''b@example.com')")
        #expect(call.appConfigID == "demo:1.0")
        #expect(call.emailAddress == "a'b@example.com")
        let swapped = try DiscoveryServiceCall.parse("getApplicationConfiguration(EmailAddress='x@example.com',AppConfigID='demo')")
        #expect(swapped.appConfigID == "demo")
    }

    @Test(arguments: [
        ("getSomethingElse(AppConfigID='demo')", HTTPResponse.Status.notFound),
        ("getApplicationConfiguration(AppConfigID=demo)", .badRequest),
        ("getApplicationConfiguration(AppConfigID='demo)", .badRequest),
        ("getApplicationConfiguration(AppConfigID='a',AppConfigID='b')", .badRequest),
    ])
    func aMalformedDiscoveryCallSaysWhatIsWrong(segment: String, status: HTTPResponse.Status) {
        #expect(throws: Refusal.self) { try DiscoveryServiceCall.parse(segment) }
        do {
            _ = try DiscoveryServiceCall.parse(segment)
        } catch {
            #expect(error.status == status, "\(segment): \(error.message)")
        }
    }
}
