import ConfigurationFiles
import Foundation
import MidtierCore
import Testing

/// Destination names as SAP writes them (docs/configuration.md, "Destination names").
@Suite struct DestinationNameTests {
    /// A destination named `name` in `destinations/<file>.json`, used by the payroll app.
    private func fixture(name: String, file: String? = nil) -> Fixture {
        let fixture = Fixture()
        fixture.files["destinations/\(file ?? name).json"] = [
            ("Name", jsonString(name)), ("URL", #""http://x.example""#), ("Authentication", #""NoAuthentication""#),
        ]
        return fixture
    }

    private func jsonString(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: text, options: .fragmentsAllowed), as: UTF8.self)
    }

    @Test func aDottedNameAsSAPsAssistantWritesItLoads() throws {
        let name = "com.sap.edm.sampleservice.v2"
        let fixture = fixture(name: name)
        fixture.set("apps/com.example.payroll.json", "destinations", "[\"sf\",\"legacy\",\"\(name)\"]")
        let configuration = try fixture.load()
        #expect(configuration.destinations[name]?.name == name)
        #expect(configuration.apps["com.example.payroll"]?.destinations.contains(name) == true)
    }

    @Test(arguments: [".", "..", ".hidden", "a/b", "a%2Fb", "a\\b", "a b", "a\u{7}b", "straße", "a?b", "a;b"])
    func aNameThatIsNoPlainPathSegmentIsRefused(_ name: String) {
        let problems = fixture(name: name, file: "bad").problems()
        #expect(problems.count == 1, "\(problems.map(\.description))")
        #expect(problems.first?.key == "Name")
        #expect(problems.first?.message.contains("letters, digits, '.', '_' and '-'") == true, "\(problems.map(\.description))")
    }

    @Test(arguments: Array(ReservedPathSegments.names) + ["OData", "MobileServices"])
    func aNameOfMidtiersOwnRoutesIsRefused(_ name: String) {
        let problems = fixture(name: name).problems()
        #expect(problems.count == 1, "\(problems.map(\.description))")
        #expect(problems.first?.key == "Name")
        #expect(problems.first?.message.contains("reserved for Midtier's own routes") == true, "\(problems.map(\.description))")
    }

    /// Every first path segment of the device listener's own routes (docs/device-api.md) is reserved.
    @Test func theReservedNamesCoverMidtiersOwnRoutes() {
        for segment in ["odata", "config", "mobileservices", "healthz", "readyz", "metrics", "admin"] {
            #expect(ReservedPathSegments.names.contains(segment))
        }
    }
}
