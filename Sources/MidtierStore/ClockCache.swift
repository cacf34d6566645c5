/// A bounded map that, when full, lets go of an entry not used lately — the CLOCK (second
/// chance) scheme — and never of more than one per insertion (docs/operations.md, "Memory").
///
/// Every entry sits in a slot of a ring and has a "used" mark, set when it is read or written.
/// An insertion into a full cache moves a hand around the ring: a marked entry loses its mark
/// and stays, the first unmarked one makes room. The hand looks at no more than
/// `maximumSweep` slots per insertion; if all of them were marked, the last one looked at goes.
/// So an insertion costs a bounded amount of work whatever the size, and an entry read since
/// the hand last passed survives the next pass.
///
/// A value type: callers keep it under their own lock (CachedStateStore's shards).
package struct ClockCache<Key: Hashable, Value> {
    fileprivate struct Slot {
        var key: Key
        var value: Value
        var used: Bool
    }

    /// The ring; `nil` where an entry was removed (reused through `free`).
    private var slots: [Slot?] = []
    private var index: [Key: Int] = [:]
    private var free: [Int] = []
    private var hand = 0
    package let capacity: Int
    package let maximumSweep: Int

    /// An empty cache of at most `capacity` entries (at least 1).
    package init(capacity: Int, maximumSweep: Int = 1024) {
        self.capacity = max(1, capacity)
        self.maximumSweep = max(1, maximumSweep)
    }

    /// How many entries it holds.
    package var count: Int { index.count }

    /// The value kept for `key`, marking it used.
    package mutating func value(for key: Key) -> Value? {
        guard let position = index[key] else { return nil }
        slots[position]?.used = true
        return slots[position]?.value
    }

    /// Whether `key` is kept, marking it used.
    package mutating func contains(_ key: Key) -> Bool { value(for: key) != nil }

    /// The value kept for `key`, without marking it.
    package func peek(_ key: Key) -> Value? {
        guard let position = index[key] else { return nil }
        return slots[position]?.value
    }

    /// Keeps `value` for `key`, letting go of one entry not used lately when full.
    package mutating func set(_ value: Value, for key: Key) {
        if let position = index[key] {
            slots[position] = Slot(key: key, value: value, used: true)
            return
        }
        let position: Int
        if let reused = free.popLast() {
            position = reused
        } else if slots.count < capacity {
            slots.append(nil)
            position = slots.count - 1
        } else {
            position = victim()
            if let evicted = slots[position] { index[evicted.key] = nil }
        }
        // A new entry starts unmarked: read once more before the hand comes round, it stays.
        slots[position] = Slot(key: key, value: value, used: false)
        index[key] = position
    }

    /// Updates the value kept for `key` in place, if any, without marking it.
    package mutating func update(_ key: Key, _ change: (inout Value) -> Void) {
        guard let position = index[key], var slot = slots[position] else { return }
        change(&slot.value)
        slots[position] = slot
    }

    /// Lets go of `key`'s entry, if any.
    package mutating func remove(_ key: Key) {
        guard let position = index.removeValue(forKey: key) else { return }
        slots[position] = nil
        free.append(position)
    }

    /// The slot whose entry makes room: the first unmarked one from the hand, clearing marks
    /// on the way, at most `maximumSweep` slots on.
    private mutating func victim() -> Int {
        var looked = 0
        while true {
            let position = hand
            hand = (hand + 1) % slots.count
            looked += 1
            guard let slot = slots[position] else { return position }
            if !slot.used || looked >= maximumSweep { return position }
            slots[position]?.used = false
        }
    }
}

extension ClockCache: Sendable where Key: Sendable, Value: Sendable {}
extension ClockCache.Slot: Sendable where Key: Sendable, Value: Sendable {}
