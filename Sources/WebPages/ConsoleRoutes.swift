package import Administration
import Foundation
import HTTPTypes
package import Hummingbird
package import Logging
package import MidtierCore
package import MidtierHTTP
package import MidtierJSON
package import MidtierMetrics
import Registrations

/// What the console shows about this instance beyond the admin operations.
package struct ConsoleFacts: Sendable {
    /// The JWT issuers configured (each a realm of users, besides `users.json`).
    package var realms: @Sendable () -> [String]
    package var apps: @Sendable () -> [String]
    /// The ids of `users.json`.
    package var localUserIDs: @Sendable () -> [String]
    package var configuration: @Sendable () -> (apps: Int, destinations: Int, users: Int)
    /// "SQLite" or "PostgreSQL", for the overview.
    package var storeKind: String
    package var storeReachable: @Sendable () async -> Bool
    package var exchanges: @Sendable () -> [String: ExchangeTotals]
    /// Whether admins reach the console over https (`adminURL`): the cookies are `Secure` then.
    package var secure: @Sendable () -> Bool
    /// An app's onboarding configuration (`AppConfiguration.discoveryDocument`), `nil` for an
    /// app that is not configured: what the console offers as `ConfigurationProvider.plist`.
    package var onboarding: @Sendable (String) -> JSON?

    package init(
        realms: @escaping @Sendable () -> [String], apps: @escaping @Sendable () -> [String],
        localUserIDs: @escaping @Sendable () -> [String],
        configuration: @escaping @Sendable () -> (apps: Int, destinations: Int, users: Int), storeKind: String,
        storeReachable: @escaping @Sendable () async -> Bool, exchanges: @escaping @Sendable () -> [String: ExchangeTotals],
        secure: @escaping @Sendable () -> Bool,
        onboarding: @escaping @Sendable (String) -> JSON? = { _ in nil }
    ) {
        self.realms = realms
        self.apps = apps
        self.localUserIDs = localUserIDs
        self.configuration = configuration
        self.storeKind = storeKind
        self.storeReachable = storeReachable
        self.exchanges = exchanges
        self.secure = secure
        self.onboarding = onboarding
    }
}

/// The web console on `adminListen`, under `/console/` (docs/console.md): server-rendered
/// pages over the same `Administration` operations as the admin API, so a change made here is
/// the same change, with the same audit entry (`admin#<n>`), as one made with `curl`.
///
/// An admin signs in with an admin token once and gets a server-side session (``PageSessions``,
/// kept in the store: any instance serves it); every form that changes something carries the
/// session's CSRF token. Reading pages need a session too.
package struct ConsoleRoutes: Sendable {
    let administration: Administration
    let authenticator: AdminAuthenticator
    let facts: ConsoleFacts
    let pages: Pages
    let sessions: PageSessions<String>
    let logger: Logger

    static let sessionCookie = "midtier_console"
    static let signInCookie = "midtier_console_sign_in"
    static let cookiePath = "/console/"
    static let form = SignInForm(sessionCookie: sessionCookie, formCookie: signInCookie, path: cookiePath)
    static let site = "Midtier console"
    static let stylesheetPath = "/console/style.css"
    /// Registrations on one registrations page, and audit entries per page.
    static let registrationRows = 100
    static let auditPage = 50

    /// - Parameter sessions: the console's sessions; by default in the administration's store.
    package init(
        administration: Administration, authenticator: AdminAuthenticator, facts: ConsoleFacts,
        sessions: PageSessions<String>? = nil, logger: Logger
    ) {
        self.administration = administration
        self.authenticator = authenticator
        self.facts = facts
        self.pages = Pages(site: Self.site, stylesheet: Self.stylesheetPath)
        self.sessions =
            sessions ?? PageSessions(store: administration.registrations.store, site: "console", clock: administration.registrations.clock)
        self.logger = logger
    }

    /// A signed-in admin, as a page handler gets them.
    struct SignedIn {
        let admin: String
        let cookie: String
        let csrf: String
        let notice: String?
        let actor: AuditActor
    }

    package func add(to router: Router<MidtierRequestContext>) {
        router.get("/console/style.css") { _, _ in Pages.stylesheet() }
        router.get("/console/sign-in") { request, _ in await signInPage(request) }
        router.post("/console/sign-in") { request, context in await signIn(request, context) }
        router.post("/console/sign-out") { request, context in
            await change(request, context) { _, _ throws(Refusal) in
                try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                    try await sessions.end(request.cookies[Self.sessionCookie]?.value)
                }
                var response = Pages.redirect(to: "/console/sign-in")
                response.setCookie(Pages.cookie(Self.sessionCookie, "", path: Self.cookiePath, secure: facts.secure(), maxAge: 0))
                return response
            }
        }
        router.get("/console/") { request, context in
            // The router takes `/console` for `/console/`; the session cookie's path does not.
            guard request.uri.path.hasSuffix("/") else { return Pages.redirect(to: "/console/") }
            return await show(request, context, overview)
        }
        router.get("/console/users") { request, context in await show(request, context, users) }
        router.post("/console/users/block") { request, context in await change(request, context, block) }
        router.post("/console/users/unblock") { request, context in await change(request, context, unblock) }
        router.get("/console/registrations") { request, context in await show(request, context, registrations) }
        router.get("/console/registrations/confirm") { request, context in await show(request, context, confirm) }
        for action in ConsoleAction.allCases {
            router.post("/console/registrations/\(action.rawValue)") { request, context in
                await change(request, context) { form, admin throws(Refusal) in try await apply(action, form, admin) }
            }
        }
        router.get("/console/audit") { request, context in await show(request, context, audit) }
        router.get("/console/destinations") { request, context in await show(request, context, destinations) }
        router.get("/console/client-logs") { request, context in await show(request, context, clientLogs) }
        router.get("/console/client-usage") { request, context in await show(request, context, clientUsage) }
        router.get("/console/client-usage/report") { request, context in await show(request, context, clientUsageReport) }
        router.get("/console/push") { request, context in await show(request, context, push) }
        router.get("/console/push/notification") { request, context in await show(request, context, pushNotification) }
        router.post("/console/push/test") { request, context in await change(request, context, sendTestPush) }
        for format in OnboardingDownload.Format.allCases {
            router.get("/console/apps/{appId}/\(format.filename)") { request, context in
                await show(request, context) { _, _ throws(Refusal) in
                    try OnboardingDownload.response(app: context.parameters.get("appId") ?? "", format, facts.onboarding)
                }
            }
        }
    }

    // MARK: Sessions and forms

    /// The admin whose session the request's cookie names, if it is live and the admin tokens
    /// have not changed since the sign-in; `503` when the store, which keeps the sessions, fails.
    private func signedIn(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> SignedIn? {
        let cookie = request.cookies[Self.sessionCookie]?.value
        return try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) -> SignedIn? in
            guard let session = try await sessions.session(cookie, takingNotice: true), let cookie else { return nil }
            guard session.isStamped(authenticator.credentialStamp) else {
                try await sessions.end(cookie)
                return nil
            }
            return SignedIn(
                admin: session.subject, cookie: cookie, csrf: session.csrfToken, notice: session.notice,
                actor: AuditActor(name: session.subject, source: context.clientIP ?? ""))
        }
    }

    /// A page for a signed-in admin; others go to the sign-in page.
    private func show(
        _ request: Request, _ context: MidtierRequestContext,
        _ page: (Request, SignedIn) async throws(Refusal) -> Response
    ) async -> Response {
        let signedIn: SignedIn?
        do throws(Refusal) { signedIn = try await self.signedIn(request, context) } catch { return problem(error, admin: nil, back: "/console/") }
        guard let admin = signedIn else { return Pages.redirect(to: "/console/sign-in") }
        do throws(Refusal) {
            return try await page(request, admin)
        } catch {
            return problem(error, admin: admin, back: "/console/")
        }
    }

    /// Leaves a one-time message for the admin's next page. A store that fails then loses the
    /// message only: the change it tells of was made.
    private func note(_ notice: String, for admin: SignedIn) async {
        do {
            try await sessions.leaveNotice(notice, for: admin.cookie)
        } catch {
            logger.warning("console notice not kept", metadata: ["error": "\(error)"])
        }
    }

    /// A form that changes something: only from a signed-in admin's own page (its session's
    /// CSRF token), then back to a page with what happened.
    private func change(
        _ request: Request, _ context: MidtierRequestContext,
        _ action: (FormBody, SignedIn) async throws(Refusal) -> Response
    ) async -> Response {
        let signedIn: SignedIn?
        do throws(Refusal) { signedIn = try await self.signedIn(request, context) } catch { return problem(error, admin: nil, back: "/console/") }
        guard let admin = signedIn else { return Pages.redirect(to: "/console/sign-in") }
        do throws(Refusal) {
            let form: FormBody
            do throws(Refusal) {
                form = try await FormBody.posted(request, expectedToken: admin.csrf)
            } catch {
                logger.warning("console form refused", metadata: ["path": "\(request.uri.path)", "by": "\(admin.admin)", "why": "\(error.message)"])
                throw error
            }
            return try await action(form, admin)
        } catch {
            return problem(error, admin: admin, back: "/console/")
        }
    }

    private func problem(_ refusal: Refusal, admin: SignedIn?, back: String) -> Response {
        let heading = refusal.status == .notFound ? "Not found" : refusal.status.code >= 500 ? "Not available" : "Refused"
        return pages.page(
            "console-problem", ConsolePage.Problem(heading: heading, message: refusal.message, back: back),
            layout: layout(admin, nav: nil), status: refusal.status)
    }

    /// What every page's layout reads.
    func layout(_ admin: SignedIn?, nav: ConsolePage.Nav.Entry?) -> ConsolePage.Layout {
        ConsolePage.Layout(admin: admin?.admin, csrf: admin?.csrf, notice: admin?.notice, nav: nav.map(ConsolePage.Nav.init))
    }

    // MARK: Sign-in

    /// The sign-in form. Its token (kept in a cookie too) shows that a post comes from this
    /// form, before there is a session to hold one.
    private func signInPage(
        _ request: Request, problem: String? = nil, status: HTTPResponse.Status = .ok,
        retryAfter: Int? = nil
    ) async -> Response {
        // Signed in already: the overview (which says so when the store fails).
        if problem == nil, let cookie = request.cookies[Self.sessionCookie]?.value, (try? await sessions.session(cookie)) != nil {
            return Pages.redirect(to: "/console/")
        }
        return Self.form.page(pages, "console-sign-in", status: status, retryAfter: retryAfter, secure: facts.secure()) { token in
            ConsolePage.SignIn(idleMinutes: sessions.idleSeconds / 60, problem: problem, signInToken: token)
        }
    }

    private func signIn(_ request: Request, _ context: MidtierRequestContext) async -> Response {
        let form: FormBody
        do throws(Refusal) {
            form = try await Self.form.posted(request)
        } catch {
            return await signInPage(request, problem: error.message, status: error.status)
        }
        let token = (form["token"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        switch await authenticator.authenticate(token: token, client: context.clientIP) {
        case .success(let admin):
            let cookie: String
            do throws(Refusal) {
                cookie = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                    try await sessions.start(admin, credentialStamp: authenticator.credentialStamp)
                }
            } catch {
                return await signInPage(request, problem: "The store, which keeps sessions, is not available; try again.", status: error.status)
            }
            logger.notice("console sign-in", metadata: ["by": "\(admin)", "source": "\(context.clientIP ?? "")"])
            return Self.form.signedIn(session: cookie, home: "/console/", secure: facts.secure())
        case .failure(.invalid):
            return await signInPage(request, problem: "That is not a valid admin token.", status: .unauthorized)
        case .failure(.throttled(let seconds)):
            return await signInPage(
                request, problem: "Too many failed sign-ins from here; try again in \(seconds) s.",
                status: .tooManyRequests, retryAfter: seconds)
        case .failure(.busy(let seconds)):
            return await signInPage(
                request, problem: "Too many sign-ins are being checked; try again in \(seconds) s.",
                status: .serviceUnavailable, retryAfter: seconds)
        }
    }

    // MARK: Pages

    private func overview(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let configuration = facts.configuration()
        let exchanges = facts.exchanges().sorted { $0.key < $1.key }.map { name, totals in
            ConsolePage.Overview.Exchanges(destination: name, total: totals.exchanges, failures: totals.failures, failed: totals.failures > 0)
        }
        let onboardingApps = facts.apps().sorted().map { app in
            ConsolePage.Overview.OnboardingApp(
                app: app,
                downloads: OnboardingDownload.Format.allCases.map {
                    .init(href: OnboardingDownload.path(app: app, $0), label: $0.label)
                })
        }
        let overview = ConsolePage.Overview(
            storeReachable: await facts.storeReachable(), storeKind: facts.storeKind, apps: configuration.apps,
            destinations: configuration.destinations, users: configuration.users, exchanges: exchanges,
            hasExchanges: !exchanges.isEmpty, onboardingApps: onboardingApps)
        return pages.page("console-overview", overview, layout: layout(admin, nav: .overview))
    }

    private func users(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let query = try FormBody.query(request)
        let id = query["id"] ?? ""
        let realm = query["realm"] ?? UserIdentity.localRealm
        try Self.checkUser(id, realm)
        var page = ConsolePage.Users(query: .init(id: id), realms: realmOptions(selected: realm))
        let layout = layout(admin, nav: .users)
        guard !id.isEmpty else { return pages.page("console-users", page, layout: layout) }
        let user = UserIdentity(realm: realm, id: id)
        do throws(Refusal) {
            let record = try await administration.user(user)
            let block = record.block.map { block in
                ConsolePage.Users.User.Block(
                    type: block.kind.rawValue, since: Pages.time(block.since), by: block.by,
                    reason: block.reason.isEmpty ? nil : block.reason)
            }
            // Carried percent-encoded: an HTML form would turn a CR into CR LF, a NUL into U+FFFD.
            page.user = ConsolePage.Users.User(
                id: user.id, carriedID: Self.queryValue(user.id), carriedRealm: Self.queryValue(user.realm), known: record.known,
                realmLabel: user.isLocal ? nil : user.realm,
                history: Self.path("/console/audit", [("user", user.id)] + (user.isLocal ? [] : [("realm", user.realm)])),
                registrationsPage: Self.registrationsPage(of: user), block: block,
                registrations: record.registrations.map(registrationRow), hasRegistrations: !record.registrations.isEmpty)
        } catch  where error.status == .notFound {
            page.missing = user.description
            if user.isLocal {
                // By bytes: "Kim" does not stand for "\u{212A}im" (KELVIN SIGN), which is offered.
                let suggestions = facts.localUserIDs().filter { $0.utf8.starts(with: id.utf8) && !UserIdentity.sameBytes($0, id) }
                    .sorted().prefix(20)
                page.suggestions = suggestions.map { .init(id: $0, urlID: Self.queryValue($0)) }
                page.hasSuggestions = !suggestions.isEmpty
            }
        }
        return pages.page("console-users", page, layout: layout)
    }

    /// The user a form names in its carried (percent-encoded) `id` and `realm` fields.
    private static func carriedUser(_ form: FormBody) throws(Refusal) -> UserIdentity {
        guard let id = try form.required("id").removingPercentEncoding, !id.isEmpty,
            let realm = (form["realm"] ?? "").removingPercentEncoding
        else {
            throw .badRequest("the form's user is not percent-encoded as the page sends it")
        }
        try checkUser(id, realm)
        return UserIdentity(realm: realm, id: id)
    }

    /// A user id and realm an admin typed: `400` for a control character, which no user has
    /// (docs/identity.md, "Stored text"), before the store is asked.
    private static func checkUser(_ id: String, _ realm: String) throws(Refusal) {
        try Administration.checkText(id, named: "the user id")
        try Administration.checkText(realm, named: "the realm")
    }

    private func block(_ form: FormBody, _ admin: SignedIn) async throws(Refusal) -> Response {
        let user = try Self.carriedUser(form)
        guard let kind = form["type"].flatMap(UserBlock.Kind.init(rawValue:)) else {
            throw Refusal.badRequest("type must be one of traffic, registration, all")
        }
        let outcome = try await administration.block(user, kind: kind, reason: form["reason"] ?? "", by: admin.actor)
        // An identity provider's user may be blocked before their first sign-in (docs/admin.md).
        let unseen =
            user.isLocal || outcome.seen
            ? "" : " Midtier holds no registration of them yet: check that the id is spelled as their sign-in carries it."
        await note("\(user) is blocked (\(kind.rawValue)).\(unseen)", for: admin)
        return Pages.redirect(to: Self.userPage(user))
    }

    private func unblock(_ form: FormBody, _ admin: SignedIn) async throws(Refusal) -> Response {
        let user = try Self.carriedUser(form)
        try await administration.unblock(user, by: admin.actor)
        await note("\(user) is no longer blocked.", for: admin)
        return Pages.redirect(to: Self.userPage(user))
    }

    private func registrations(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let query = try FormBody.query(request)
        let userID = query["user"] ?? ""
        let realm = query["realm"] ?? UserIdentity.localRealm
        let app = query["app"] ?? ""
        let stateText = query["state"] ?? ""
        try Self.checkUser(userID, realm)
        try Administration.checkText(app, named: "the app")
        var filter = RegistrationFilter()
        if !userID.isEmpty { filter.user = UserIdentity(realm: realm, id: userID) }
        if !app.isEmpty { filter.app = app }
        if !stateText.isEmpty {
            guard let state = Registration.State(rawValue: stateText) else { throw .badRequest("state must be one of active, locked, wiped") }
            filter.state = state
        }
        // A page at a time in the order of the ids' bytes, as the admin API lists them: the
        // next page's link carries the cursor and the filters (docs/console.md, "Registrations").
        let after = try Administration.registrationCursor(query["after"])
        let found = try await administration.registrations(matching: filter, after: after, limit: Self.registrationRows)
        var filters: [(String, String)] = []
        if !userID.isEmpty { filters += [("user", userID)] + (realm.isEmpty ? [] : [("realm", realm)]) }
        if !app.isEmpty { filters.append(("app", app)) }
        if !stateText.isEmpty { filters.append(("state", stateText)) }
        let page = ConsolePage.Registrations(
            query: .init(user: userID), realms: realmOptions(selected: realm),
            apps: facts.apps().sorted().map { ConsolePage.Option(value: $0, selected: $0 == app) },
            states: ["active", "locked", "wiped"].map { ConsolePage.Option(value: $0, selected: $0 == stateText) },
            registrations: found.registrations.map(registrationRow), hasRegistrations: !found.registrations.isEmpty,
            first: after == nil ? nil : Self.path("/console/registrations", filters),
            next: found.next.map { Self.path("/console/registrations", filters + [("after", $0)]) })
        return pages.page("console-registrations", page, layout: layout(admin, nav: .registrations))
    }

    /// The confirmation step before a lock, unlock, wipe or delete.
    private func confirm(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let query = try FormBody.query(request)
        guard let action = query["action"].flatMap(ConsoleAction.init(rawValue:)) else {
            throw .badRequest("action must be one of lock, unlock, wipe, delete")
        }
        guard let id = query["id"], !id.isEmpty else { throw .badRequest("the registration id is missing") }
        let registration = try await administration.registration(id: id)
        let page = ConsolePage.Confirm(
            action: action.rawValue, label: action.label, consequence: action.consequence, id: registration.id,
            user: registration.user.description, app: registration.appId, deviceType: registration.deviceType,
            deviceModel: registration.deviceModel, state: registration.state.rawValue, back: Self.registrationsPage(of: registration.user))
        return pages.page("console-confirm", page, layout: layout(admin, nav: .registrations))
    }

    private func apply(_ action: ConsoleAction, _ form: FormBody, _ admin: SignedIn) async throws(Refusal) -> Response {
        let id = try form.required("id")
        let registration = try await administration.registration(id: id)
        switch action {
        case .lock: _ = try await administration.apply(.lock, to: id, by: admin.actor)
        case .unlock: _ = try await administration.apply(.unlock, to: id, by: admin.actor)
        case .wipe: _ = try await administration.apply(.wipe, to: id, by: admin.actor)
        case .delete: try await administration.delete(id: id, by: admin.actor)
        }
        await note("Registration \(id) of \(registration.user) is \(action.done).", for: admin)
        return Pages.redirect(to: Self.registrationsPage(of: registration.user))
    }

    private func audit(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let query = try FormBody.query(request)
        let userID = query["user"] ?? ""
        let realm = query["realm"] ?? UserIdentity.localRealm
        let registration = query["registration"] ?? ""
        try Self.checkUser(userID, realm)
        try Administration.checkText(registration, named: "the registration id")
        var before: Int64?
        if let text = query["before"], !text.isEmpty {
            guard let sequence = Int64(text), sequence > 0 else { throw .badRequest("before must be an audit sequence number") }
            before = sequence
        }
        let subject: AuditSubject? =
            !registration.isEmpty
            ? .registration(registration)
            : !userID.isEmpty ? .user(UserIdentity(realm: realm, id: userID)) : nil
        let entries = try await administration.recentAudit(before: before, about: subject, limit: Self.auditPage)
        var filters: [(String, String)] = []
        if !userID.isEmpty { filters += [("user", userID), ("realm", realm)] }
        if !registration.isEmpty { filters.append(("registration", registration)) }
        let older =
            entries.count == Self.auditPage
            ? entries.last.map { last in
                Self.path("/console/audit", filters + [("before", String(last.sequence))])
            } : nil
        let page = ConsolePage.Audit(
            query: .init(user: userID, registration: registration), realms: realmOptions(selected: realm),
            entries: entries.map { entry in
                .init(
                    sequence: entry.sequence, at: Pages.time(entry.at), actor: entry.actor, action: entry.action,
                    target: entry.target, detail: entry.detail, source: entry.source)
            },
            hasEntries: !entries.isEmpty, newer: before == nil ? nil : Self.path("/console/audit", filters), older: older)
        return pages.page("console-audit", page, layout: layout(admin, nav: .audit))
    }

    private func destinations(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let page = ConsolePage.Destinations(
            destinations: administration.destinationSummaries().map { destination in
                .init(
                    name: destination.name, url: destination.url, authentication: destination.authentication,
                    timeout: destination.timeoutMilliseconds, headers: destination.headers.joined(separator: ", "),
                    cookies: destination.forwardDeviceCookies.joined(separator: ", "), user: destination.user,
                    tokenService: destination.tokenServiceURL)
            })
        return pages.page("console-destinations", page, layout: layout(admin, nav: .destinations))
    }

    // MARK: Helpers

    private func registrationRow(_ registration: Registration) -> ConsolePage.RegistrationRow {
        ConsolePage.RegistrationRow(
            id: registration.id, user: registration.user.description, app: registration.appId,
            deviceType: registration.deviceType, deviceModel: registration.deviceModel,
            created: Pages.time(registration.createdAt), lastContact: Pages.time(registration.lastContactAt),
            state: registration.state.rawValue,
            history: Self.path("/console/audit", [("registration", registration.id)]),
            clientLogs: Self.path("/console/client-logs", [("registration", registration.id)]),
            actions: ConsoleAction.allowed(from: registration.state).map { action in
                RegistrationActionLink(action: action.rawValue, label: action.label, registrationID: Self.queryValue(registration.id))
            })
    }

    /// `users.json` and each configured issuer, with `selected` chosen (also when it is none
    /// of them: a realm from an older configuration).
    func realmOptions(selected: String) -> [ConsolePage.Option] {
        var realms = [UserIdentity.localRealm] + facts.realms().sorted()
        if !realms.contains(where: { UserIdentity.sameBytes($0, selected) }) { realms.append(selected) }
        return realms.map { realm in
            ConsolePage.Option(value: realm, label: realm.isEmpty ? "users.json" : realm, selected: UserIdentity.sameBytes(realm, selected))
        }
    }

    static func userPage(_ user: UserIdentity) -> String {
        path("/console/users", [("id", user.id)] + (user.isLocal ? [] : [("realm", user.realm)]))
    }

    static func registrationsPage(of user: UserIdentity) -> String {
        path("/console/registrations", [("user", user.id)] + (user.isLocal ? [] : [("realm", user.realm)]))
    }

    static func path(_ path: String, _ query: [(String, String)]) -> String {
        query.isEmpty ? path : path + "?" + query.map { "\($0.0)=\(queryValue($0.1))" }.joined(separator: "&")
    }

    /// A query value percent-encoded (everything but unreserved characters).
    static func queryValue(_ value: String) -> String { value.percentEncoded() }
}

/// What an admin can do to a registration from the console.
enum ConsoleAction: String, CaseIterable, Sendable {
    case lock, unlock, wipe, delete

    var label: String { rawValue.prefix(1).uppercased() + rawValue.dropFirst() }

    var done: String {
        switch self {
        case .lock: "locked"
        case .unlock: "unlocked"
        case .wipe: "wiped"
        case .delete: "deleted"
        }
    }

    var consequence: String {
        switch self {
        case .lock: "Its app's calls are refused (TRAFFIC_REG_LOCKED) until it is unlocked; its back-end sessions end."
        case .unlock: "Its app may call back ends again."
        case .wipe: "Its app's calls are refused for good (TRAFFIC_REG_WIPED) and the app deletes its data. This cannot be undone."
        case .delete: "The registration is removed and its id is never used again; the device must onboard again."
        }
    }

    static func allowed(from state: Registration.State) -> [ConsoleAction] {
        switch state {
        case .active: [.lock, .wipe, .delete]
        case .locked: [.unlock, .wipe, .delete]
        case .wiped: [.delete]
        }
    }
}
