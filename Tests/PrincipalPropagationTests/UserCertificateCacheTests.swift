import Foundation
import MidtierCore
import PrincipalPropagation
import Synchronization
import Testing

/// The per-user certificate cache: exact-byte keys, expiry, and the block cut-off.
@Suite struct UserCertificateCacheTests {
    final class Clock: Sendable {
        let nanoseconds = Atomic<UInt64>(1_000_000_000)
        func advance(seconds: UInt64) { nanoseconds.add(seconds * 1_000_000_000, ordering: .relaxed) }
    }

    static func certificate(_ name: String) -> UserCertificate {
        UserCertificate(certificateDER: Array(name.utf8), keyDER: [1], caCertificateDER: [2], notAfter: Date(), subject: "CN=" + name)
    }

    @Test func servesOnlyTheIdenticalUserAndRenewsBeforeExpiry() throws {
        let clock = Clock()
        let cache = UserCertificateCache<Int>(now: { clock.nanoseconds.load(ordering: .relaxed) })
        let issued = Mutex(0)
        func lookup(_ id: String) throws -> String {
            let key = UserCertificateKey(destination: "gw", user: .local(id), subject: "CN=" + id)
            let entry = try cache.entry(for: key) { () throws(UserCertificateError) in
                issued.withLock { $0 += 1 }
                return (Self.certificate(id), 0, validitySeconds: 600)
            }
            return String(decoding: entry.certificate.certificateDER, as: UTF8.self)
        }
        #expect(try lookup("é") == "é")
        // "e" + combining acute is canonically equal to "é" in Swift, but another user.
        #expect(try lookup("e\u{301}") == "e\u{301}")
        #expect(try lookup("é") == "é")
        #expect(issued.withLock { $0 } == 2)
        clock.advance(seconds: 539)
        #expect(try lookup("é") == "é")
        #expect(issued.withLock { $0 } == 2)
        // 60 s before the end (a tenth of 600 s), a new certificate is issued.
        clock.advance(seconds: 1)
        _ = try lookup("é")
        #expect(issued.withLock { $0 } == 3)
    }

    @Test func removingAUserDropsOnlyTheirs() throws {
        let cache = UserCertificateCache<Int>()
        for id in ["alice", "bob"] {
            for destination in ["gw", "s4"] {
                _ = try cache.entry(for: UserCertificateKey(destination: destination, user: .local(id), subject: id)) {
                    () throws(UserCertificateError) in
                    (Self.certificate(id), 0, validitySeconds: 600)
                }
            }
        }
        #expect(cache.remove(user: .local("alice")) == 2)
        #expect(cache.count == 2)
        cache.removeAll()
        #expect(cache.count == 0)
    }

    @Test func staysWithinItsCapacity() throws {
        let cache = UserCertificateCache<Int>(capacity: 10)
        for index in 0..<100 {
            _ = try cache.entry(for: UserCertificateKey(destination: "gw", user: .local("u\(index)"), subject: "s")) {
                () throws(UserCertificateError) in
                (Self.certificate("u"), 0, validitySeconds: 600)
            }
        }
        #expect(cache.count <= 10)
    }
}
