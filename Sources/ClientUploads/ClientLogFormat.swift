import Foundation
import MidtierCore
package import MidtierStore

/// SAP's client log format (docs/device-api.md, "Client logs and usage"): one entry per line,
/// `#Date time#Severity#CorrelationId#Source#Location#Message#`.
///
/// - `Date time` is `YYYY-MM-DDThh:mm:ss.sTZD` (`2014-07-01T17:16:08.637+02:00`); the fraction
///   may be left out or have any number of digits, the zone is `Z` or `±hh:mm` (or `±hhmm`).
/// - `Severity` is DEBUG, INFO, WARN, ERROR or FATAL, in any case (`WARNING` reads as WARN).
/// - `CorrelationId` may be empty; it, `Source` and `Location` have no control characters.
/// - The message is everything after the fifth field up to the entry's closing `#`; the
///   client writes a `#` inside it as `\#`, read as `#` (an unescaped one is kept as is).
/// - A line that does not start with `#` continues the message of the entry before it (a stack
///   trace, say), joined with a line feed; before the first entry it is an error. Empty lines
///   before the first entry and at the end of an entry are dropped. Lines end in LF or CRLF.
/// - A message may hold line feeds and tabs, no other control characters.
package enum ClientLogFormat {
    /// The entries of one log file, numbered from `sequence`, for the upload `upload`; at most
    /// `limit` of them. Errors name the line (from 1) and what is wrong with it.
    package static func entries(
        of bytes: [UInt8], upload: String, startingAt sequence: Int = 0,
        limit: Int
    ) throws(ClientUploadError) -> [ClientLogEntry] {
        var entries: [ClientLogEntry] = []
        var record: [UInt8] = []
        var recordLine = 0
        var line = 0

        func finish() throws(ClientUploadError) {
            guard recordLine > 0 else { return }
            while record.last == UInt8(ascii: "\n") { record.removeLast() }
            guard entries.count < limit else {
                throw .tooLarge("the log has more than \(limit) entries (line \(recordLine))")
            }
            entries.append(try entry(record, line: recordLine, upload: upload, sequence: sequence + entries.count))
            record.removeAll(keepingCapacity: true)
            recordLine = 0
        }

        var start = bytes.startIndex
        while start != bytes.endIndex {
            line += 1
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            var text = bytes[start..<end]
            start = end == bytes.endIndex ? end : bytes.index(after: end)
            if text.last == UInt8(ascii: "\r") { text = text.dropLast() }
            if text.first == UInt8(ascii: "#") {
                try finish()
                record.append(contentsOf: text)
                recordLine = line
            } else if recordLine > 0 {
                record.append(UInt8(ascii: "\n"))
                record.append(contentsOf: text)
            } else if !text.isEmpty {
                throw .invalid("line \(line) does not start with # (an entry is #Date time#Severity#CorrelationId#Source#Location#Message#)")
            }
        }
        try finish()
        return entries
    }

    /// One entry from its text (its first line and any continuation lines).
    static func entry(_ record: [UInt8], line: Int, upload: String, sequence: Int) throws(ClientUploadError) -> ClientLogEntry {
        guard let text = String(validating: record, as: UTF8.self) else {
            throw .invalid("line \(line) is not UTF-8 text")
        }
        // The first five fields, each closed by an unescaped #.
        var fields: [String] = []
        var rest = Substring(text).dropFirst()
        while fields.count < 5 {
            guard let close = unescapedHash(in: rest) else {
                throw .invalid(
                    "line \(line) has \(fields.count) of the fields before the message (#Date time#Severity#CorrelationId#Source#Location#Message#)")
            }
            fields.append(unescaped(rest[..<close]))
            rest = rest[rest.index(after: close)...]
        }
        guard rest.last == "#" else { throw .invalid("line \(line): the entry does not end with #") }
        let message = unescaped(rest.dropLast())
        guard let time = time(fields[0]) else {
            throw .invalid("line \(line): the date time is not YYYY-MM-DDThh:mm:ss.sTZD (such as 2014-07-01T17:16:08.637+02:00)")
        }
        guard let severity = severity(fields[1]) else {
            throw .invalid("line \(line): the severity is not DEBUG, INFO, WARN, ERROR or FATAL")
        }
        for (name, value) in [("correlation id", fields[2]), ("source", fields[3]), ("location", fields[4])]
        where StoredText.hasControlCharacters(value) {
            throw .invalid("line \(line): the \(name) has a control character")
        }
        let withoutBreaks = message.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\t", with: " ")
        guard !StoredText.hasControlCharacters(withoutBreaks) else {
            throw .invalid("line \(line): the message has a control character other than a line feed or a tab")
        }
        return ClientLogEntry(
            upload: upload, sequence: sequence, time: time, severity: severity, correlationId: fields[2],
            source: fields[3], location: fields[4], message: message)
    }

    /// The first `#` in `text` that no backslash escapes.
    static func unescapedHash(in text: Substring) -> Substring.Index? {
        var index = text.startIndex
        var escaped = false
        while index != text.endIndex {
            let character = text[index]
            if character == "#" && !escaped { return index }
            escaped = character == "\\" && !escaped
            index = text.index(after: index)
        }
        return nil
    }

    /// `text` with each `\#` read as `#`.
    static func unescaped(_ text: Substring) -> String {
        text.contains("\\#") ? text.replacingOccurrences(of: "\\#", with: "#") : String(text)
    }

    static func severity(_ text: String) -> ClientLogSeverity? {
        let upper = text.uppercased()
        return upper == "WARNING" ? .warn : ClientLogSeverity(rawValue: upper)
    }

    /// Milliseconds since 1970 of `YYYY-MM-DDThh:mm:ss[.s…](Z|±hh:mm|±hhmm)`; nil when it is
    /// not one or names no real time.
    static func time(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var value = 0
            for byte in b[from..<(from + count)] {
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
            let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
            let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2)
        else { return nil }
        var index = 19
        var milliseconds = 0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            var digits = 0
            while index < b.count, b[index] >= 0x30 && b[index] <= 0x39 {
                if digits < 3 { milliseconds = milliseconds * 10 + Int(b[index] - 0x30) }
                digits += 1
                index += 1
            }
            guard digits > 0, digits <= 9 else { return nil }
            var scale = digits
            while scale < 3 { milliseconds *= 10; scale += 1 }
        }
        guard index < b.count else { return nil }
        var offsetMinutes = 0
        if b[index] == UInt8(ascii: "Z") || b[index] == UInt8(ascii: "z") {
            guard index + 1 == b.count else { return nil }
        } else if b[index] == UInt8(ascii: "+") || b[index] == UInt8(ascii: "-") {
            let sign = b[index] == UInt8(ascii: "+") ? 1 : -1
            let zone: (Int, Int)?
            if b.count == index + 6, b[index + 3] == UInt8(ascii: ":"), let h = number(index + 1, 2), let m = number(index + 4, 2) {
                zone = (h, m)
            } else if b.count == index + 5, let h = number(index + 1, 2), let m = number(index + 3, 2) {
                zone = (h, m)
            } else {
                zone = nil
            }
            guard let (h, m) = zone, h <= 23, m <= 59 else { return nil }
            offsetMinutes = sign * (h * 60 + m)
        } else {
            return nil
        }
        guard year >= 1970, (1...12).contains(month), day >= 1, day <= daysIn(month, year), hour <= 23, minute <= 59, second <= 60 else {
            return nil
        }
        let days = daysSince1970(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
        return seconds * 1000 + Int64(milliseconds)
    }

    static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`).
    static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
