import Callers
import Hummingbird
import MidtierCore
import MidtierHTTP
import MidtierJSON
import MidtierStore
import Registrations

/// What a sender may read of push registrations, as SAP's Notification Backend API serves it
/// (docs/push.md, "Reading registrations"): `GET /mobileservices/push/v2/backend/registrations`
/// (`?username=`, `?pushGroup=`; `?applicationId=` for a sender of several apps) as
/// `{"value":[…]}`, one registration by its id, and `GET …/v2/backend/localizations?usernames=`
/// (the users' locales). Only the sender's apps, only active registrations with a push token.
extension PushSenderRoutes {
    func addReads(to router: Router<MidtierRequestContext>) {
        let root = "/mobileservices/push/v2/backend"
        router.get(RouterPath("\(root)/registrations")) { request, context throws(Refusal) -> Response in
            .json(["value": .array(try await pushRegistrations(request, context).map(Self.registrationJSON))])
        }
        router.get(RouterPath("\(root)/registrations/{registrationId}")) { request, context throws(Refusal) -> Response in
            let id = context.parameters.get("registrationId") ?? ""
            let all = try await pushRegistrations(request, context)
            guard let found = all.first(where: { UserIdentity.sameBytes($0.id, id) }) else {
                throw .notFound("no push registration \(id) in the sender's applications")
            }
            return .json(Self.registrationJSON(found))
        }
        router.get(RouterPath("\(root)/localizations")) { request, context throws(Refusal) -> Response in
            let names = Self.listParameter(request, "usernames")
            guard !names.isEmpty, names.count <= Self.maximumUsers else {
                throw .badRequest("usernames must name 1 to \(Self.maximumUsers) users")
            }
            var locales: [String] = []
            for registration in try await pushRegistrations(request, context, users: names) {
                if let locale = registration.details["UserLocale"], !locales.contains(where: { UserIdentity.sameBytes($0, locale) }) {
                    locales.append(locale)
                }
            }
            return .json(.array(locales.map(JSON.string)))
        }
    }

    /// The active registrations with a push token of the sender's apps (or the one
    /// `applicationId` names), of the users `users` names (or the one `username` names), in the
    /// group `pushGroup` names.
    private func pushRegistrations(
        _ request: Request, _ context: MidtierRequestContext, users: [String]? = nil
    ) async throws(Refusal) -> [Registration] {
        let signIn = signIn.current
        let sender = try await signIn.authenticatePushSender(request, client: context.clientIP)
        let query = request.uri.queryParameters
        // A filter named twice is refused, not read as its first value.
        for name in ["applicationId", "username", "pushGroup"] where query.getAll(name).count > 1 {
            throw .badRequest("\(name) is given more than once; give it once")
        }
        var appIDs = sender.apps
        if let named = query["applicationId"].map(String.init) {
            guard sender.mayUse(app: named) else { throw .forbidden("the sender \(sender.name) may not read application \(named)") }
            appIDs = [named]
        }
        let names = users ?? query["username"].map { [String($0)] }
        let group = query["pushGroup"].map(String.init)
        var found: [Registration] = []
        for appID in appIDs {
            guard let app = signIn.configuration.apps[appID], app.push.isEnabled else { continue }
            let filters =
                names.map { $0.map { RegistrationFilter(user: UserIdentity(realm: Self.realm(of: app), id: $0), app: app.id, state: .active) } }
                ?? [RegistrationFilter(app: app.id, state: .active)]
            for filter in filters {
                let listed = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                    try await registrations.store.registrations(matching: filter)
                }
                found += listed.filter { registration in
                    Self.hasToken(registration, app: app)
                        && (group.map { group in registration.details["PushGroup"].map { UserIdentity.sameBytes($0, group) } ?? false } ?? true)
                }
            }
        }
        return found
    }

    /// A registration in SAP's shape (`PushRegistration` of SAP's Java library).
    static func registrationJSON(_ registration: Registration) -> JSON {
        let formFactor = registration.formFactor.lowercased()
        return .sortedObject([
            "id": .string(registration.id),
            "device": .string(registration.details[Callers.pushDeviceIdDetail] ?? registration.deviceId),
            "deviceModel": .string(registration.deviceModel),
            "formFactor": ["phone", "tablet", "browser"].contains(formFactor) ? .string(formFactor) : .null,
            "pushGroup": registration.details["PushGroup"].map(JSON.string) ?? .null,
            "pushProvider": .string(registration.apnsDeviceToken.isEmpty ? "android" : "ios"),
            "userLocale": registration.details["UserLocale"].map(JSON.string) ?? .null,
            "username": .string(registration.user.id),
        ])
    }

    /// A query parameter given several times or as one comma-separated list.
    static func listParameter(_ request: Request, _ name: String) -> [String] {
        request.uri.queryParameters.getAll(name).flatMap { $0.split(separator: ",") }.map(String.init).filter { !$0.isEmpty }
    }
}
