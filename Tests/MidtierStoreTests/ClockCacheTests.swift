import MidtierStore
import Testing

/// The CLOCK cache behind the memory cache: bounded, one entry out per insertion, the entries
/// used lately kept (docs/operations.md, "Memory").
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
}
