import MidtierCore
import Testing

/// The wire formats of time, one codec each: the exact text written, and read back.
@Suite struct TimeFormatsTests {
    @Test func iso8601InUTCToTheSecond() {
        #expect(ISO8601Time.format(milliseconds: 1_800_000_000_000) == "2027-01-15T08:00:00Z")
        #expect(ISO8601Time.format(milliseconds: 1_800_000_000_999) == "2027-01-15T08:00:00Z", "a fraction is dropped")
        #expect(ISO8601Time.format(milliseconds: 0) == "1970-01-01T00:00:00Z")
        #expect(ISO8601Time.parse("2027-01-15T08:00:00Z") == 1_800_000_000_000)
        #expect(ISO8601Time.parse("2027-01-15T09:00:00+01:00") == 1_800_000_000_000)
        #expect(ISO8601Time.parse("2027-01-15T08:00:00.250Z") == 1_800_000_000_250)
        #expect(ISO8601Time.parse("2027-01-15T08:00:00") == nil, "no zone")
        #expect(ISO8601Time.parse("yesterday") == nil)
        for milliseconds: Int64 in [0, 1_764_064_800_000, 1_800_000_000_000] {
            #expect(ISO8601Time.parse(ISO8601Time.format(milliseconds: milliseconds)) == milliseconds)
        }
    }

    @Test func odataDateTimeInJSONAndXML() {
        #expect(ODataTime.json(milliseconds: 1_764_064_800_000) == "/Date(1764064800000)/")
        #expect(ODataTime.json(milliseconds: 1_764_064_800_123) == "/Date(1764064800123)/")
        #expect(ODataTime.xml(milliseconds: 1_764_064_800_000) == "2025-11-25T10:00:00")
        #expect(ODataTime.xml(milliseconds: 1_764_064_800_999) == "2025-11-25T10:00:00")
        for milliseconds: Int64 in [0, 1_764_064_800_123, -86_400_000] {
            #expect(ODataTime.parseJSON(ODataTime.json(milliseconds: milliseconds)) == milliseconds)
        }
        #expect(ODataTime.parseXML(ODataTime.xml(milliseconds: 1_764_064_800_000)) == 1_764_064_800_000)
        #expect(ODataTime.parseJSON("/Date(1764064800000+0000)/") == nil)
        #expect(ODataTime.parseJSON("/Date()/") == nil)
        #expect(ODataTime.parseXML("2025-11-25T10:00:00Z") == nil)
    }

    @Test func httpDates() {
        #expect(HTTPTime.format(seconds: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPTime.format(seconds: 1_800_000_000) == "Fri, 15 Jan 2027 08:00:00 GMT")
        #expect(HTTPTime.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPTime.parse("Wed, 21 Oct 2015 07:28:00 GMT") == 1_445_412_480)
        #expect(HTTPTime.parse("Wed, 21-Oct-2015 07:28:00 GMT") == 1_445_412_480)
        #expect(HTTPTime.parse("Wednesday, 21-Oct-15 07:28:00 GMT") == 1_445_412_480)
        #expect(HTTPTime.parse("yesterday") == nil)
        #expect(HTTPTime.parse("Wed, 21 Oct 2015 07:28:00 CET") == nil)
        for seconds in [0, 784_111_777, 1_800_000_000] {
            #expect(HTTPTime.parse(HTTPTime.format(seconds: seconds)) == Int64(seconds))
        }
    }
}
