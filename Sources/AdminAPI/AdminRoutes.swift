import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MidtierConfiguration
import MidtierCore
import MidtierHTTP
import Registrations
import TokenExchange

/// What reloading the configuration did.
public enum ReloadOutcome: Sendable {
    case reloaded(apps: Int, destinations: Int, users: Int)
    /// The new files have problems (`file: key: what`); the old configuration stays in force.
    case rejected([String])
}

/// The admin API on `adminListen` (SPEC §7), described in `docs/admin-api.yaml`. Every call
/// needs `Authorization: Bearer <admin token>`; every change is audited with the admin's
/// name and address, in the same transaction as the change.
public struct AdminRoutes: Sendable {
    public let registrations: RegistrationService
    public let tokens: TokenCache
    public let authenticator: AdminAuthenticator
    public let destinations: @Sendable () -> [DestinationConfiguration]
    public let knownUser: @Sendable (UserIdentity) -> Bool
    public let reload: @Sendable (Actor) async -> ReloadOutcome
    public let logger: Logger

    public init(registrations: RegistrationService, tokens: TokenCache, authenticator: AdminAuthenticator,
                destinations: @escaping @Sendable () -> [DestinationConfiguration], knownUser: @escaping @Sendable (UserIdentity) -> Bool,
                reload: @escaping @Sendable (Actor) async -> ReloadOutcome, logger: Logger) {
        self.registrations = registrations
        self.tokens = tokens
        self.authenticator = authenticator
        self.destinations = destinations
        self.knownUser = knownUser
        self.reload = reload
        self.logger = logger
    }

    typealias Handler = @Sendable (Request, MidtierRequestContext, Actor) async throws(Refusal) -> Response

    public func add(to router: Router<MidtierRequestContext>) {
        route(router, .get, "/admin/v1/users/{userId}", getUser)
        route(router, .put, "/admin/v1/users/{userId}/block", putBlock)
        route(router, .delete, "/admin/v1/users/{userId}/block", deleteBlock)
        route(router, .get, "/admin/v1/registrations", listRegistrations)
        route(router, .get, "/admin/v1/registrations/{id}", getRegistration)
        for action in RegistrationAction.allCases {
            route(router, .post, "/admin/v1/registrations/{id}/\(action.rawValue)") { request, context, actor throws(Refusal) in
                try await self.apply(action, request, context, actor)
            }
        }
        route(router, .delete, "/admin/v1/registrations/{id}", deleteRegistration)
        route(router, .get, "/admin/v1/destinations", listDestinations)
        route(router, .post, "/admin/v1/config/reload", reloadConfiguration)
        route(router, .delete, "/admin/v1/tokens/{userId}", purgeTokens)
        route(router, .get, "/admin/v1/audit", listAudit)
    }

    /// Registers `handler` behind the admin-token check.
    private func route(_ router: Router<MidtierRequestContext>, _ method: HTTPRequest.Method, _ path: String, _ handler: @escaping Handler) {
        router.on(RouterPath(path), method: method) { request, context -> Response in
            let admin: String
            switch await authenticator.authenticate(authorization: request.headers[.authorization], client: context.clientIP) {
            case .success(let name):
                admin = name
            case .failure(.invalid):
                return Refusal(.unauthorized, code: "UNAUTHORIZED", "a valid admin token is required",
                               challenge: "Bearer realm=\"midtier-admin\"").response
            case .failure(.throttled(let seconds)):
                return Refusal.tooManySignIns("too many failed admin sign-ins; try again in \(seconds) s", retryAfter: seconds).response
            case .failure(.busy(let seconds)):
                return Refusal.signInBusy("too many admin tokens are being checked; try again in \(seconds) s", retryAfter: seconds).response
            }
            do throws(Refusal) {
                return try await handler(request, context, Actor(name: admin, source: context.clientIP ?? ""))
            } catch {
                return error.response
            }
        }
    }

    private func store<T>(_ body: () async throws(StoreError) -> T) async throws(Refusal) -> T {
        do {
            return try await body()
        } catch {
            logger.error("store failed", metadata: ["error": "\(error)"])
            throw .unavailable("the store is not available; try again")
        }
    }

    private func parameter(_ context: MidtierRequestContext, _ name: String) throws(Refusal) -> String {
        guard let raw = context.parameters.get(name), !raw.isEmpty else { throw .badRequest("\(name) is missing") }
        guard let value = raw.removingPercentEncoding, !value.isEmpty else {
            throw .badRequest("\(name) has a malformed percent-encoding")
        }
        return value
    }

    /// The user a path names: `{userId}` in the realm the `realm` query names — absent or
    /// empty for `users.json`, else a JWT issuer exactly as configured (docs/identity.md).
    private func user(_ request: Request, _ context: MidtierRequestContext) throws(Refusal) -> UserIdentity {
        let id = try parameter(context, "userId")
        return UserIdentity(realm: request.uri.queryParameters["realm"].map(String.init) ?? UserIdentity.localRealm, id: id)
    }

    // MARK: Users and blocks

    private func getUser(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let user = try user(request, context)
        let block = try await store { () async throws(StoreError) in try await registrations.store.block(of: user) }
        let owned = try await store { () async throws(StoreError) in try await registrations.store.registrations(matching: RegistrationFilter(user: user)) }
        guard knownUser(user) || block != nil || !owned.isEmpty else { throw .notFound("user \(user) is not known") }
        return AdminJSON.response(.ok, ["userId": user.id, "realm": user.realm, "known": knownUser(user), "block": AdminJSON.block(block),
                                        "registrations": owned.map(AdminJSON.registration)])
    }

    private func putBlock(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let user = try user(request, context)
        let body = try await Self.jsonObject(request, context)
        guard let type = body["type"] as? String, let kind = UserBlock.Kind(rawValue: type) else {
            throw .badRequest("type must be one of traffic, registration, all")
        }
        let reason = body["reason"] ?? ""
        guard let reasonText = reason as? String, reasonText.utf8.count <= 1000 else { throw .badRequest("reason must be a string of at most 1000 bytes") }
        guard Set(body.keys).isSubset(of: ["type", "reason"]) else {
            throw .badRequest("unknown member \(body.keys.sorted().first { !["type", "reason"].contains($0) } ?? "")")
        }
        let block = UserBlock(user: user, kind: kind, reason: reasonText, since: registrations.now(), by: actor.name)
        let audit = AuditEntry(at: block.since, actor: actor.name, action: "user.block", target: user.description,
                               detail: "\(kind.rawValue): \(reasonText)", source: actor.source)
        try await store { () async throws(StoreError) in try await registrations.store.setBlock(block, audit: audit) }
        let dropped = tokens.remove(user: user)
        logger.notice("user blocked", metadata: ["user": "\(user)", "type": "\(kind.rawValue)", "by": "\(actor.name)", "tokensDropped": "\(dropped)"])
        return AdminJSON.response(.ok, ["userId": user.id, "realm": user.realm, "block": AdminJSON.block(block)])
    }

    private func deleteBlock(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let user = try user(request, context)
        let audit = AuditEntry(at: registrations.now(), actor: actor.name, action: "user.unblock", target: user.description, source: actor.source)
        let removed = try await store { () async throws(StoreError) in try await registrations.store.removeBlock(of: user, audit: audit) }
        guard removed else { throw .notFound("user \(user) is not blocked") }
        logger.notice("user unblocked", metadata: ["user": "\(user)", "by": "\(actor.name)"])
        return Response(status: .noContent)
    }

    // MARK: Registrations

    private func listRegistrations(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let query = request.uri.queryParameters
        var filter = RegistrationFilter()
        if let user = query["user"] { filter.user = UserIdentity(realm: query["realm"].map(String.init) ?? UserIdentity.localRealm, id: String(user)) }
        if let app = query["app"] { filter.app = String(app) }
        if let state = query["state"] {
            guard let parsed = Registration.State(rawValue: String(state)) else { throw .badRequest("state must be one of active, locked, wiped") }
            filter.state = parsed
        }
        let found = try await store { () async throws(StoreError) in try await registrations.store.registrations(matching: filter) }
        return AdminJSON.response(.ok, ["registrations": found.map(AdminJSON.registration)])
    }

    private func getRegistration(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let id = try parameter(context, "id")
        guard let found = try await store({ () async throws(StoreError) in try await registrations.store.registration(id: id) }) else {
            throw .notFound("registration \(id) does not exist")
        }
        return AdminJSON.response(.ok, AdminJSON.registration(found))
    }

    private func apply(_ action: RegistrationAction, _ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let id = try parameter(context, "id")
        let result = try await store { () async throws(StoreError) in try await registrations.apply(action, to: id, by: actor) }
        switch result {
        case .changed(let registration):
            logger.notice("registration \(action.rawValue)", metadata: ["registration": "\(id)", "by": "\(actor.name)"])
            return AdminJSON.response(.ok, AdminJSON.registration(registration))
        case .notFound:
            throw .notFound("registration \(id) does not exist")
        case .refused(let current):
            throw Refusal(.conflict, code: "CONFLICT", "registration \(id) is \(current.rawValue); a wiped registration cannot be \(action.rawValue)ed")
        }
    }

    private func deleteRegistration(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let id = try parameter(context, "id")
        switch try await store({ () async throws(StoreError) in try await registrations.delete(id: id, by: actor) }) {
        case .deleted:
            logger.notice("registration deleted", metadata: ["registration": "\(id)", "by": "\(actor.name)"])
            return Response(status: .noContent)
        case .notFound, .refused:
            throw .notFound("registration \(id) does not exist")
        }
    }

    // MARK: Destinations, configuration, tokens, audit

    private func listDestinations(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        AdminJSON.response(.ok, ["destinations": destinations().sorted { $0.name < $1.name }.map(AdminJSON.destination)])
    }

    private func reloadConfiguration(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        switch await reload(actor) {
        case .reloaded(let apps, let destinations, let users):
            return AdminJSON.response(.ok, ["status": "reloaded", "apps": apps, "destinations": destinations, "users": users])
        case .rejected(let problems):
            return AdminJSON.response(.unprocessableContent, [
                "error": ["code": "CONFIG_INVALID", "message": ["lang": "en", "value": "the new configuration has \(problems.count) problem(s); the old one stays in force"]],
                "problems": problems,
            ])
        }
    }

    private func purgeTokens(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let user = try user(request, context)
        let purged = tokens.remove(user: user)
        let audit = AuditEntry(at: registrations.now(), actor: actor.name, action: "tokens.purge", target: user.description, detail: "\(purged) token(s)", source: actor.source)
        // Through the store, so that every instance sharing it drops the user's tokens too.
        try await store { () async throws(StoreError) in try await registrations.store.purgeTokens(of: user, audit: audit) }
        return AdminJSON.response(.ok, ["userId": user.id, "realm": user.realm, "purged": purged])
    }

    private func listAudit(_ request: Request, _ context: MidtierRequestContext, _ actor: Actor) async throws(Refusal) -> Response {
        let query = request.uri.queryParameters
        var since: Int64 = 0
        if let text = query["since"].map(String.init), !text.isEmpty {
            if let milliseconds = Int64(text) {
                since = milliseconds
            } else if let date = try? Date(text, strategy: .iso8601) {
                since = Int64(date.timeIntervalSince1970 * 1000)
            } else {
                throw .badRequest("since must be an ISO 8601 time or milliseconds since 1970")
            }
        }
        var after: Int64 = 0
        if let text = query["after"] {
            guard let sequence = Int64(text), sequence >= 0 else {
                throw .badRequest("after must be the sequence number of an audit entry (a whole number from 0)")
            }
            after = sequence
        }
        var limit = 1000
        if let text = query["limit"] {
            guard let parsed = Int(text), (1...10_000).contains(parsed) else { throw .badRequest("limit must be between 1 and 10000") }
            limit = parsed
        }
        let entries = try await store { () async throws(StoreError) in try await registrations.store.audit(since: since, after: after, limit: limit) }
        return AdminJSON.response(.ok, ["entries": entries.map(AdminJSON.audit)])
    }

    static func jsonObject(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> [String: Any] {
        var request = request
        let buffer = try await request.collectBody(upTo: context.maxUploadSize, describedAs: "body")
        guard let object = (try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView))) as? [String: Any] else {
            throw .badRequest("the body must be a JSON object")
        }
        return object
    }
}
