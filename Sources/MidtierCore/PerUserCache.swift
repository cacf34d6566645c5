/// A cache of back-end credentials kept per user (tokens, certificates): what a block, purge
/// or reload drops at once (docs/identity.md, "Back-end tokens and certificates").
package protocol PerUserCache: Sendable {
    /// Drops everything of `user`; returns how many entries went.
    @discardableResult func remove(user: UserIdentity) -> Int
    /// Drops everything.
    func removeAll()
}
