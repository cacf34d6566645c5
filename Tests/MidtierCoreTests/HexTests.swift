import MidtierCore
import Testing

/// Hex digits, written and read one way (``Hex``).
@Suite struct HexTests {
    @Test func bytesAndTextRoundTrip() {
        #expect(Hex.encode([0x00, 0x0F, 0xA5, 0xFF]) == "000fa5ff")
        #expect(Hex.decode("000fA5ff") == [0x00, 0x0F, 0xA5, 0xFF])
        #expect(Hex.decode("") == [])
        #expect(Hex.decode("abc") == nil, "an odd number of digits")
        #expect(Hex.decode("0g") == nil)
        #expect(Hex.decode("\u{FF10}0") == nil, "a full-width digit is not a hex digit")
        #expect(Hex.value(of: UInt8(ascii: "F")) == 15 && Hex.value(of: UInt8(ascii: "G")) == nil)
    }
}
