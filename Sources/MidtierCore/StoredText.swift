/// Text Midtier keeps in its store — a device's registration fields, a user id from a JWT —
/// has no control characters (docs/identity.md, "Stored text"): PostgreSQL cannot store a NUL
/// at all, and a line break or an escape sequence in a log line, an audit entry or a console
/// page is never what a device meant to send. Checked where the text comes in, so the answer
/// is a refusal naming the field on every store.
package enum StoredText {
    /// Whether `text` has a control character: C0 (NUL, tab, line breaks, ESC …), DEL or C1
    /// (Unicode's general category Cc).
    package static func hasControlCharacters(_ text: String) -> Bool {
        // Printable ASCII needs no look-up in the Unicode tables.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return false }
        return text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}
