/// A key that names the group its entry belongs to: what a ``GroupedClockCache`` files its
/// entries under (a user's tokens, a registration's back-end sessions).
package protocol GroupedKey: Hashable {
    associatedtype Group: Hashable
    var group: Group { get }
}

/// A ``ClockCache`` that also keeps each group's keys, so that dropping a group's entries (a
/// user's on a block or purge, a registration's on a wipe) looks at that group's entries only,
/// never at everyone's (a look at all 200 000 took 11.5 ms under the lock every call takes;
/// docs/benchmarks.md, "Several instances on PostgreSQL"). The index follows every way an entry
/// goes — evicted, removed, all removed — so `remove(group:)` drops exactly the entries the
/// group still has. Groups are told apart as their `Hashable` says: by bytes for
/// ``UserIdentity`` and ``ExactString``, never by canonical equivalence.
///
/// The back-end token cache, the users' certificate cache (``PerUserClockCache``) and the
/// back-end cookie jars are each one of these under their lock (docs/operations.md, "Memory").
package struct GroupedClockCache<Key: GroupedKey, Value> {
    private var entries: ClockCache<Key, Value>
    private var keysOfGroup: [Key.Group: Set<Key>] = [:]

    /// An empty cache of at most `capacity` entries (see ``ClockCache``).
    package init(capacity: Int, maximumSweep: Int = 1024) {
        entries = ClockCache(capacity: capacity, maximumSweep: maximumSweep)
    }

    /// How many entries it holds.
    package var count: Int { entries.count }

    /// Every value kept, in no order (a look at all of them: for tests and diagnostics only).
    package var values: [Value] { entries.values }

    /// The value kept for `key`, marking it used.
    package mutating func value(for key: Key) -> Value? { entries.value(for: key) }

    /// The value kept for `key`, without marking it.
    package func peek(_ key: Key) -> Value? { entries.peek(key) }

    /// Keeps `value` for `key`; a new key in a full cache lets go of what the clock chooses
    /// (``ClockCache/set(_:for:eviction:)``).
    package mutating func set(_ value: Value, for key: Key, eviction: (Value) -> ClockCache<Key, Value>.Eviction = { _ in .ifUnused }) {
        let isNew = entries.peek(key) == nil
        for (evicted, _) in entries.set(value, for: key, eviction: eviction) { forget(evicted) }
        if isNew { keysOfGroup[key.group, default: []].insert(key) }
    }

    /// Updates the value kept for `key` in place, if any, without marking it.
    package mutating func update(_ key: Key, _ change: (inout Value) -> Void) { entries.update(key, change) }

    /// Lets go of `key`'s entry, if any.
    package mutating func remove(_ key: Key) {
        guard entries.remove(key) != nil else { return }
        forget(key)
    }

    /// Lets go of every entry of `group`; returns how many went.
    @discardableResult
    package mutating func remove(group: Key.Group) -> Int {
        guard let keys = keysOfGroup.removeValue(forKey: group) else { return 0 }
        for key in keys { entries.remove(key) }
        return keys.count
    }

    /// Lets go of every entry.
    package mutating func removeAll() {
        entries.removeAll()
        keysOfGroup.removeAll()
    }

    /// Takes `key` out of its group's keys (its entry is gone).
    private mutating func forget(_ key: Key) {
        keysOfGroup[key.group]?.remove(key)
        if keysOfGroup[key.group]?.isEmpty == true { keysOfGroup[key.group] = nil }
    }
}

extension GroupedClockCache: Sendable where Key: Sendable, Key.Group: Sendable, Value: Sendable {}
