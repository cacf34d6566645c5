package import DeviceAuthentication
import Dispatch
import NIOPosix
import Synchronization

/// Checks `Authorization: Bearer <admin token>` against `adminTokenHashes` (bcrypt, from
/// `midtier hash-secret`). Every hash is tried, whatever matches first, so the answer takes as
/// long for a near miss as for garbage; a verified token is remembered for five minutes under
/// a keyed digest (never the token), so bcrypt is not paid per admin request. As for device
/// sign-ins, failures are throttled per client address and verifications wait in a bounded
/// queue (docs/identity.md); a remembered token is neither throttled nor queued.
package final class AdminAuthenticator: Sendable {
    /// Why an admin request was not authenticated.
    package enum Failure: Error, Sendable, Equatable {
        case invalid
        case throttled(retryAfterSeconds: Int)
        case busy(retryAfterSeconds: Int)
    }

    private struct Remembered {
        let actor: String
        let expiresAt: UInt64
        /// The hash list it was verified against: a reload that changes the list forgets it.
        let hashes: [String]
    }

    private let digester = KeyedDigester()
    private let remembered = Mutex<[CredentialDigest: Remembered]>([:])
    private let hashes: @Sendable () -> [String]
    private let throttle: SignInThrottle
    private let limiter: VerificationLimiter
    static let rememberNanoseconds: UInt64 = 300 * 1_000_000_000

    /// - Parameter hashes: the hashes in force now (they change on reload).
    package init(
        hashes: @escaping @Sendable () -> [String], throttle: SignInThrottle = SignInThrottle(),
        limiter: VerificationLimiter = VerificationLimiter()
    ) {
        self.hashes = hashes
        self.throttle = throttle
        self.limiter = limiter
    }

    /// The admin's audit name, `admin#<n>` for the n-th hash (from 1), or why not.
    package func authenticate(authorization: String?, client: String? = nil) async -> Result<String, Failure> {
        // The scheme name is case-insensitive (RFC 9110 §11.1).
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return .failure(.invalid) }
        return await authenticate(token: String(authorization.dropFirst("Bearer ".count)).trimmingCharacters(in: " "), client: client)
    }

    /// The admin list as it is now, for a console session to end when it changes (a token
    /// revoked, or the list reordered so that `admin#<n>` names someone else).
    package var credentialStamp: String { hashes().joined(separator: "\n") }

    /// Checks an admin token given some other way than a header (the console's sign-in form).
    package func authenticate(token: String, client: String?) async -> Result<String, Failure> {
        guard !token.isEmpty, (try? SecretHashing.check(token)) != nil else { return .failure(.invalid) }
        let current = hashes()
        guard !current.isEmpty else { return .failure(.invalid) }
        let digest = digester.digest([token])
        let now = DispatchTime.now().uptimeNanoseconds
        if let known = remembered.withLock({ $0[digest] }), now < known.expiresAt, known.hashes == current {
            return .success(known.actor)
        }
        if let seconds = throttle.retryAfter(address: client, user: nil) { return .failure(.throttled(retryAfterSeconds: seconds)) }
        let throttle = self.throttle
        enum Attempt: Sendable { case found(Int?), throttled(Int) }
        let attempt = await limiter.run { () async -> Attempt in
            // Checked again once admitted: a token that waited while the address closed costs no bcrypt.
            if let seconds = throttle.retryAfter(address: client, user: nil) { return .throttled(seconds) }
            return .found(
                (try? await NIOThreadPool.singleton.runIfActive {
                    var found: Int?
                    for (index, hash) in current.enumerated() where SecretHashing.verify(token, hash: hash) && found == nil {
                        found = index
                    }
                    return found
                }) ?? nil)
        }
        let outcome: Int?
        switch attempt {
        case nil: return .failure(.busy(retryAfterSeconds: 1))
        case .throttled(let seconds)?: return .failure(.throttled(retryAfterSeconds: seconds))
        case .found(let found)?: outcome = found
        }
        guard let match = outcome else {
            throttle.recordFailure(address: client, user: nil)
            return .failure(.invalid)
        }
        throttle.recordSuccess(address: client, user: nil)
        let actor = "admin#\(match + 1)"
        remembered.withLock { entries in
            if entries.count > 1000 { entries.removeAll() }
            entries[digest] = Remembered(actor: actor, expiresAt: now + Self.rememberNanoseconds, hashes: current)
        }
        return .success(actor)
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        guard let first = firstIndex(where: { !characters.contains($0) }),
            let last = lastIndex(where: { !characters.contains($0) })
        else { return "" }
        return String(self[first...last])
    }
}
