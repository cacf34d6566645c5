import Foundation

/// The EDM primitive types the sandbox's payroll service uses (a subset of OData v2's).
enum EdmType: String, Sendable {
    case string = "Edm.String"
    case boolean = "Edm.Boolean"
    case int64 = "Edm.Int64"
    case decimal = "Edm.Decimal"
    case dateTime = "Edm.DateTime"
    case dateTimeOffset = "Edm.DateTimeOffset"
}

/// One primitive value: a property of an entity or a literal in a query.
///
/// Dates are milliseconds since 1970-01-01T00:00:00 UTC, the unit of OData v2's
/// `"/Date(ms)/"` JSON form. Decimals keep their text (`"4250.00"`) so they are answered
/// exactly as stored, the way SuccessFactors sends `Edm.Decimal` as a JSON string.
enum ODataValue: Sendable, Equatable {
    case null
    case string(String)
    case boolean(Bool)
    case int64(Int64)
    case decimal(String)
    case dateTime(Int64)
    case dateTimeOffset(Int64)

    /// The number this value stands for, for numeric comparison (`Int64` and `Decimal`).
    var numericValue: Decimal? {
        switch self {
        case .int64(let number): return Decimal(number)
        case .decimal(let text): return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
        default: return nil
        }
    }

    /// The instant this value stands for (`DateTime` and `DateTimeOffset`).
    var milliseconds: Int64? {
        switch self {
        case .dateTime(let ms), .dateTimeOffset(let ms): return ms
        default: return nil
        }
    }
}

/// Calendar arithmetic in the proleptic Gregorian calendar, UTC, without `Calendar` or the
/// current date: the sandbox's data and literals never depend on the machine's settings.
enum ODataDate {
    static let millisecondsPerDay: Int64 = 86_400_000

    /// Days since 1970-01-01 for a civil date (Howard Hinnant's `days_from_civil`).
    static func days(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The civil date of a day count since 1970-01-01 (Hinnant's `civil_from_days`).
    static func civil(days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    static func isLeapYear(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Milliseconds since the epoch for a civil date and time (UTC).
    static func milliseconds(
        year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0, millisecond: Int = 0
    ) -> Int64 {
        let seconds = Int64(hour) * 3600 + Int64(minute) * 60 + Int64(second)
        return days(year: year, month: month, day: day) * millisecondsPerDay + seconds * 1000 + Int64(millisecond)
    }

    /// `2024-01-31T00:00:00` (with `.fff` when there are milliseconds), as in `datetime'…'` literals.
    static func literalText(milliseconds ms: Int64) -> String {
        let dayCount = floorDivide(ms, millisecondsPerDay)
        let msOfDay = ms - dayCount * millisecondsPerDay
        let (year, month, day) = civil(days: dayCount)
        let hour = msOfDay / 3_600_000
        let minute = (msOfDay / 60_000) % 60
        let second = (msOfDay / 1000) % 60
        let millis = msOfDay % 1000
        var text = pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2)
        text += "T" + pad(Int(hour), 2) + ":" + pad(Int(minute), 2) + ":" + pad(Int(second), 2)
        if millis != 0 { text += "." + pad(Int(millis), 3) }
        return text
    }

    /// Parses `2024-01-31`, `2024-01-31T10:15`, `2024-01-31T10:15:30`, `2024-01-31T10:15:30.250`,
    /// optionally followed by `Z` or an offset like `+02:00` (converted to UTC).
    /// Returns nil for anything else, including impossible dates like `2024-02-30`.
    static func parse(_ text: String) -> Int64? {
        var scanner = DigitScanner(Array(text.utf8))
        guard let year = scanner.number(digits: 4), scanner.take("-"),
            let month = scanner.number(digits: 2), scanner.take("-"),
            let day = scanner.number(digits: 2)
        else { return nil }
        guard (1...9999).contains(year), (1...12).contains(month),
            (1...daysInMonth(year: year, month: month)).contains(day)
        else { return nil }
        var hour = 0, minute = 0, second = 0, millisecond = 0
        if scanner.take("T") {
            guard let h = scanner.number(digits: 2), scanner.take(":"), let m = scanner.number(digits: 2)
            else { return nil }
            hour = h
            minute = m
            if scanner.take(":") {
                guard let s = scanner.number(digits: 2) else { return nil }
                second = s
                if scanner.take(".") {
                    guard let fraction = scanner.fraction() else { return nil }
                    millisecond = fraction
                }
            }
        }
        guard hour < 24, minute < 60, second < 60 else { return nil }
        var offsetMinutes = 0
        if scanner.take("Z") {
            // UTC
        } else if let sign = scanner.sign() {
            guard let h = scanner.number(digits: 2), scanner.take(":"), let m = scanner.number(digits: 2),
                h < 24, m < 60
            else { return nil }
            offsetMinutes = sign * (h * 60 + m)
        }
        guard scanner.atEnd else { return nil }
        let local = milliseconds(
            year: year, month: month, day: day, hour: hour, minute: minute, second: second, millisecond: millisecond)
        return local - Int64(offsetMinutes) * 60_000
    }

    private static func pad(_ number: Int, _ width: Int) -> String {
        let digits = String(number)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let quotient = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient
    }
}

/// Reads fixed-width ASCII numbers for `ODataDate.parse`.
private struct DigitScanner {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }

    mutating func take(_ character: Character) -> Bool {
        guard let ascii = character.asciiValue, index < bytes.count, bytes[index] == ascii else { return false }
        index += 1
        return true
    }

    mutating func number(digits: Int) -> Int? {
        guard index + digits <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[index..<(index + digits)] {
            guard byte >= 48, byte <= 57 else { return nil }
            value = value * 10 + Int(byte - 48)
        }
        index += digits
        return value
    }

    /// Fractional seconds (1 to 9 digits) as milliseconds, truncated.
    mutating func fraction() -> Int? {
        var digits: [Int] = []
        while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57, digits.count < 9 {
            digits.append(Int(bytes[index] - 48))
            index += 1
        }
        guard !digits.isEmpty else { return nil }
        let padded = Array((digits + [0, 0, 0]).prefix(3))
        return padded[0] * 100 + padded[1] * 10 + padded[2]
    }

    mutating func sign() -> Int? {
        if take("+") { return 1 }
        if take("-") { return -1 }
        return nil
    }
}

extension ODataValue {
    /// Compares two values of the same kind: strings, numbers (`Int64` and `Decimal` together),
    /// instants (`DateTime` and `DateTimeOffset` together) and booleans (false before true).
    /// nil when either is null or the kinds differ.
    static func compare(_ a: ODataValue, _ b: ODataValue) -> ComparisonResult? {
        switch (a, b) {
        case (.string(let x), .string(let y)):
            return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
        case (.boolean(let x), .boolean(let y)):
            return x == y ? .orderedSame : (!x ? .orderedAscending : .orderedDescending)
        default:
            if let x = a.milliseconds, let y = b.milliseconds {
                return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
            }
            if let x = a.numericValue, let y = b.numericValue {
                return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
            }
            return nil
        }
    }

    /// Order for sorting (`$orderby`, default key order): null first, then `compare`.
    static func sortOrder(_ a: ODataValue, _ b: ODataValue) -> ComparisonResult {
        switch (a, b) {
        case (.null, .null): return .orderedSame
        case (.null, _): return .orderedAscending
        case (_, .null): return .orderedDescending
        default: return compare(a, b) ?? .orderedSame
        }
    }
}
