import Foundation
import HTTPTypes
package import Hummingbird
package import Logging
package import MidtierCore
package import MidtierHTTP
import MidtierStore
package import Registrations

/// How a person signs in to the self-service page: the device API's own sign-in rules
/// (docs/identity.md), given by the server.
package protocol PageSignIn: Sendable {
    /// A `users.json` user by name and password (throttled like every Basic sign-in).
    func signIn(user: String, password: String, client: String?) async throws(Refusal) -> PageSignInResult
    /// A user of a jwt app by a token of its identity provider.
    func signIn(token: String) async throws(Refusal) -> PageSignInResult
    /// Whether any app takes tokens (the page offers the token form then).
    var takesTokens: Bool { get }
    /// The stamp of `user`'s credentials now; nil when they can no longer sign in (removed
    /// from `users.json`, or their issuer no longer configured). A session whose stamp
    /// differs ends (a password changed, for example).
    func stamp(of user: UserIdentity) -> String?
}

/// Who signed in, a stamp of the credentials they signed in with, and when those stop being
/// valid (a token's `exp`, seconds since 1970; nil for a password).
package struct PageSignInResult: Sendable {
    package var user: UserIdentity
    package var stamp: String
    package var expiresAt: Double?

    package init(user: UserIdentity, stamp: String, expiresAt: Double? = nil) {
        self.user = user
        self.stamp = stamp
        self.expiresAt = expiresAt
    }
}

/// The self-service page on the device listener, under `/mobileservices/me/` (docs/console.md,
/// "Lock my lost phone"): a person signs in, sees their own devices and locks or wipes one,
/// through the same `RegistrationService` calls as the self-service API, audited as
/// `user:<id>`. Nobody else's device is ever listed, confirmed or changed: every registration
/// is checked to be the signed-in user's (by the exact bytes of realm and id).
package struct SelfServicePageRoutes: Sendable {
    let registrations: RegistrationService
    let signIn: any PageSignIn
    /// Whether devices reach Midtier over https (`publicURL`): the cookies are `Secure` then.
    let secure: @Sendable () -> Bool
    let pages: Pages
    let sessions: PageSessions<UserIdentity>
    let logger: Logger

    static let sessionCookie = "midtier_me"
    static let signInCookie = "midtier_me_sign_in"
    static let cookiePath = "/mobileservices/me/"
    static let form = SignInForm(sessionCookie: sessionCookie, formCookie: signInCookie, path: cookiePath)
    static let home = "/mobileservices/me/"

    /// - Parameter sessions: the page's sessions; by default in the registrations' store.
    package init(
        registrations: RegistrationService, signIn: any PageSignIn, secure: @escaping @Sendable () -> Bool,
        sessions: PageSessions<UserIdentity>? = nil, logger: Logger
    ) {
        self.registrations = registrations
        self.signIn = signIn
        self.secure = secure
        self.pages = Pages(site: "My devices", stylesheet: "/mobileservices/me/style.css")
        self.sessions = sessions ?? PageSessions(store: registrations.store, site: "me", clock: registrations.clock)
        self.logger = logger
    }

    struct SignedIn {
        let user: UserIdentity
        let cookie: String
        let csrf: String
        let notice: String?
    }

    package func add(to router: Router<MidtierRequestContext>) {
        router.get("/mobileservices/me/style.css") { _, _ in Pages.stylesheet() }
        router.get("/mobileservices/me/") { request, context in
            // The router takes `/mobileservices/me` for `…/me/`; the session cookie's path does not.
            guard request.uri.path.hasSuffix("/") else { return Pages.redirect(to: Self.home) }
            let user: SignedIn?
            do throws(Refusal) { user = try await signedIn(request) } catch { return problem(error, user: nil) }
            guard let user else { return signInPage(request) }
            return await respond(user) { () throws(Refusal) in try await devices(user) }
        }
        router.post("/mobileservices/me/sign-in") { request, context in await signIn(request, context) }
        router.post("/mobileservices/me/sign-out") { request, _ in
            await change(request) { _, _ throws(Refusal) in
                try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                    try await sessions.end(request.cookies[Self.sessionCookie]?.value)
                }
                var response = Pages.redirect(to: Self.home)
                response.setCookie(Pages.cookie(Self.sessionCookie, "", path: Self.cookiePath, secure: secure(), maxAge: 0))
                return response
            }
        }
        router.get("/mobileservices/me/confirm") { request, _ in
            let user: SignedIn?
            do throws(Refusal) { user = try await signedIn(request) } catch { return problem(error, user: nil) }
            guard let user else { return Pages.redirect(to: Self.home) }
            return await respond(user) { () throws(Refusal) in try await confirm(request, user) }
        }
        for action in [RegistrationAction.lock, .wipe] {
            router.post("/mobileservices/me/\(action.rawValue)") { request, context in
                await change(request) { form, user throws(Refusal) in try await apply(action, form, user, client: context.clientIP) }
            }
        }
    }

    // MARK: Sessions and forms

    /// The user whose session the request's cookie names, if it is live and their credentials
    /// have not changed since the sign-in; `503` when the store, which keeps the sessions, fails.
    private func signedIn(_ request: Request) async throws(Refusal) -> SignedIn? {
        let cookie = request.cookies[Self.sessionCookie]?.value
        return try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) -> SignedIn? in
            guard let session = try await sessions.session(cookie, takingNotice: true), let cookie else { return nil }
            guard let stamp = signIn.stamp(of: session.subject), session.isStamped(stamp) else {
                try await sessions.end(cookie)
                return nil
            }
            return SignedIn(user: session.subject, cookie: cookie, csrf: session.csrfToken, notice: session.notice)
        }
    }

    private func respond(_ user: SignedIn, _ page: () async throws(Refusal) -> Response) async -> Response {
        do throws(Refusal) {
            return try await page()
        } catch {
            return problem(error, user: user)
        }
    }

    private func change(_ request: Request, _ action: (FormBody, SignedIn) async throws(Refusal) -> Response) async -> Response {
        let signedIn: SignedIn?
        do throws(Refusal) { signedIn = try await self.signedIn(request) } catch { return problem(error, user: nil) }
        guard let user = signedIn else { return Pages.redirect(to: Self.home) }
        return await respond(user) { () throws(Refusal) in
            let form: FormBody
            do throws(Refusal) {
                form = try await FormBody.posted(request, expectedToken: user.csrf)
            } catch {
                logger.warning("self-service form refused", metadata: ["user": "\(user.user)", "why": "\(error.message)"])
                throw error
            }
            return try await action(form, user)
        }
    }

    private func problem(_ refusal: Refusal, user: SignedIn?) -> Response {
        let heading = refusal.status == .notFound ? "Not found" : refusal.status.code >= 500 ? "Not available" : "Refused"
        return pages.page(
            "me-problem", SelfServicePage.Problem(heading: heading, message: refusal.message), layout: layout(user),
            status: refusal.status)
    }

    /// What every page's layout reads.
    private func layout(_ user: SignedIn?) -> SelfServicePage.Layout {
        SelfServicePage.Layout(user: user?.user.description, csrf: user?.csrf, notice: user?.notice)
    }

    // MARK: Sign-in

    private func signInPage(_ request: Request, problem: String? = nil, status: HTTPResponse.Status = .ok, retryAfter: Int? = nil) -> Response {
        Self.form.page(pages, "me-sign-in", status: status, retryAfter: retryAfter, secure: secure()) { token in
            SelfServicePage.SignIn(tokenSignIn: signIn.takesTokens, problem: problem, signInToken: token)
        }
    }

    private func signIn(_ request: Request, _ context: MidtierRequestContext) async -> Response {
        do throws(Refusal) {
            let form = try await Self.form.posted(request)
            let signedIn: PageSignInResult
            if let token = form["token"] {
                signedIn = try await signIn.signIn(token: token.trimmingCharacters(in: .whitespacesAndNewlines))
            } else {
                signedIn = try await signIn.signIn(user: try form.required("user"), password: form["password"] ?? "", client: context.clientIP)
            }
            // A session opened with a token ends when the token does.
            let cookie = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await sessions.start(
                    signedIn.user, credentialStamp: signedIn.stamp,
                    validSeconds: signedIn.expiresAt.map { $0 - Date().timeIntervalSince1970 })
            }
            logger.info("self-service page sign-in", metadata: ["user": "\(signedIn.user)"])
            return Self.form.signedIn(session: cookie, home: Self.home, secure: secure())
        } catch {
            // The same words whether the name exists or not (the device API's rule).
            let message = error.status == .unauthorized ? "The user name, password or token is not right." : error.message
            return signInPage(request, problem: message, status: error.status, retryAfter: error.retryAfter)
        }
    }

    // MARK: Pages

    private func devices(_ user: SignedIn) async throws(Refusal) -> Response {
        let owned = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user.user))
        }
        // The store selects by realm and id; checked again here, by bytes, before anything is shown.
        let mine = owned.filter { $0.user == user.user }.sorted { $0.createdAt > $1.createdAt }
        let devices = mine.map { registration in
            SelfServicePage.Device(
                id: registration.id, model: Self.model(registration), type: registration.deviceType, app: registration.appId,
                created: Pages.time(registration.createdAt), lastContact: Pages.time(registration.lastContactAt),
                state: registration.state.rawValue,
                actions: Self.actions(for: registration.state).map { action in
                    RegistrationActionLink(
                        action: action.rawValue, label: Self.label(action), registrationID: ConsoleRoutes.queryValue(registration.id))
                })
        }
        return pages.page("me-devices", SelfServicePage.Devices(devices: devices, hasDevices: !mine.isEmpty), layout: layout(user))
    }

    private func confirm(_ request: Request, _ user: SignedIn) async throws(Refusal) -> Response {
        let query = try FormBody.query(request)
        guard let action = query["action"].flatMap(RegistrationAction.init(rawValue:)), action != .unlock else {
            throw .badRequest("action must be lock or wipe")
        }
        let registration = try await own(query["id"] ?? "", of: user)
        let consequence =
            action == .lock
            ? "The app on this device can no longer reach company data. An administrator can unlock it."
            : "The app on this device can never reach company data again and deletes what it holds. This cannot be undone."
        let page = SelfServicePage.Confirm(
            id: registration.id, model: Self.model(registration), type: registration.deviceType, app: registration.appId,
            created: Pages.time(registration.createdAt), state: registration.state.rawValue,
            action: action.rawValue, label: Self.label(action), consequence: consequence)
        return pages.page("me-confirm", page, layout: layout(user))
    }

    private func apply(_ action: RegistrationAction, _ form: FormBody, _ user: SignedIn, client: String?) async throws(Refusal) -> Response {
        let registration = try await own(try form.required("id"), of: user)
        let result = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.apply(action, to: registration.id, by: .user(user.user, source: client ?? ""))
        }
        switch result {
        case .changed:
            logger.notice(
                "registration \(action.rawValue) by its user (page)", metadata: ["registration": "\(registration.id)", "user": "\(user.user)"])
            do {
                try await sessions.leaveNotice(
                    "\(registration.deviceModel.isEmpty ? "The device" : registration.deviceModel) is \(action == .lock ? "locked" : "wiped").",
                    for: user.cookie)
            } catch {
                // The change was made; only its message is lost.
                logger.warning("self-service notice not kept", metadata: ["error": "\(error)"])
            }
            return Pages.redirect(to: Self.home)
        case .notFound:
            throw .notFound("that device is not one of yours")
        case .refused(let current):
            throw Refusal(.conflict, code: "CONFLICT", "that device is \(current.rawValue) and cannot be locked")
        }
    }

    /// The registration `id` if it is the signed-in user's; for anyone else it does not exist.
    private func own(_ id: String, of user: SignedIn) async throws(Refusal) -> Registration {
        let found = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await registrations.store.registration(id: id) }
        guard let found, found.user == user.user else { throw .notFound("that device is not one of yours") }
        return found
    }

    /// A device's model as the page names it.
    static func model(_ registration: Registration) -> String {
        registration.deviceModel.isEmpty ? "(unnamed device)" : registration.deviceModel
    }

    static func actions(for state: Registration.State) -> [RegistrationAction] {
        switch state {
        case .active: [.lock, .wipe]
        case .locked: [.wipe]
        case .wiped: []
        }
    }

    static func label(_ action: RegistrationAction) -> String {
        action == .lock ? "Lock" : "Wipe"
    }
}
