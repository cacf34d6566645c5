import MidtierCore
import Testing

/// The CLOCK cache with each user's keys, behind the token and certificate caches: a user's
/// entries are found exactly, however entries went, and users are told apart by their bytes.
@Suite struct PerUserClockCacheTests {
    struct Key: PerUserKey {
        var user: UserIdentity
        var destination: String
    }

    static func key(_ user: String, _ destination: String) -> Key { Key(user: .local(user), destination: destination) }

    @Test func aUsersRemovalDropsExactlyTheirRemainingEntriesAfterEvictions() {
        var cache = PerUserClockCache<Key, Int>(capacity: 30)
        var value = 0
        for round in 0..<5 {
            for user in 0..<25 {
                value += 1
                cache.set(value, for: Self.key("user\(user)", "d\(round)"))
            }
        }
        #expect(cache.count == 30, "125 entries through 30 places")
        cache.remove(Self.key("user0", "d4"))
        var total = cache.count
        for user in 0..<25 {
            let kept = (0..<5).filter { cache.peek(Self.key("user\(user)", "d\($0)")) != nil }.count
            let removed = cache.remove(user: .local("user\(user)"))
            #expect(removed == kept, "user\(user): exactly the entries still kept")
            total -= removed
            #expect(cache.count == total)
        }
        #expect(cache.count == 0)
        #expect(cache.remove(user: .local("user1")) == 0)
        // The index is emptied with the entries.
        cache.set(1, for: Self.key("user1", "d0"))
        cache.removeAll()
        #expect(cache.remove(user: .local("user1")) == 0)
    }

    /// "\u{212A}im" (Kelvin sign) and "Kim" are canonically equivalent, so equal as Swift
    /// strings, but two users: neither's entry serves or goes with the other's.
    @Test func canonicallyEquivalentUserIdsAreDifferentUsers() {
        var cache = PerUserClockCache<Key, String>(capacity: 10)
        let kelvin = Key(user: .local("\u{212A}im"), destination: "gw")
        let plain = Key(user: .local("Kim"), destination: "gw")
        cache.set("kelvin", for: kelvin)
        #expect(cache.peek(plain) == nil)
        cache.set("plain", for: plain)
        #expect(cache.count == 2)
        #expect(cache.remove(user: .local("Kim")) == 1)
        #expect(cache.peek(kelvin) == "kelvin")
        #expect(cache.remove(user: .local("e\u{301}")) == 0)
        #expect(cache.remove(user: .local("\u{212A}im")) == 1)
        #expect(cache.count == 0)
    }
}
