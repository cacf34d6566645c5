import Foundation
import MidtierCore
import MidtierStore
import MidtierTestSupport
import Synchronization
import Testing

/// The memory cache in front of the store: what it answers itself, and when it asks the store
/// again (docs/identity.md, "Registration ids").
@Suite(.timeLimit(.minutes(10))) struct CachedStateStoreTests {
    static func registration(_ id: String) -> Registration {
        Registration(id: id, appId: "demo", user: .local("alice"), deviceType: "iPad", createdAt: 1_000)
    }

    /// An unknown id costs what a known one does: after the first miss, memory answers. (A
    /// registration id's existence must not show in the time an answer takes.)
    @Test func aMissedIdIsAnsweredFromMemoryTheSecondTime() async throws {
        try await withTestStore(.sqlite) { test in
            let counting = CountingStore(try await test.open(cached: false))
            let cache = CachedStateStore(base: counting)
            #expect(try await cache.standing(ofRegistration: "nobody") == nil)
            #expect(try await cache.standing(ofRegistration: "nobody") == nil)
            #expect(counting.registrationReads == 1, "two calls with one unknown id: one store read")

            // Known ids too: one read, then memory.
            #expect(try await cache.insert(Self.registration("known"), maximumPerUser: nil, audit: nil) == .inserted)
            let before = counting.registrationReads
            #expect(try await cache.standing(ofRegistration: "known")?.id == "known")
            #expect(counting.registrationReads == before, "a registration made here is in memory at once")
        }
    }

    /// A registration made on this instance after its id was missed is found at once; one made
    /// by another instance is found once the change feed made memory forget the miss.
    @Test func aRegistrationMadeAfterAMissIsFound() async throws {
        try await withTestStore(.sqlite) { test in
            let cache = CachedStateStore(base: try await test.open(cached: false))
            #expect(try await cache.registration(id: "r1") == nil)
            #expect(try await cache.insert(Self.registration("r1"), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await cache.registration(id: "r1")?.id == "r1", "made here: found at once")
            #expect(try await cache.standing(ofRegistration: "r1")?.id == "r1")

            // Another instance (a second store on the same data) makes r2 after this one missed it.
            #expect(try await cache.standing(ofRegistration: "r2") == nil)
            let other = try await test.open(cached: true)
            #expect(try await other.insert(Self.registration("r2"), maximumPerUser: nil, audit: nil) == .inserted)
            cache.forget(missOf: "r2")  // what the change feed does with the creation
            #expect(try await cache.standing(ofRegistration: "r2")?.id == "r2")
            // Everything forgotten (changes missed): misses too.
            #expect(try await cache.standing(ofRegistration: "r3") == nil)
            #expect(try await other.insert(Self.registration("r3"), maximumPerUser: nil, audit: nil) == .inserted)
            cache.forgetAll()
            #expect(try await cache.standing(ofRegistration: "r3")?.id == "r3")
        }
    }

    /// A miss read while a write happened is not remembered (it may predate the write).
    @Test func aMissRacingAWriteIsNotRemembered() async throws {
        try await withTestStore(.sqlite) { test in
            let counting = CountingStore(try await test.open(cached: false))
            let cache = CachedStateStore(base: counting)
            #expect(try await cache.standing(ofRegistration: "r1") == nil)
            cache.forget(registration: "r1")
            #expect(try await cache.standing(ofRegistration: "r1") == nil)
            #expect(counting.registrationReads == 2, "forgotten: read again")
        }
    }

    /// A flood of random ids does not grow memory past its bound: the misses memory keeps stay
    /// at most `unknownCapacity`.
    @Test func missesKeptAreBounded() async throws {
        try await withTestStore(.sqlite) { test in
            let counting = CountingStore(try await test.open(cached: false))
            let cache = CachedStateStore(base: counting, capacity: MemoryCacheSettings(unknownIds: 10 * CachedStateStore.shardCount))
            for n in 0..<1000 {
                #expect(try await cache.standing(ofRegistration: "random-\(n)") == nil)
                #expect(cache.unknownCount <= 10 * CachedStateStore.shardCount)
            }
            #expect(cache.unknownCount >= 100, "full shards stay full: entries make room one at a time")
            #expect(counting.registrationReads == 1000)
            // The newest miss is still kept.
            #expect(try await cache.standing(ofRegistration: "random-999") == nil)
            #expect(counting.registrationReads == 1000)
        }
    }
}

/// The memory cache at a size where it fills: 20 000 registrations through a cache of 2 000
/// (the scale run with a million is `make bench-scale`, docs/benchmarks.md).
@Suite(.timeLimit(.minutes(10))) struct CachedStateStoreEvictionTests {
    static let registrations = 20_000
    static let capacity = 2_000

    /// A cache that fills lets go of entries one at a time — it never empties — and the
    /// registrations read again and again stay in memory while the others stream through.
    @Test func aFullCacheKeepsWhatIsUsedAndNeverEmpties() async throws {
        try await withTestStore(.sqlite) { test in
            let base = try await test.open(cached: false)
            let made = (0..<Self.registrations).map { n in
                Registration(id: "reg-\(n)", appId: "demo", user: .local("user-\(n % 500)"), createdAt: 1_000)
            }
            let sqlite = try #require(base as? SQLiteStore)
            #expect(try await sqlite.importRegistrations(made) == Self.registrations)
            let counting = CountingStore(base)
            let cache = CachedStateStore(base: counting, capacity: MemoryCacheSettings(registrations: Self.capacity, users: Self.capacity))
            let hot = (0..<200).map { "reg-\($0)" }
            for id in hot { #expect(try await cache.standing(ofRegistration: id)?.id == id) }

            var smallest = Int.max
            for n in 200..<Self.registrations {
                #expect(try await cache.standing(ofRegistration: "reg-\(n)")?.id == "reg-\(n)")
                if n % 10 == 0 {
                    let before = counting.registrationReads
                    for id in hot { #expect(try await cache.standing(ofRegistration: id)?.id == id) }
                    #expect(counting.registrationReads == before, "after \(n) registrations: the hot ones came from memory")
                }
                let kept = cache.registrationCount
                #expect(kept <= Self.capacity + CachedStateStore.shardCount)
                if n >= 4 * Self.capacity { smallest = min(smallest, kept) }
            }
            #expect(smallest >= Self.capacity - CachedStateStore.shardCount, "once full, memory stays full: nothing empties a map")
        }
    }

    /// Many calls at once on a full cache: each answers with its own registration.
    @Test func concurrentCallsOnAFullCacheGetTheirOwnRegistration() async throws {
        try await withTestStore(.sqlite) { test in
            let base = try await test.open(cached: false)
            for n in 0..<2_000 {
                let registration = Registration(id: "reg-\(n)", appId: "demo", user: .local("user-\(n)"), createdAt: 1_000)
                #expect(try await base.insert(registration, maximumPerUser: nil, audit: nil) == .inserted)
            }
            let cache = CachedStateStore(base: base, capacity: MemoryCacheSettings(registrations: 256, unknownIds: 64, users: 256))
            let wrong = try await withThrowingTaskGroup(of: Int.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var wrong = 0
                        for step in 0..<1_000 {
                            let n = (worker * 7_919 + step * 104_729) % 2_500
                            let standing = try await cache.standing(ofRegistration: "reg-\(n)")
                            if n < 2_000 {
                                if standing?.id != "reg-\(n)" || standing?.user != .local("user-\(n)") { wrong += 1 }
                            } else if standing != nil {
                                wrong += 1
                            }
                        }
                        return wrong
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(wrong == 0)
            #expect(cache.registrationCount <= 256 + CachedStateStore.shardCount)
        }
    }
}
