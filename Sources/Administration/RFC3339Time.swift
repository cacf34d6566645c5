/// An RFC 3339 date-time as JSON Schema's `date-time` format takes it, read by its bytes:
/// `2025-03-01T08:15:00Z`, `…T08:15:00.5+01:00` (`t` and `z` in lower case too), a year from 0001,
/// a day that exists in its month, hours to 23, no leap second, an offset up to ±23:59
/// (Foundation's ISO 8601 parser refuses offsets over 18 hours and takes 30 February,
/// docs/admin-api.yaml).
package enum RFC3339Time {
    /// Milliseconds since 1970 (digits of a second below the millisecond are dropped), or nil
    /// for anything else.
    package static func milliseconds(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        var position = 0
        func number(_ count: Int) -> Int? {
            guard position + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[position..<position + count] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            position += count
            return value
        }
        func expect(_ character: Unicode.Scalar) -> Bool {
            guard position < bytes.count,
                bytes[position] == UInt8(ascii: character)
                    || (character == "T" || character == "Z") && bytes[position] == UInt8(ascii: character) | 0x20
            else { return false }
            position += 1
            return true
        }
        guard let year = number(4), year >= 1, expect("-"), let month = number(2), (1...12).contains(month), expect("-"),
            let day = number(2), day >= 1, day <= daysIn(month: month, year: year), expect("T"),
            let hour = number(2), hour <= 23, expect(":"), let minute = number(2), minute <= 59, expect(":"),
            let second = number(2), second <= 59
        else { return nil }
        var milliseconds = 0
        if expect(".") {
            var digits = 0
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                if digits < 3 { milliseconds = milliseconds * 10 + Int(bytes[position] - UInt8(ascii: "0")) }
                digits += 1
                position += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 3) { milliseconds *= 10 }
        }
        var offsetMinutes = 0
        if !expect("Z") {
            let sign: Int
            if expect("+") { sign = 1 } else if expect("-") { sign = -1 } else { return nil }
            guard let hours = number(2), hours <= 23, expect(":"), let minutes = number(2), minutes <= 59 else { return nil }
            offsetMinutes = sign * (hours * 60 + minutes)
        }
        guard position == bytes.count else { return nil }
        let seconds = daysSince1970(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offsetMinutes * 60
        return Int64(seconds) * 1000 + Int64(milliseconds)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (H. Hinnant's
    /// days_from_civil).
    static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let year = month <= 2 ? year - 1 : year
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
