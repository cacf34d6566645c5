import Dispatch
package import Foundation
package import MidtierCore
import Synchronization

/// What a user's certificate is issued for: the destination, the user (realm and id, exact
/// bytes) and the subject it names. A certificate serves only the identical key.
package struct UserCertificateKey: PerUserKey, Sendable {
    package var destination: ExactString
    package var user: UserIdentity
    package var subject: ExactString

    package init(destination: String, user: UserIdentity, subject: String) {
        self.destination = ExactString(destination)
        self.user = user
        self.subject = ExactString(subject)
    }
}

/// The users' certificates, in memory only (docs/identity.md, "Back-end tokens and
/// certificates"), each with what was made from it once (`Extra`: the TLS context of
/// `mutualTLS`).
///
/// - A certificate is used until shortly before it expires: a tenth of its validity before,
///   at most a minute; then a new one is issued.
/// - `remove(user:)` drops a user's certificates at once (block, purge); a reload drops all.
/// - At most `capacity` keys: a new key in a full cache lets go of an expired certificate or
///   one not used lately, a bounded look each time (a CLOCK cache, ``PerUserClockCache``).
///
/// Issuing is quick (a P-256 key and one signature) and is not shared between concurrent
/// first calls: each may issue its own, and the last one stays.
package final class UserCertificateCache<Extra: Sendable>: PerUserCache {
    package struct Entry: Sendable {
        package let certificate: UserCertificate
        package let extra: Extra
        /// Monotonic nanoseconds after which the entry is no longer used.
        let usableUntil: UInt64
    }

    /// The entries, with each user's keys, so that a block drops a user's certificates without
    /// looking at everyone's.
    private let entries: Mutex<PerUserClockCache<UserCertificateKey, Entry>>
    private let now: @Sendable () -> UInt64

    package init(capacity: Int = 100_000, now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        entries = Mutex(PerUserClockCache(capacity: capacity))
        self.now = now
    }

    package var count: Int { entries.withLock { $0.count } }

    /// The usable entry for `key`, or a new one from `issue` (which returns the certificate
    /// and its validity in seconds).
    package func entry(
        for key: UserCertificateKey,
        issue: () throws(UserCertificateError) -> (UserCertificate, Extra, validitySeconds: Int)
    ) throws(UserCertificateError) -> Entry {
        let now = self.now()
        let found: Entry? = entries.withLock { entries in
            guard let entry = entries.value(for: key), now < entry.usableUntil else { return nil }
            return entry
        }
        if let found { return found }
        let (certificate, extra, validity) = try issue()
        let lifetime = UInt64(max(0, validity)) * 1_000_000_000
        let margin = min(lifetime / 10, 60 * 1_000_000_000)
        let entry = Entry(certificate: certificate, extra: extra, usableUntil: now + lifetime - margin)
        entries.withLock { entries in
            entries.set(entry, for: key) { now >= $0.usableUntil ? .now : .ifUnused }
        }
        return entry
    }

    /// Drops every certificate of `user` (all destinations).
    @discardableResult
    package func remove(user: UserIdentity) -> Int {
        entries.withLock { $0.remove(user: user) }
    }

    /// Drops every certificate (configuration reload).
    package func removeAll() {
        entries.withLock { $0.removeAll() }
    }
}
