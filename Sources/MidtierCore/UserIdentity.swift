#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Who a user is: a realm plus an id (docs/identity.md).
///
/// `users.json` is one realm (the local realm, written as the empty string); each JWT issuer is
/// another, named by its `iss` exactly as configured. Two identities are the same user only when
/// both the realm and the id have the same UTF-8 bytes: never by Unicode canonical equivalence
/// (which Swift's `String ==` and dictionary keys use: `"\u{212A}im" == "Kim"`), never by case
/// folding. SQLite and PostgreSQL compare text by bytes too, so memory and the store agree.
///
/// Every map, cache, store query, block, token key and audit entry that is about a user keys on
/// this type, not on a bare `String`.
package struct UserIdentity: Hashable, Sendable, CustomStringConvertible {
    /// The realm of `users.json`.
    package static let localRealm = ""

    /// `""` for `users.json`, else the JWT issuer.
    package let realm: String
    /// The user id within the realm: the `users.json` id, or the JWT's `userClaim`.
    package let id: String

    package init(realm: String, id: String) {
        self.realm = realm
        self.id = id
    }

    /// A `users.json` user.
    package static func local(_ id: String) -> UserIdentity { UserIdentity(realm: localRealm, id: id) }

    package var isLocal: Bool { realm.utf8.isEmpty }

    package static func == (lhs: UserIdentity, rhs: UserIdentity) -> Bool {
        sameBytes(lhs.id, rhs.id) && sameBytes(lhs.realm, rhs.realm)
    }

    /// Whether two strings have the same UTF-8 bytes (one `memcmp` for native strings).
    package static func sameBytes(_ a: String, _ b: String) -> Bool {
        let compared = a.utf8.withContiguousStorageIfAvailable { left in
            b.utf8.withContiguousStorageIfAvailable { right in
                left.count == right.count && (left.count == 0 || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
        return (compared ?? nil) ?? a.utf8.elementsEqual(b.utf8)
    }

    package func hash(into hasher: inout Hasher) {
        Self.hashBytes(of: realm, into: &hasher)
        Self.hashBytes(of: id, into: &hasher)
    }

    /// Hashes a string's UTF-8 bytes, length first, so `("ab","c")` and `("a","bc")` differ.
    static func hashBytes(of text: String, into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { bytes in
            hasher.combine(bytes.count)
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        }
    }

    /// For logs and audit entries: `alice` for a `users.json` user, `alice@<issuer>` otherwise.
    package var description: String { isLocal ? id : "\(id)@\(realm)" }
}

/// A string compared and hashed by its exact UTF-8 bytes, for dictionary keys that must not
/// merge canonically equivalent spellings (registration ids, configured user ids).
package struct ExactString: Hashable, Sendable, CustomStringConvertible {
    package let value: String
    package init(_ value: String) { self.value = value }

    package static func == (lhs: ExactString, rhs: ExactString) -> Bool { UserIdentity.sameBytes(lhs.value, rhs.value) }
    package func hash(into hasher: inout Hasher) { UserIdentity.hashBytes(of: value, into: &hasher) }
    package var description: String { value }
}
