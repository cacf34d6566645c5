package import Administration
import Foundation
import HTTPTypes
package import Hummingbird
import Logging
import MidtierCore
package import MidtierHTTP
import MidtierJSON
import MidtierStore
import Registrations
import TokenExchange

/// The admin API on `adminListen`, described in `docs/admin-api.yaml`: JSON over the
/// operations of `Administration`. Every call needs `Authorization: Bearer <admin token>`.
package struct AdminRoutes: Sendable {
    package let administration: Administration
    package let authenticator: AdminAuthenticator

    package init(administration: Administration, authenticator: AdminAuthenticator) {
        self.administration = administration
        self.authenticator = authenticator
    }

    typealias Handler = @Sendable (Request, MidtierRequestContext, AuditActor) async throws(Refusal) -> Response

    package func add(to router: Router<MidtierRequestContext>) {
        router.add(middleware: EmptySegmentCheck(under: "/admin/", described: "admin API"))
        var routes: [(method: HTTPRequest.Method, path: String, handler: Handler)] = [
            (.get, "/admin/v1/users/{userId}", getUser),
            (.put, "/admin/v1/users/{userId}/block", putBlock),
            (.delete, "/admin/v1/users/{userId}/block", deleteBlock),
            (.get, "/admin/v1/registrations", listRegistrations),
            (.get, "/admin/v1/registrations/{id}", getRegistration),
            (.delete, "/admin/v1/registrations/{id}", deleteRegistration),
            (.get, "/admin/v1/destinations", listDestinations),
            (.post, "/admin/v1/config/reload", reloadConfiguration),
            (.delete, "/admin/v1/tokens/{userId}", purgeTokens),
            (.get, "/admin/v1/audit", listAudit),
            (.get, "/admin/v1/client-logs", listClientLogs),
            (.get, "/admin/v1/client-usage", listClientUsage),
            (.get, "/admin/v1/push/notifications", listPushNotifications),
            (.post, "/admin/v1/push/notifications", sendTestNotification),
            (.get, "/admin/v1/push/notifications/{id}", getPushNotification),
        ]
        for action in RegistrationAction.allCases {
            routes.append(
                (
                    .post, "/admin/v1/registrations/{id}/\(action.rawValue)",
                    { request, context, actor throws(Refusal) in
                        try await self.apply(action, request, context, actor)
                    }
                ))
        }
        var served: [String: [HTTPRequest.Method]] = [:]
        for (method, path, handler) in routes {
            route(router, method, path, handler)
            served[path, default: []].append(method)
        }
        // The health checks and metrics this listener also serves (MidtierServer) are read-only.
        for path in ["/healthz", "/readyz", "/metrics"] { served[path] = [.get] }
        // After the routes, so that it sees only what none of them took: 405 for a served path.
        router.add(middleware: AdminMethodCheck(served: served))
    }

    /// Registers `handler` behind the admin-token check.
    private func route(_ router: Router<MidtierRequestContext>, _ method: HTTPRequest.Method, _ path: String, _ handler: @escaping Handler) {
        router.on(RouterPath(path), method: method) { request, context throws(Refusal) -> Response in
            let admin: String
            switch await authenticator.authenticate(authorization: request.headers[.authorization], client: context.clientIP) {
            case .success(let name):
                admin = name
            case .failure(.invalid):
                throw Refusal(.unauthorized, code: "UNAUTHORIZED", "a valid admin token is required", challenge: "Bearer realm=\"midtier-admin\"")
            case .failure(.throttled(let seconds)):
                throw Refusal.tooManySignIns("too many failed admin sign-ins; try again in \(seconds) s", retryAfter: seconds)
            case .failure(.busy(let seconds)):
                throw Refusal.signInBusy("too many admin tokens are being checked; try again in \(seconds) s", retryAfter: seconds)
            }
            return try await handler(request, context, AuditActor(name: admin, source: context.clientIP ?? ""))
        }
    }

    func parameter(_ context: MidtierRequestContext, _ name: String) throws(Refusal) -> String {
        guard let raw = context.parameters.get(name), !raw.isEmpty else { throw .badRequest("\(name) is missing") }
        guard let value = raw.removingPercentEncoding, !value.isEmpty else {
            throw .badRequest("\(name) has a malformed percent-encoding")
        }
        return value
    }

    /// The query parameter `name`, if given; `400` naming it when it has a control character
    /// (`Administration.checkText`).
    func query(_ request: Request, _ name: String) throws(Refusal) -> String? {
        guard let value = try single(request, name) else { return nil }
        try Administration.checkText(value, named: name)
        return value
    }

    /// The user a path names: `{userId}` in the realm the `realm` query names — absent or
    /// empty for `users.json`, else a JWT issuer exactly as configured (docs/identity.md).
    private func user(_ request: Request, _ context: MidtierRequestContext) throws(Refusal) -> UserIdentity {
        let id = try parameter(context, "userId")
        try Administration.checkText(id, named: "userId")
        return UserIdentity(realm: try query(request, "realm") ?? UserIdentity.localRealm, id: id)
    }

    // MARK: Users and blocks

    private func getUser(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let record = try await administration.user(try user(request, context))
        // The user's Storage service documents, sizes only (docs/device-api.md, "User and device storage").
        let storage: [StorageEntry]
        do {
            storage = try await administration.registrations.store.storageEntries(of: record.user)
        } catch {
            throw .storeUnavailable
        }
        return .json(UserJSON(record: record, storage: storage).json)
    }

    private func putBlock(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let user = try user(request, context)
        let body = try await Self.jsonObject(request, context)
        guard case .string(let type)? = body["type"], let kind = UserBlock.Kind(rawValue: type) else {
            throw .badRequest("type must be one of traffic, registration, all")
        }
        let reasonText: String
        switch body["reason"] {
        case nil: reasonText = ""
        case .string(let text)?: reasonText = text
        case _?: throw .badRequest("reason must be a string of at most \(Administration.maximumReasonBytes) bytes")
        }
        guard Set(body.keys).isSubset(of: ["type", "reason"]) else {
            throw .badRequest("unknown member \(body.keys.sorted().first { !["type", "reason"].contains($0) } ?? "")")
        }
        let outcome = try await administration.block(user, kind: kind, reason: reasonText, by: actor)
        return .json(BlockOutcomeJSON(user: user, outcome: outcome).json)
    }

    private func deleteBlock(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        try await administration.unblock(try user(request, context), by: actor)
        return Response(status: .noContent)
    }

    // MARK: Registrations

    private func listRegistrations(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        var filter = RegistrationFilter()
        let realm = try query(request, "realm")
        // `realm` qualifies `user`; alone it filters nothing (docs/admin.md).
        if let user = try query(request, "user") { filter.user = UserIdentity(realm: realm ?? UserIdentity.localRealm, id: user) }
        if let app = try query(request, "app") { filter.app = app }
        if let state = try single(request, "state") {
            guard let parsed = Registration.State(rawValue: state) else { throw .badRequest("state must be one of active, locked, wiped") }
            filter.state = parsed
        }
        let limit = try Administration.pageLimit(
            try single(request, "limit"), default: Administration.registrationPageDefault, maximum: Administration.registrationPageMaximum)
        let after = try Administration.registrationCursor(try single(request, "after"))
        let page = try await administration.registrations(matching: filter, after: after, limit: limit)
        var answer: [String: JSON] = ["registrations": .array(page.registrations.map { RegistrationJSON($0).json })]
        if let next = page.next { answer["next"] = .string(next) }
        return .json(.sortedObject(answer))
    }

    /// The query parameter `name`, if given, once: given twice is a `400` naming it (which
    /// one would count is not for the server to guess).
    func single(_ request: Request, _ name: String) throws(Refusal) -> String? {
        let values = request.uri.queryParameters.getAll(name)
        guard values.count <= 1 else { throw .badRequest("\(name) is given more than once") }
        return values.first.map { String($0) }
    }

    private func getRegistration(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let found = try await administration.registration(id: try parameter(context, "id"))
        return .json(RegistrationJSON(found).json)
    }

    private func apply(
        _ action: RegistrationAction, _ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor
    ) async throws(Refusal) -> Response {
        let registration = try await administration.apply(action, to: try parameter(context, "id"), by: actor)
        return .json(RegistrationJSON(registration).json)
    }

    private func deleteRegistration(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        try await administration.delete(id: try parameter(context, "id"), by: actor)
        return Response(status: .noContent)
    }

    // MARK: Destinations, configuration, tokens, audit

    private func listDestinations(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        .json(["destinations": .array(administration.destinationSummaries().map { DestinationJSON($0).json })])
    }

    private func reloadConfiguration(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let answer = ReloadJSON(outcome: await administration.reload(actor))
        return .json(answer.json, status: answer.status)
    }

    private func purgeTokens(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let user = try user(request, context)
        let purged = try await administration.purgeTokens(of: user, by: actor)
        return .json(["purged": .number(purged), "realm": .string(user.realm), "userId": .string(user.id)])
    }

    private func listAudit(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let query = request.uri.queryParameters
        var since: Int64 = 0
        if let text = query["since"].map(String.init), !text.isEmpty {
            // Milliseconds as the document's pattern has them: an optional minus, 1 to 18 digits.
            let digits = text.utf8.first == UInt8(ascii: "-") ? text.utf8.dropFirst() : text.utf8[...]
            if (1...18).contains(digits.count), digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                let milliseconds = Int64(text)
            {
                since = milliseconds
            } else if let milliseconds = RFC3339Time.milliseconds(text) {
                since = milliseconds
            } else {
                throw .badRequest("since must be an RFC 3339 date-time (2025-03-01T08:15:00Z) or milliseconds since 1970 (at most 18 digits)")
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
        let entries = try await administration.audit(since: since, after: after, limit: limit)
        return .json(["entries": .array(entries.map { AuditEntryJSON($0).json })])
    }

    /// The body as a JSON object, read strictly (docs/admin.md): a key given twice, a trailing
    /// comma or anything but one object is a `400` that says what and where.
    static func jsonObject(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> [String: JSON] {
        var request = request
        let buffer = try await request.collectBody(upTo: context.maxUploadSize, describedAs: "body")
        switch StrictJSON.object(Array(buffer.readableBytesView)) {
        case .success(let object): return object
        case .failure(let error): throw .badRequest("the body must be a JSON object: \(error.message)")
        }
    }
}
