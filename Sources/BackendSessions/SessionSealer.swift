import Crypto
import Foundation
import MidtierCore

/// Seals back-end sessions for the store with AES-256-GCM (swift-crypto), so a database dump
/// holds no cookie in clear (docs/configuration.md, `backendSessionKeys`).
///
/// A sealed session is `0x01 | key id (8 bytes) | nonce (12) | ciphertext | tag (16)`. The key
/// id is a digest of the key, so opening picks the key that sealed it; the first configured
/// key seals, every configured key opens (rotation). The registration id and destination are
/// authenticated with it: a sealed session copied to another registration's row does not open.
struct SessionSealer: Sendable {
    enum Failure: Error, CustomStringConvertible {
        case malformed
        /// Sealed with a key that is no longer configured.
        case unknownKey
        /// Changed, or moved from another registration's row.
        case notAuthentic

        var description: String {
            switch self {
            case .malformed: "it is not a sealed session"
            case .unknownKey: "it was sealed with a key that is no longer in backendSessionKeys"
            case .notAuthentic: "it does not authenticate (changed, or moved from another registration)"
            }
        }
    }

    private static let version: UInt8 = 1
    private static let idCount = 8

    private let keys: [(id: [UInt8], key: SymmetricKey)]

    /// nil without keys.
    init?(keys: [BackendSessionKey]) {
        guard !keys.isEmpty else { return nil }
        self.keys = keys.map { key in
            var hash = SHA256()
            hash.update(data: Array("midtier backend session key id".utf8))
            hash.update(data: key.bytes)
            return (Array(hash.finalize().prefix(Self.idCount)), SymmetricKey(data: key.bytes))
        }
    }

    func seal(_ plaintext: [UInt8], registration: String, destination: String) throws -> [UInt8] {
        let box = try AES.GCM.seal(
            plaintext, using: keys[0].key,
            authenticating: Self.context(registration: registration, destination: destination))
        guard let combined = box.combined else { throw Failure.malformed }
        return [Self.version] + keys[0].id + Array(combined)
    }

    func open(_ sealed: [UInt8], registration: String, destination: String) throws(Failure) -> [UInt8] {
        guard sealed.count > 1 + Self.idCount, sealed[0] == Self.version else { throw .malformed }
        let id = Array(sealed[1...Self.idCount])
        guard let key = keys.first(where: { $0.id == id })?.key else { throw .unknownKey }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed[(1 + Self.idCount)...])
            return Array(
                try AES.GCM.open(
                    box, using: key,
                    authenticating: Self.context(registration: registration, destination: destination)))
        } catch {
            throw .notAuthentic
        }
    }

    /// What a sealed session belongs to, length-prefixed so no two pairs read alike.
    static func context(registration: String, destination: String) -> [UInt8] {
        var bytes = Array("midtier.backend-session.v1".utf8)
        for part in [registration, destination] {
            let utf8 = Array(part.utf8)
            withUnsafeBytes(of: UInt32(utf8.count).bigEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: utf8)
        }
        return bytes
    }
}
