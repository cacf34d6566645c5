/// A key that names whose entry it is: what a per-user cache files its entries under.
package protocol PerUserKey: Hashable {
    var user: UserIdentity { get }
}

/// A ``ClockCache`` that also keeps each user's keys, so that dropping a user's entries (a block,
/// a purge) looks at that user's entries only, never at everyone's (a look at all 200 000 took
/// 11.5 ms under the lock every call takes; docs/benchmarks.md, "Several instances on
/// PostgreSQL"). The index follows every way an entry goes — evicted, removed, all removed — so
/// `remove(user:)` drops exactly the entries the user still has. Users are told apart by the
/// bytes of their realm and id (``UserIdentity``), never by canonical equivalence.
///
/// The back-end token cache and the users' certificate cache are each one of these under their
/// lock (docs/operations.md, "Memory").
package struct PerUserClockCache<Key: PerUserKey, Value> {
    private var entries: ClockCache<Key, Value>
    private var keysOfUser: [UserIdentity: Set<Key>] = [:]

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
        if isNew { keysOfUser[key.user, default: []].insert(key) }
    }

    /// Updates the value kept for `key` in place, if any, without marking it.
    package mutating func update(_ key: Key, _ change: (inout Value) -> Void) { entries.update(key, change) }

    /// Lets go of `key`'s entry, if any.
    package mutating func remove(_ key: Key) {
        guard entries.remove(key) != nil else { return }
        forget(key)
    }

    /// Lets go of every entry of `user`; returns how many went.
    package mutating func remove(user: UserIdentity) -> Int {
        guard let keys = keysOfUser.removeValue(forKey: user) else { return 0 }
        for key in keys { entries.remove(key) }
        return keys.count
    }

    /// Lets go of every entry.
    package mutating func removeAll() {
        entries.removeAll()
        keysOfUser.removeAll()
    }

    /// Takes `key` out of its user's keys (its entry is gone).
    private mutating func forget(_ key: Key) {
        keysOfUser[key.user]?.remove(key)
        if keysOfUser[key.user]?.isEmpty == true { keysOfUser[key.user] = nil }
    }
}

extension PerUserClockCache: Sendable where Key: Sendable, Value: Sendable {}
