import Callers
import DeviceAuthentication
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MidtierCore
import MidtierHTTP
import MidtierStore
import Registrations

/// Self-service for a user and their own devices only (docs/device-api.md, "Self-service"):
/// `GET /mobileservices/me/registrations`, `POST /mobileservices/me/registrations/{id}/lock`
/// and `…/wipe`. A registration that is not the caller's does not exist for them (404).
///
/// Who is calling: HTTP Basic against `users.json`, or a bearer JWT of an identity provider a
/// jwt app trusts; the user is realm and id (docs/identity.md), so `alice` of an IdP never sees
/// or touches the registrations of `alice` of `users.json`.
struct SelfServiceRoutes: Sendable {
    let signIn: CurrentSignIn
    let callers: Callers
    var registrations: RegistrationService { callers.registrations }
    let logger: Logger

    func add(to router: Router<MidtierRequestContext>) {
        router.get("/mobileservices/me/registrations") { request, context throws(Refusal) -> Response in
            let signIn = signIn.current
            let user = try await signIn.authenticateInAnyRealm(request, client: context.clientIP)
            let owned = try await store { () async throws(StoreError) in
                try await registrations.store.registrations(matching: RegistrationFilter(user: user.identity))
            }
            let publicURL = signIn.configuration.server.publicURL
            let entities = owned.map { registration in
                RegistrationRoutes.entity(
                    registration, app: signIn.configuration.apps[registration.appId] ?? AppConfiguration(id: registration.appId),
                    version: "v1", publicURL: publicURL)
            }
            return ODataEntity.response(entities)
        }
        for action in [RegistrationAction.lock, .wipe] {
            router.post("/mobileservices/me/registrations/{id}/\(action.rawValue)") { request, context throws(Refusal) -> Response in
                let signIn = signIn.current
                let user = try await signIn.authenticateInAnyRealm(request, client: context.clientIP)
                let id = context.parameters.get("id")?.removingPercentEncoding ?? ""
                let notFound = Refusal.notFound("registration \(id) does not exist")
                guard RegistrationService.isAcceptableID(id),
                    let registration = try await store({ () async throws(StoreError) in try await registrations.store.registration(id: id) }),
                    registration.user == user.identity
                else { throw notFound }
                let result = try await store { () async throws(StoreError) in
                    try await registrations.apply(action, to: id, by: .user(user.identity, source: context.clientIP ?? ""))
                }
                switch result {
                case .changed(let changed):
                    logger.notice("registration \(action.rawValue) by its user", metadata: ["registration": "\(id)", "user": "\(user.identity)"])
                    let app = signIn.configuration.apps[changed.appId] ?? AppConfiguration(id: changed.appId)
                    return ODataEntity.response(
                        RegistrationRoutes.entity(
                            changed, app: app, version: "v1",
                            publicURL: signIn.configuration.server.publicURL))
                case .notFound:
                    throw notFound
                case .refused(let current):
                    throw Refusal(.conflict, code: "CONFLICT", "registration \(id) is \(current.rawValue) and cannot be locked")
                }
            }
        }
    }

    private func store<T>(_ operation: () async throws(StoreError) -> T) async throws(Refusal) -> T {
        try await Refusal.unlessStoreFails(logger, operation)
    }
}
