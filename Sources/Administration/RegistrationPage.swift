package import MidtierCore
package import MidtierHTTP
import MidtierStore
import Registrations

/// A page of a registrations listing (docs/admin.md, "Listing registrations"), for the admin
/// API and the console alike: at most `limit` registrations in the order of their ids' bytes,
/// and the cursor of the next page when more may follow.
package struct RegistrationPage: Sendable {
    package var registrations: [Registration]
    /// What to pass as `after` for the next page; nil on the last.
    package var next: String?
}

extension Administration {
    /// Registrations on a page when `limit` is not given.
    package static let registrationPageDefault = 100
    /// The most registrations on one page.
    package static let registrationPageMaximum = 1000

    /// The page size `text` asks for (`name` is its parameter): a whole number from 1 to
    /// `maximum`, digits only; `default` when not given. Anything else, empty included, is a
    /// `400` naming `name`.
    package static func pageLimit(_ text: String?, named name: String = "limit", default: Int, maximum: Int) throws(Refusal) -> Int {
        guard let limit = RegistrationCursor.limit(text, default: `default`, maximum: maximum) else {
            throw .badRequest("\(name) must be a whole number from 1 to \(maximum)")
        }
        return limit
    }

    /// The id a registrations cursor (`name` is its parameter) carries; nil for none or an
    /// empty one (the first page); `400` naming `name` for anything else.
    package static func registrationCursor(_ text: String?, named name: String = "after") throws(Refusal) -> String? {
        guard let text, !text.isEmpty else { return nil }
        guard let id = RegistrationCursor.decode(text) else {
            throw .badRequest("\(name) is malformed: pass the previous page's next value unchanged")
        }
        return id
    }

    /// A page of the registrations `filter` selects, after the registration id `after` (from
    /// the first when nil), at most `limit` (1 to `registrationPageMaximum`): one more is read
    /// to know whether a next page may follow. However many registrations there are, a page
    /// is one bounded index range of the store (`StateStore.registrations(matching:after:limit:)`).
    package func registrations(matching filter: RegistrationFilter, after: String?, limit: Int) async throws(Refusal) -> RegistrationPage {
        let limit = min(max(limit, 1), Self.registrationPageMaximum)
        let found = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: filter, after: after, limit: limit + 1)
        }
        guard found.count > limit else { return RegistrationPage(registrations: found, next: nil) }
        let page = Array(found.prefix(limit))
        return RegistrationPage(registrations: page, next: page.last.map { RegistrationCursor.encode(after: $0.id) })
    }
}
