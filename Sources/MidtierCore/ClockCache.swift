/// A bounded map that, when full, lets go of an entry not used lately — the CLOCK (second
/// chance) scheme — with a bounded amount of work per insertion (docs/operations.md, "Memory").
///
/// Every entry sits in a slot of a ring and has a "used" mark, set when it is read or written.
/// An insertion into a full cache moves a hand around the ring: a marked entry loses its mark
/// and stays, the first unmarked one makes room. The hand looks at no more than
/// `maximumSweep` slots per insertion; if all of them were marked, the last one looked at goes.
/// So an insertion costs a bounded amount of work whatever the size, and an entry read since
/// the hand last passed survives the next pass.
///
/// An insertion may say, per entry, that one goes as soon as the hand reaches it (`.now`: an
/// expired credential) or never (`.never`: an exchange that callers wait for). When every slot
/// the hand looked at held a `.never` entry, nothing goes and the cache holds one more than its
/// capacity; while over it, each insertion lets go of two, so it comes back.
///
/// A value type: callers keep it under their own lock (CachedStateStore's shards, the token
/// and certificate caches through ``PerUserClockCache``).
package struct ClockCache<Key: Hashable, Value> {
    /// When the hand may let an entry go.
    package enum Eviction {
        /// When it was not used since the hand last passed (the CLOCK rule).
        case ifUnused
        /// As soon as the hand reaches it, used or not (it is of no more use: expired).
        case now
        /// Never (something waits for it); the hand passes it by.
        case never
    }

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

    /// Every value kept, in no order (a look at all of them: for tests and diagnostics only).
    package var values: [Value] { slots.compactMap { $0?.value } }

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

    /// Keeps `value` for `key` (marking it used when it replaces a kept one). A new key in a
    /// full cache first lets go of one entry not used lately — of two while the cache is over
    /// its capacity — as `eviction` says of each entry the hand passes; returns what went.
    @discardableResult
    package mutating func set(
        _ value: Value, for key: Key, eviction: (Value) -> Eviction = { _ in .ifUnused }
    ) -> [(key: Key, value: Value)] {
        if let position = index[key] {
            slots[position] = Slot(key: key, value: value, used: true)
            return []
        }
        var evicted: [(key: Key, value: Value)] = []
        let room = count < capacity ? 0 : count == capacity ? 1 : 2
        for _ in 0..<room {
            guard let position = victim(eviction), let slot = slots[position] else { break }
            remove(slot.key)
            evicted.append((slot.key, slot.value))
        }
        let position: Int
        if let reused = free.popLast() {
            position = reused
        } else {
            slots.append(nil)
            position = slots.count - 1
        }
        // A new entry starts unmarked: read once more before the hand comes round, it stays.
        slots[position] = Slot(key: key, value: value, used: false)
        index[key] = position
        return evicted
    }

    /// Updates the value kept for `key` in place, if any, without marking it.
    package mutating func update(_ key: Key, _ change: (inout Value) -> Void) {
        guard let position = index[key], var slot = slots[position] else { return }
        change(&slot.value)
        slots[position] = slot
    }

    /// Lets go of `key`'s entry, if any; returns its value.
    @discardableResult
    package mutating func remove(_ key: Key) -> Value? {
        guard let position = index.removeValue(forKey: key) else { return nil }
        let value = slots[position]?.value
        slots[position] = nil
        free.append(position)
        return value
    }

    /// Lets go of every entry.
    package mutating func removeAll() {
        slots = []
        index = [:]
        free = []
        hand = 0
    }

    /// The slot whose entry makes room: from the hand, the first that may go now or is
    /// unmarked (clearing marks on the way), at most `maximumSweep` slots on; if none, the
    /// last marked one looked at; `nil` when every slot looked at was empty or `.never`.
    private mutating func victim(_ eviction: (Value) -> Eviction) -> Int? {
        guard !slots.isEmpty else { return nil }
        var lastMarked: Int?
        for _ in 0..<maximumSweep {
            let position = hand
            hand = (hand + 1) % slots.count
            guard let slot = slots[position] else { continue }
            switch eviction(slot.value) {
            case .never:
                continue
            case .now:
                return position
            case .ifUnused:
                if !slot.used { return position }
                slots[position]?.used = false
                lastMarked = position
            }
        }
        return lastMarked
    }
}

extension ClockCache: Sendable where Key: Sendable, Value: Sendable {}
extension ClockCache.Slot: Sendable where Key: Sendable, Value: Sendable {}
extension ClockCache.Eviction: Sendable {}
