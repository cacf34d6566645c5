import Foundation
import SAMLSigning
import Testing

/// Atom registration bodies (docs/device-api.md, "Registration in Atom"): SAP's documented
/// example reads; hostile or broken entries are refused with a message naming what is wrong.
@Suite struct ODataAtomEntryTests {
    static func entry(_ properties: String, doctype: String = "") -> [UInt8] {
        let open =
            "<?xml version='1.0' encoding='utf-8'?>\(doctype)<entry xmlns=\"http://www.w3.org/2005/Atom\" "
            + "xmlns:d=\"http://schemas.microsoft.com/ado/2007/08/dataservices\" "
            + "xmlns:m=\"http://schemas.microsoft.com/ado/2007/08/dataservices/metadata\">"
        let head: String =
            "<title type=\"text\"/><updated>2014-061-15T02:23:29Z</updated><author><name/></author>"
            + "<category term=\"applications.Connection\" scheme=\"http://schemas.microsoft.com/ado/2007/08/dataservices/scheme\"/>"
        let content = "<content type=\"application/xml\"><m:properties>\(properties)</m:properties></content></entry>"
        return Array((open + head + content).utf8)
    }

    func problem(_ bytes: [UInt8]) -> String? {
        if case .failure(let problem) = ODataAtomEntry.properties(of: bytes) { return problem.message }
        return nil
    }

    @Test func sapsExampleReadsWithNullsAndText() throws {
        let body = Self.entry(
            "<d:DeviceType>iPhone</d:DeviceType><d:DeviceModel m:null=\"true\" />"
                + "<d:ApnsDeviceToken m:null=\"false\">18AA&amp;48</d:ApnsDeviceToken>")
        let properties = try ODataAtomEntry.properties(of: body).get()
        #expect(
            properties == [
                .init(name: "DeviceType", value: "iPhone"), .init(name: "DeviceModel", value: nil),
                .init(name: "ApnsDeviceToken", value: "18AA&48"),
            ])
        #expect(try ODataAtomEntry.properties(of: Self.entry("")).get().isEmpty)
    }

    /// SAP's "Create Capabilities Upon Registration" example: the capabilities come as an inline
    /// feed of the Capability navigation property; other links are not read.
    @Test func inlineFeedsAreReadByTheirNavigationProperty() throws {
        let capability =
            "<link rel=\"http://schemas.microsoft.com/ado/2007/08/dataservices/related/Capability\" type=\"application/atom+xml;type=feed\">"
            + "<m:inline><feed><entry><content type=\"application/xml\"><m:properties><d:Category>push</d:Category>"
            + "<d:CapabilityName>purchaseOrder-display</d:CapabilityName></m:properties></content></entry>"
            + "<entry><content type=\"application/xml\"><m:properties><d:CapabilityName>leave</d:CapabilityName></m:properties></content></entry>"
            + "</feed></m:inline></link><link rel=\"self\" href=\"x\"/>"
        var body = String(decoding: Self.entry("<d:FormFactor>smartphone</d:FormFactor>"), as: UTF8.self)
        body = body.replacingOccurrences(of: "<content type", with: capability + "<content type", options: [], range: body.range(of: "<content type"))
        let entry = try ODataAtomEntry.entry(of: Array(body.utf8)).get()
        #expect(entry.properties == [.init(name: "FormFactor", value: "smartphone")])
        #expect(entry.inline.map(\.navigation) == ["Capability"])
        #expect(
            entry.inline.first?.entries == [
                [.init(name: "Category", value: "push"), .init(name: "CapabilityName", value: "purchaseOrder-display")],
                [.init(name: "CapabilityName", value: "leave")],
            ])
        let many = String(repeating: "<entry><content type=\"application/xml\"><m:properties/></content></entry>", count: 65)
        var crowded = String(decoding: Self.entry(""), as: UTF8.self)
        crowded = crowded.replacingOccurrences(
            of: "<content type",
            with: "<link rel=\"\(ODataAtomEntry.relatedPrefix)Capability\"><m:inline><feed>\(many)</feed></m:inline></link><content type",
            options: [], range: crowded.range(of: "<content type"))
        guard case .failure(let problem) = ODataAtomEntry.entry(of: Array(crowded.utf8)) else {
            Issue.record("65 inline entries were read")
            return
        }
        #expect(problem.message.contains("more than 64 inline entries"))
    }

    @Test func entityAttacksAreRefusedUnexpanded() {
        let external = problem(
            Self.entry(
                "<d:DeviceModel>&x;</d:DeviceModel>",
                doctype: "<!DOCTYPE entry [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"))
        #expect(external?.contains("DOCTYPE") == true || external?.contains("well-formed") == true)
        #expect(external?.contains("root:") == false)
        var laughs = "<!DOCTYPE entry [<!ENTITY a \"aaaaaaaaaa\">"
        for level in 1...9 {
            let name = Character(Unicode.Scalar(UInt8(97 + level)))
            let previous = Character(Unicode.Scalar(UInt8(96 + level)))
            laughs += "<!ENTITY \(name) \"" + String(repeating: "&\(previous);", count: 10) + "\">"
        }
        laughs += "]>"
        let refused = problem(Self.entry("<d:DeviceModel>&j;</d:DeviceModel>", doctype: laughs))
        #expect(refused != nil)
        #expect(refused?.contains("aaaaaaaaaa") == false)
    }

    @Test func brokenEntriesNameWhatIsWrong() {
        #expect(problem(Array("<entry xmlns='http://www.w3.org/2005/Atom'><content>".utf8))?.contains("not well-formed") == true)
        #expect(
            problem(Array("<entry xmlns='http://www.w3.org/2005/Atom'><content type='application/xml'/></entry>".utf8))?
                .contains("no m:properties") == true)
        #expect(problem(Array("<feed xmlns='http://www.w3.org/2005/Atom'/>".utf8))?.contains("not an Atom entry") == true)
        #expect(problem(Self.entry("<d:DeviceType>a</d:DeviceType><d:DeviceType>b</d:DeviceType>"))?.contains("more than once") == true)
        #expect(problem(Self.entry("<d:DeviceType><d:x/></d:DeviceType>"))?.contains("holds elements") == true)
        #expect(problem(Self.entry("<DeviceType xmlns=''>a</DeviceType>"))?.contains("not in the OData data namespace") == true)
        #expect(problem(Self.entry("<d:DeviceType m:null='maybe'/>"))?.contains("m:null") == true)
        #expect(problem([])?.contains("empty") == true)
    }
}
