import DeviceAuthentication
import Dispatch
import NIOPosix
import Synchronization

/// Checks `Authorization: Bearer <admin token>` against `adminTokenHashes` (bcrypt, from
/// `midtier hash-secret`). Every hash is tried, whatever matches first, so the answer takes as
/// long for a near miss as for garbage; a verified token is remembered for five minutes under
/// a keyed digest (never the token), so bcrypt is not paid per admin request.
public final class AdminAuthenticator: Sendable {
    private struct Remembered {
        let actor: String
        let expiresAt: UInt64
        /// The hash list it was verified against: a reload that changes the list forgets it.
        let hashes: [String]
    }

    private let digester = KeyedDigester()
    private let remembered = Mutex<[CredentialDigest: Remembered]>([:])
    private let hashes: @Sendable () -> [String]
    static let rememberNanoseconds: UInt64 = 300 * 1_000_000_000

    /// - Parameter hashes: the hashes in force now (they change on reload).
    public init(hashes: @escaping @Sendable () -> [String]) {
        self.hashes = hashes
    }

    /// The admin's audit name, `admin#<n>` for the n-th hash (from 1), or nil.
    public func authenticate(authorization: String?) async -> String? {
        // The scheme name is case-insensitive (RFC 9110 §11.1).
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return nil }
        let token = String(authorization.dropFirst("Bearer ".count)).trimmingCharacters(in: " ")
        guard !token.isEmpty, token.utf8.count <= 1024 else { return nil }
        let current = hashes()
        guard !current.isEmpty else { return nil }
        let digest = digester.digest([token])
        let now = DispatchTime.now().uptimeNanoseconds
        if let known = remembered.withLock({ $0[digest] }), now < known.expiresAt, known.hashes == current {
            return known.actor
        }
        let match: Int? = (try? await NIOThreadPool.singleton.runIfActive {
            var found: Int?
            for (index, hash) in current.enumerated() where SecretHashing.verify(token, hash: hash) && found == nil {
                found = index
            }
            return found
        }) ?? nil
        guard let match else { return nil }
        let actor = "admin#\(match + 1)"
        remembered.withLock { entries in
            if entries.count > 1000 { entries.removeAll() }
            entries[digest] = Remembered(actor: actor, expiresAt: now + Self.rememberNanoseconds, hashes: current)
        }
        return actor
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        guard let first = firstIndex(where: { !characters.contains($0) }),
              let last = lastIndex(where: { !characters.contains($0) }) else { return "" }
        return String(self[first...last])
    }
}
