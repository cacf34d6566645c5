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
        // "e" + combining acute is canonically equal to "é" in Swift, but another user.
        for id in ["alice", "bob", "é", "e\u{301}"] {
            for destination in ["gw", "s4"] {
                _ = try cache.entry(for: UserCertificateKey(destination: destination, user: .local(id), subject: id)) {
                    () throws(UserCertificateError) in
                    (Self.certificate(id), 0, validitySeconds: 600)
                }
            }
        }
        #expect(cache.remove(user: .local("alice")) == 2)
        #expect(cache.count == 6)
        #expect(cache.remove(user: .local("é")) == 2)
        #expect(cache.remove(user: .local("é")) == 0)
        #expect(cache.count == 4)
        // The other spelling's certificates stayed: served without issuing, its own bytes.
        let combining = UserCertificateKey(destination: "gw", user: .local("e\u{301}"), subject: "e\u{301}")
        let kept = try cache.entry(for: combining) { () throws(UserCertificateError) in throw UserCertificateError("issued again") }
        #expect(kept.certificate.certificateDER == Array("e\u{301}".utf8))
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

    /// A full cache lets go of certificates nobody used lately and keeps those in use; a user's
    /// removal then drops exactly the certificates they still have.
    @Test func aFullCacheKeepsTheCertificatesInUseAndItsIndexExact() throws {
        let cache = UserCertificateCache<Int>(capacity: 20)
        let issued = Mutex(0)
        func lookup(_ id: String, _ destination: String = "gw") throws {
            _ = try cache.entry(for: UserCertificateKey(destination: destination, user: .local(id), subject: id)) {
                () throws(UserCertificateError) in
                issued.withLock { $0 += 1 }
                return (Self.certificate(id), 0, validitySeconds: 600)
            }
        }
        for hot in 0..<5 { try lookup("hot\(hot)") }
        for cold in 0..<300 {
            for hot in 0..<5 { try lookup("hot\(hot)") }
            try lookup("cold\(cold % 60)", "d\(cold / 60)")
            #expect(cache.count <= 20)
        }
        #expect(issued.withLock { $0 } == 305, "the certificates in use were never issued again")
        var total = cache.count
        for id in (0..<5).map({ "hot\($0)" }) + (0..<60).map({ "cold\($0)" }) {
            let removed = cache.remove(user: .local(id))
            total -= removed
            #expect(cache.count == total)
        }
        #expect(cache.count == 0, "every entry was found through its user")
    }

    /// An expired certificate goes even when used lately; usable certificates in use stay.
    @Test func expiredCertificatesGoBeforeCertificatesInUse() throws {
        let clock = Clock()
        let cache = UserCertificateCache<Int>(capacity: 10, now: { clock.nanoseconds.load(ordering: .relaxed) })
        let issued = Mutex(0)
        func lookup(_ id: String, validitySeconds: Int) throws {
            _ = try cache.entry(for: UserCertificateKey(destination: "gw", user: .local(id), subject: id)) {
                () throws(UserCertificateError) in
                issued.withLock { $0 += 1 }
                return (Self.certificate(id), 0, validitySeconds: validitySeconds)
            }
        }
        for index in 0..<5 { try lookup("long\(index)", validitySeconds: 36_000) }
        for index in 0..<5 { try lookup("short\(index)", validitySeconds: 600) }
        for index in 0..<5 { try lookup("short\(index)", validitySeconds: 600) }
        clock.advance(seconds: 1200)
        for index in 0..<5 { try lookup("long\(index)", validitySeconds: 36_000) }
        #expect(issued.withLock { $0 } == 10)
        for index in 0..<5 { try lookup("new\(index)", validitySeconds: 36_000) }
        #expect(cache.count == 10)
        for index in 0..<5 { try lookup("long\(index)", validitySeconds: 36_000) }
        #expect(issued.withLock { $0 } == 15, "the usable certificates stayed, the expired ones made room")
    }
}
