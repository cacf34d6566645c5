import Foundation
package import Hummingbird
package import MidtierHTTP

/// The fields of a form a page posted (`application/x-www-form-urlencoded`), read whole, at
/// most `limit` bytes. A field given twice, a malformed percent-encoding, or another content
/// type is a `400` that says which.
package struct FormBody: Sendable {
    package static let limit = 16 * 1024
    private let fields: [String: String]

    package init(fields: [String: String]) { self.fields = fields }

    package subscript(_ name: String) -> String? { fields[name] }

    /// A field that must be there and not be empty.
    package func required(_ name: String) throws(Refusal) -> String {
        guard let value = fields[name], !value.isEmpty else { throw .badRequest("the form has no \(name)") }
        return value
    }

    /// A form a page of this session posted: not marked by the browser as coming from another
    /// site (`Sec-Fetch-Site`), and carrying `expectedToken` (the session's synchronizer token,
    /// or the sign-in form's, which its cookie holds) in its `csrf` field, compared in constant
    /// time. Anything else is a `403` (docs/console.md, "Security").
    package static func posted(_ request: Request, expectedToken: String?) async throws(Refusal) -> FormBody {
        guard !Pages.isCrossSite(request) else { throw Refusal.forbidden("the form was posted from another site") }
        let form = try await read(request)
        guard let expectedToken, let sent = form["csrf"], RandomToken.same(sent, expectedToken) else {
            throw Refusal(.forbidden, code: "CSRF", "the form is not from this session; reload the page and try again")
        }
        return form
    }

    package static func read(_ request: Request) async throws(Refusal) -> FormBody {
        let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard type == "application/x-www-form-urlencoded" else {
            throw .badRequest("a form must be sent as application/x-www-form-urlencoded")
        }
        var request = request
        let buffer = try await request.collectBody(upTo: limit, describedAs: "form")
        return try parse(String(decoding: buffer.readableBytesView, as: UTF8.self))
    }

    /// The query of a page's address, read as a form (a `GET` form's fields, `+` for a space).
    package static func query(_ request: Request) throws(Refusal) -> FormBody {
        try parse(request.uri.query ?? "")
    }

    static func parse(_ text: String) throws(Refusal) -> FormBody {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : "") else {
                throw .badRequest("the form has a malformed percent-encoding")
            }
            guard fields[name] == nil else { throw .badRequest("the form gives \(name) more than once") }
            fields[name] = value
        }
        return FormBody(fields: fields)
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
