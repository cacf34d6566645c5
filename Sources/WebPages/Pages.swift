import Foundation
package import HTTPTypes
package import Hummingbird
import Mustache

/// How the pages for people are answered: HTML from the templates (swift-mustache, which
/// escapes every `{{value}}` for HTML), with the same protective headers on every answer, and
/// the session cookies (docs/console.md, "Security").
package struct Pages: Sendable {
    private let library: MustacheLibrary
    /// The page set's name (in every title and header) and its stylesheet's path.
    private let site: String
    private let stylesheetPath: String

    package init(site: String, stylesheet: String) {
        self.site = site
        self.stylesheetPath = stylesheet
        var library = MustacheLibrary()
        for (name, text) in Templates.all {
            do {
                try library.register(text, named: name)
                try library.register("{{#layout}}{{#page}}{{>\(name)}}{{/page}}{{/layout}}", named: Self.framed(name))
            } catch {
                // The templates are part of the program: a broken one is a programming error,
                // found by every test that renders a page.
                preconditionFailure("template \(name) does not parse: \(error)")
            }
        }
        self.library = library
    }

    /// The template that renders template `name` in a ``PageFrame``: it pushes the frame's
    /// `layout`, then its `page`, on Mustache's context stack, and adds no text of its own.
    private static func framed(_ name: String) -> String { "framed:\(name)" }

    /// No script at all, styles from Midtier's own stylesheet only, forms that post back to
    /// Midtier only, never inside a frame.
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    /// The headers every page, redirect and stylesheet carries.
    static func protect(_ headers: inout HTTPFields) {
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[.xFrameOptions] = "DENY"
        headers[.referrerPolicy] = "no-referrer"
        headers[.xContentTypeOptions] = "nosniff"
        headers[.cacheControl] = "no-store"
    }

    /// `template` rendered with `model`, its layout's header with `layout` (``PageFrame``).
    package func page(
        _ template: String, _ model: some Sendable, layout: some Sendable = NoLayout(),
        status: HTTPResponse.Status = .ok
    ) -> Response {
        let html = html(template, model, layout: layout)
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        Self.protect(&headers)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// The HTML of `template` rendered with `model` and `layout`.
    func html(_ template: String, _ model: some Sendable, layout: some Sendable = NoLayout()) -> String {
        let frame = PageFrame(site: site, stylesheet: stylesheetPath, layout: layout, page: model)
        return library.render(frame, withTemplate: Self.framed(template)) ?? ""
    }

    /// `303 See Other` to `location` (a path of Midtier's own).
    package static func redirect(to location: String) -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        protect(&headers)
        return Response(status: .seeOther, headers: headers)
    }

    /// The stylesheet of both page sets.
    package static func stylesheet() -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/css; charset=utf-8"
        protect(&headers)
        headers[.cacheControl] = "max-age=3600"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: Templates.stylesheet)))
    }

    /// A session cookie: `HttpOnly`, `SameSite=Strict`, for `path` only, `Secure` when the pages
    /// are reached over https. `maxAge` 0 deletes it.
    package static func cookie(_ name: String, _ value: String, path: String, secure: Bool, maxAge: Int?) -> Cookie {
        Cookie(name: name, value: value, maxAge: maxAge, path: path, secure: secure, httpOnly: true, sameSite: .strict)
    }

    /// Whether a form post comes from another site, by the browser's own word
    /// (`Sec-Fetch-Site`). The CSRF token is the check; this only refuses earlier.
    static func isCrossSite(_ request: Request) -> Bool {
        request.headers[.secFetchSite].map { $0 == "cross-site" || $0 == "same-site" } ?? false
    }

    /// A time in milliseconds since 1970 as people read it: `2026-11-25 14:03 UTC`.
    package static func time(_ milliseconds: Int64) -> String {
        guard milliseconds > 0 else { return "never" }
        let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return date.formatted(
            Date.VerbatimFormatStyle(
                format:
                    "\(year: .defaultDigits)-\(month: .twoDigits)-\(day: .twoDigits) \(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits) UTC",
                timeZone: .gmt, calendar: Calendar(identifier: .gregorian)))
    }
}

extension HTTPField.Name {
    static let contentSecurityPolicy = Self("Content-Security-Policy")!
    static let xFrameOptions = Self("X-Frame-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let secFetchSite = Self("Sec-Fetch-Site")!
}
