import Callers
import MidtierCore
import MidtierJSON
import Registrations
import Testing

/// A registration's capabilities (docs/push.md, "Capabilities"), as DeviceFields reads them
/// from a Connections body.
@Suite struct CapabilityFieldsTests {
    static func read(_ capabilities: JSON) throws -> DeviceDetails {
        try DeviceFields.read(["Capability": capabilities], existing: DeviceDetails())
    }

    static func names(_ device: DeviceDetails) -> [String] {
        let registration = Registration(id: "r", appId: "a", user: .local("u"), createdAt: 0, details: device.details)
        return DeviceFields.capabilities(of: registration).map(\.name)
    }

    /// Found by the outside attack of issue 36: names were told apart by Unicode canonical
    /// equivalence when kept and by their bytes when matched, so `é` and `e` + `◌́` became one
    /// kept capability that a push to the other spelling then missed.
    @Test func capabilitiesAreKeptByTheirBytes() throws {
        let device = try Self.read(
            [["CapabilityName": "caf\u{E9}"], ["CapabilityName": "cafe\u{301}"], ["CapabilityName": "caf\u{E9}"]])
        #expect(Self.names(device).map { Array($0.utf8) } == [Array("caf\u{E9}".utf8), Array("cafe\u{301}".utf8)])
    }

    @Test func oDataResultsAndAnEmptyListReadAsSAPWritesThem() throws {
        let wrapped = try Self.read(["results": [["Category": "push", "CapabilityName": "po"]]])
        #expect(Self.names(wrapped) == ["po"])
        let cleared = try DeviceFields.read(["Capability": []], existing: wrapped)
        #expect(cleared.details[DeviceFields.capabilitiesDetail] == nil)
        #expect(throws: (any Error).self) { try Self.read([["Category": "push"]]) }
        #expect(throws: (any Error).self) { try Self.read(.array(Array(repeating: ["CapabilityName": "x"], count: 65))) }
    }
}
