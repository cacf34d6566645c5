import Foundation

/// `xs:dateTime` as SAML writes it, in UTC without fractions (`2026-11-21T16:50:00Z`), and as
/// it may be read (fractions, `±hh:mm` offsets): Foundation's ISO 8601, the one date codec.
enum XMLTime {
    static func format(_ date: Date) -> String { date.formatted(.iso8601) }

    /// nil for anything but an ISO 8601 date and time with a zone.
    static func parse(_ text: String) -> Date? { try? Date(text, strategy: .iso8601) }
}
