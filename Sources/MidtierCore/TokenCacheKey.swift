/// Which token: what it was issued for — a destination, the realm-qualified Midtier user, and
/// the NameID the assertion named (docs/identity.md). Separate fields, never a joined string,
/// so no user id can be crafted to collide with another user's key; the NameID is part of the
/// key, so a token can never serve a request that would assert another NameID (a JWT whose
/// claims map the same user elsewhere, a mapping changed by a reload).
package struct TokenCacheKey: PerUserKey, Sendable {
    package var destination: ExactString
    package var user: UserIdentity
    package var nameID: ExactString
    package init(destination: String, user: UserIdentity, nameID: String) {
        self.destination = ExactString(destination)
        self.user = user
        self.nameID = ExactString(nameID)
    }
}
