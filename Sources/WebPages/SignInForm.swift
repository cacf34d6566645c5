import HTTPTypes
import Hummingbird
import MidtierHTTP

/// The sign-in form both page sets share (docs/console.md, "Security"): the form carries a
/// fresh token that a cookie carries too, which shows that a post comes from this form before
/// there is a session to hold one; a sign-in opens the session and clears that cookie.
struct SignInForm: Sendable {
    /// The cookie holding the session, and the one holding the form's token.
    let sessionCookie: String
    let formCookie: String
    /// Where both cookies are sent (the page set's path).
    let path: String

    /// The form page: `template` with the model `model` makes of a fresh form token (the
    /// templates' `signInToken`), its cookie set.
    func page(
        _ pages: Pages, _ template: String, status: HTTPResponse.Status, retryAfter: Int?, secure: Bool,
        model: (_ signInToken: String) -> some Sendable
    ) -> Response {
        let token = RandomToken.make()
        var response = pages.page(template, model(token), status: status)
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        response.setCookie(Pages.cookie(formCookie, token, path: path, secure: secure, maxAge: 3600))
        return response
    }

    /// The posted form, its token checked against the cookie: 403 when the form expired or came
    /// from elsewhere.
    func posted(_ request: Request) async throws(Refusal) -> FormBody {
        do throws(Refusal) {
            return try await FormBody.posted(request, expectedToken: request.cookies[formCookie]?.value)
        } catch  where error.code == "CSRF" {
            throw Refusal.forbidden("The sign-in form had expired; please sign in again.")
        }
    }

    /// After a sign-in: to `home`, with the session's cookie, the form's cookie cleared.
    func signedIn(session: String, home: String, secure: Bool) -> Response {
        var response = Pages.redirect(to: home)
        response.setCookie(Pages.cookie(sessionCookie, session, path: path, secure: secure, maxAge: nil))
        response.setCookie(Pages.cookie(formCookie, "", path: path, secure: secure, maxAge: 0))
        return response
    }
}
