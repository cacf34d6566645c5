import Crypto
package import MidtierCore

/// API keys of back-end senders (`X-API-Key`, as SAP's Notification Backend API takes them;
/// docs/push.md, "Sending"). A key is long and random (``check(_:)``), so the configuration
/// keeps its SHA-256, not a slow hash: a key is found among all the senders' at the cost of one
/// SHA-256, and compared with each in constant time.
package struct APIKeys: Sendable {
    /// The shortest key Midtier takes: 32 characters.
    package static let minimumLength = 32
    /// The longest, in bytes.
    package static let maximumBytes = 512

    private let digests: [[UInt8]?]

    /// The keys of `senders`, by position.
    package init(senders: [PushSender]) { digests = senders.map(\.apiKeyDigest) }

    /// The position of the sender whose key `key` is, if any.
    package func sender(withKey key: String) -> Int? {
        guard !key.isEmpty, key.utf8.count <= Self.maximumBytes else { return nil }
        let presented = Self.digest(key)
        var found: Int?
        for (index, digest) in digests.enumerated() {
            guard let digest else { continue }
            // Every byte of every key, whichever matches: the time tells nothing.
            var difference: UInt8 = 0
            for (a, b) in zip(digest, presented) { difference |= a ^ b }
            if difference == 0 && digest.count == presented.count && found == nil { found = index }
        }
        return found
    }

    package static func digest(_ key: String) -> [UInt8] { Array(SHA256.hash(data: Array(key.utf8))) }

    /// The configuration's text for `key`: `sha256:` and 64 lower-case hex digits.
    package static func hashText(_ key: String) -> String {
        "sha256:" + Hex.encode(digest(key))
    }

    /// Why a key is not one Midtier takes.
    package enum Problem: Error, CustomStringConvertible {
        case tooShort(Int)
        case tooLong(bytes: Int)
        case notPrintable
        package var description: String {
            switch self {
            case .tooShort(let length):
                "the API key is \(length) characters long; an API key is hashed with SHA-256, which only a long random key withstands: "
                    + "use at least \(APIKeys.minimumLength) random characters (for example `openssl rand -hex 32`)"
            case .tooLong(let bytes): "the API key is \(bytes) bytes long; at most \(APIKeys.maximumBytes)"
            case .notPrintable:
                "the API key has a character that is not visible ASCII (a space, a control character, a letter outside ASCII); use letters, digits and punctuation"
            }
        }
    }

    /// Checks that `key` is long enough for a fast hash, and that a header can carry it.
    package static func check(_ key: String) throws(Problem) {
        guard key.count >= minimumLength else { throw .tooShort(key.count) }
        guard key.utf8.count <= maximumBytes else { throw .tooLong(bytes: key.utf8.count) }
        guard key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else { throw .notPrintable }
    }
}
