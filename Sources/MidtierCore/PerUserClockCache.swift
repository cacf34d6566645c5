/// A key that names whose entry it is: a ``GroupedKey`` grouped by user.
package protocol PerUserKey: GroupedKey where Group == UserIdentity {
    var user: UserIdentity { get }
}

extension PerUserKey {
    package var group: UserIdentity { user }
}

/// A ``GroupedClockCache`` of users' entries (the back-end token cache, the users' certificate
/// cache): a block or purge drops one user's entries, looking at no one else's. Users are told
/// apart by the bytes of their realm and id (``UserIdentity``).
package typealias PerUserClockCache<Key: PerUserKey, Value> = GroupedClockCache<Key, Value>

extension GroupedClockCache where Key: PerUserKey {
    /// Lets go of every entry of `user`; returns how many went.
    @discardableResult
    package mutating func remove(user: UserIdentity) -> Int { remove(group: user) }
}
