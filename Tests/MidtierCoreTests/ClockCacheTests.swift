import MidtierCore
import Testing

/// The CLOCK cache behind the memory cache and the token and certificate caches: bounded, one
/// entry out per insertion, the entries used lately kept (docs/operations.md, "Memory").
@Suite struct ClockCacheTests {
    @Test func aFullCacheLetsGoOfOneEntryPerInsertion() {
        var cache = ClockCache<Int, String>(capacity: 100)
        for n in 0..<100 { cache.set("\(n)", for: n) }
        #expect(cache.count == 100)
        for n in 100..<1000 {
            cache.set("\(n)", for: n)
            #expect(cache.count == 100, "never more than the capacity, never emptied")
            #expect(cache.peek(n) == "\(n)", "the entry just kept is there")
        }
    }

    @Test func entriesReadSinceTheHandPassedStay() {
        var cache = ClockCache<Int, Int>(capacity: 100)
        for n in 0..<100 { cache.set(n, for: n) }
        // A hot half, read again and again while new entries stream through.
        for round in 0..<20 {
            for hot in 0..<50 { #expect(cache.value(for: hot) == hot, "round \(round): hot entry \(hot) kept") }
            for cold in 0..<10 { cache.set(cold, for: 1000 + round * 10 + cold) }
        }
        #expect(cache.count == 100)
    }

    /// When every entry was used lately, the hand looks at `maximumSweep` slots at most and the
    /// last of them goes: an insertion's work is bounded whatever the size.
    @Test func anInsertionLooksAtABoundedNumberOfSlots() {
        var cache = ClockCache<Int, Int>(capacity: 1000, maximumSweep: 8)
        for n in 0..<1000 { cache.set(n, for: n) }
        for n in 0..<1000 { _ = cache.value(for: n) }
        cache.set(-1, for: -1)
        #expect(cache.count == 1000)
        #expect(cache.peek(7) == nil, "the eighth slot looked at made room")
        #expect((0..<7).allSatisfy { cache.peek($0) == $0 }, "the seven before it lost their mark and stayed")
        #expect((8..<1000).allSatisfy { cache.peek($0) == $0 })
    }

    @Test func removedEntriesFreeTheirSlot() {
        var cache = ClockCache<String, Int>(capacity: 3)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(3, for: "c")
        cache.remove("b")
        #expect(cache.count == 2)
        cache.set(4, for: "d")
        #expect(cache.count == 3)
        #expect(cache.peek("a") == 1 && cache.peek("c") == 3 && cache.peek("d") == 4, "the freed slot took the new entry")
        cache.update("a") { $0 += 10 }
        cache.update("zzz") { $0 += 10 }
        #expect(cache.peek("a") == 11 && cache.peek("zzz") == nil)
        cache.set(5, for: "a")
        #expect(cache.peek("a") == 5 && cache.count == 3, "a key set again replaces its value in place")
    }

    /// An expired entry goes as soon as the hand reaches it, even marked; entries that may go
    /// only when unused lose their mark and stay.
    @Test func anEntryThatMayGoNowGoesBeforeMarkedOnes() {
        var cache = ClockCache<Int, Int>(capacity: 10)
        for n in 0..<10 { cache.set(n, for: n) }
        for n in 0..<10 { _ = cache.value(for: n) }
        let expired: (Int) -> ClockCache<Int, Int>.Eviction = { $0 >= 5 ? .now : .ifUnused }
        let gone = cache.set(100, for: 100, eviction: expired)
        #expect(gone.map { $0.key } == [5], "the first expired entry from the hand made room")
        #expect((0..<5).allSatisfy { cache.peek($0) == $0 })
        #expect(cache.count == 10)
    }

    /// Entries that may never go (an exchange callers wait for) are passed by; when the hand
    /// finds nothing else, the cache holds one more than its capacity, and while it is over
    /// capacity each insertion lets go of two, so it comes back once they may go again.
    @Test func entriesThatMayNeverGoStayAndTheCacheComesBackToItsCapacity() {
        var cache = ClockCache<Int, Int>(capacity: 4, maximumSweep: 16)
        for n in 0..<4 { cache.set(n, for: n) }
        let pinned: (Int) -> ClockCache<Int, Int>.Eviction = { $0 < 4 ? .never : .ifUnused }
        #expect(cache.set(4, for: 4, eviction: pinned).isEmpty, "nothing may go")
        #expect(cache.count == 5)
        #expect(cache.set(5, for: 5, eviction: pinned).map { $0.key } == [4], "only the entry that may go went")
        #expect((0..<4).allSatisfy { cache.peek($0) == $0 }, "no pinned entry went")
        #expect(cache.count == 5)
        // Pinned no more: each insertion lets go of two until the capacity holds again.
        #expect(cache.set(6, for: 6).count == 2)
        #expect(cache.count == 4)
        for n in 7..<50 {
            #expect(cache.set(n, for: n).count == 1)
            #expect(cache.count == 4)
            #expect(cache.peek(n) == n)
        }
        cache.removeAll()
        #expect(cache.count == 0 && cache.peek(49) == nil)
        cache.set(1, for: 1)
        #expect(cache.values == [1])
    }
}
