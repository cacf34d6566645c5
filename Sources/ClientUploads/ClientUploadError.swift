/// Why an upload's body cannot be kept: `invalid` is the device's mistake (400), `tooLarge` a
/// limit it went past (413). The message names what is wrong (a line number, a field, a limit)
/// and never quotes the log's content.
package struct ClientUploadError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Kind: Sendable, Equatable {
        case invalid
        case tooLarge
    }

    package var kind: Kind
    package var message: String

    package init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    package static func invalid(_ message: String) -> Self { Self(.invalid, message) }
    package static func tooLarge(_ message: String) -> Self { Self(.tooLarge, message) }

    package var description: String { message }
}

/// How much one log upload may hold once unpacked (docs/device-api.md, "Client logs and usage").
package struct ClientLogLimits: Sendable, Equatable {
    /// The most files a zip archive or a multipart body may carry.
    package var maxFiles: Int
    /// The most bytes all the files may take together once unzipped, checked while unzipping
    /// (an archive that inflates past it is refused before it is all read).
    package var maxInflatedBytes: Int
    /// The most log entries one upload may hold.
    package var maxEntries: Int

    package init(maxFiles: Int = 100, maxInflatedBytes: Int, maxEntries: Int = 100_000) {
        self.maxFiles = maxFiles
        self.maxInflatedBytes = maxInflatedBytes
        self.maxEntries = maxEntries
    }

    /// The limits for a body of at most `maxUploadBytes`: unzipped, at most four times as much.
    package static func forUploads(of maxUploadBytes: Int) -> Self {
        let (inflated, overflow) = maxUploadBytes.multipliedReportingOverflow(by: 4)
        return Self(maxInflatedBytes: overflow ? Int.max : inflated)
    }
}
