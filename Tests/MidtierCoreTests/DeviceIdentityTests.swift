import MidtierCore
import Testing

/// "The same device" (docs/identity.md): `DeviceId`s compared by their normal form.
@Suite struct DeviceIdentityTests {
    @Test(arguments: [
        "BOB-DEV-1", "bob-dev-1 ", " bob-dev-1", "\tbob-dev-1\n", "bob-dev-1\u{200B}", "bob\u{200D}-dev-1",
        "\u{FF42}\u{FF4F}\u{FF42}-dev-1", "bob-\u{00AD}dev-1", "bob-dev-1\u{FE0F}",
    ])
    func respellingsNameTheSameDevice(_ spelling: String) {
        #expect(DeviceIdentity.same(spelling, "bob-dev-1"), "\(spelling.unicodeScalars.map(\.value))")
    }

    @Test func otherIdsAreOtherDevices() {
        #expect(!DeviceIdentity.same("bob-dev-2", "bob-dev-1"))
        #expect(!DeviceIdentity.same("bob dev 1", "bob-dev-1"))
        // Composed and decomposed é are one device (NFKC), an accent-free e another.
        #expect(DeviceIdentity.same("caf\u{E9}", "cafe\u{301}"))
        #expect(!DeviceIdentity.same("caf\u{E9}", "cafe"))
    }

    @Test func onlySpacesOrInvisiblesNameNoDevice() {
        #expect(!DeviceIdentity.namesADevice(""))
        #expect(!DeviceIdentity.namesADevice("  \u{200B} "))
        #expect(DeviceIdentity.namesADevice("x"))
    }
}
