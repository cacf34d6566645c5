package import Foundation

// The wire formats of time, each written (and read) by one function here; times inside Midtier
// are milliseconds since 1970 (``WallClock``). SAML's `xs:dateTime` is SAMLSigning's own
// (`XMLTime`), and the pages' times for people are WebPages' (`Pages.time`).

/// RFC 3339 (ISO 8601) in UTC to the second, `2026-11-25T23:23:33Z`: the admin API's times, Atom's
/// `updated`, the JSON log's `time`. A fraction of a second is dropped.
package enum ISO8601Time {
    package static func format(milliseconds: Int64) -> String {
        format(Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    package static func format(_ date: Date) -> String { date.formatted(.iso8601) }

    /// Milliseconds since 1970 of an ISO 8601 date and time with a zone (`Z` or `±hh:mm`, a
    /// fraction allowed); nil for anything else.
    package static func parse(_ text: String) -> Int64? {
        guard let date = try? Date(text, strategy: .iso8601) else { return nil }
        return Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}

/// OData v2's `Edm.DateTime` (UTC; docs/device-api.md, "Onboarding").
package enum ODataTime {
    /// In JSON: `/Date(1764064800000)/`, milliseconds since 1970.
    package static func json(milliseconds: Int64) -> String { "/Date(\(milliseconds))/" }

    /// The milliseconds of a JSON `/Date(…)/` without an offset; nil for anything else.
    package static func parseJSON(_ text: String) -> Int64? {
        guard text.hasPrefix("/Date("), text.hasSuffix(")/") else { return nil }
        let digits = text.dropFirst(6).dropLast(2)
        guard digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "-") }) else { return nil }
        return Int64(digits)
    }

    /// In Atom and XML: `2026-11-25T10:00:00`, ISO 8601 without the zone, to the second.
    package static func xml(milliseconds: Int64) -> String { String(ISO8601Time.format(milliseconds: milliseconds).dropLast()) }

    /// The milliseconds of an XML `Edm.DateTime` as ``xml(milliseconds:)`` writes it (UTC);
    /// nil for anything else.
    package static func parseXML(_ text: String) -> Int64? {
        guard !text.hasSuffix("Z") else { return nil }
        return ISO8601Time.parse(text + "Z")
    }
}

/// HTTP dates (RFC 9110 §5.6.7): the `Date` header's IMF-fixdate, and the forms cookies'
/// `Expires` come in.
package enum HTTPTime {
    static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `seconds` since 1970 as an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
    package static func format(seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// Seconds since 1970 of an HTTP date as cookies write it (`Wed, 21 Oct 2015 07:28:00 GMT`,
    /// `Wed, 21-Oct-2015 07:28:00 GMT`, `Wednesday, 21-Oct-15 07:28:00 GMT`); nil otherwise.
    package static func parse(_ text: String) -> Int64? {
        guard let comma = text.firstIndex(of: ",") else { return nil }
        let fields = text[text.index(after: comma)...].split(whereSeparator: { $0 == " " || $0 == "-" })
        guard fields.count == 5, fields[4].uppercased() == "GMT", let day = Int32(fields[0]),
            let month = months.firstIndex(where: { $0.lowercased() == fields[1].lowercased() }), var year = Int32(fields[2])
        else { return nil }
        if year < 100 { year += year < 70 ? 2000 : 1900 }
        let clock = fields[3].split(separator: ":").compactMap { Int32($0) }
        guard clock.count == 3, (1...31).contains(day), clock[0] < 24, clock[1] < 60, clock[2] < 61 else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = Int32(month)
        parts.tm_mday = day
        parts.tm_hour = clock[0]
        parts.tm_min = clock[1]
        parts.tm_sec = clock[2]
        return Int64(timegm(&parts))
    }
}
