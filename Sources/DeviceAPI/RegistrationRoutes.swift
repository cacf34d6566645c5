import Callers
import DeviceAuthentication
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import MidtierCore
import MidtierHTTP
import MidtierJSON
import MidtierStore
import Registrations
import SAMLSigning

/// Device onboarding in SAP Mobile Services' wire format (docs/device-api.md, "Onboarding"):
/// `/odata/applications/{latest|v1|v2|…}/{appId}/Connections` and `Connections('{id}')`, in
/// JSON or Atom, with the service's document and `$metadata`. A registration that is not the
/// caller's does not exist for them (404).
struct RegistrationRoutes: Sendable {
    let signIn: CurrentSignIn
    let callers: Callers
    var registrations: RegistrationService { callers.registrations }
    let logger: Logger

    /// SAP's service versions: `latest`, and "v1 onwards" (`v` and a number from 1, at most
    /// four digits).
    static func isVersion(_ version: String) -> Bool {
        if version == "latest" { return true }
        let digits = version.utf8.dropFirst()
        return version.hasPrefix("v") && (1...4).contains(digits.count) && digits.allSatisfy { (0x30...0x39).contains($0) }
            && digits.first != 0x30
    }

    /// OData v2's `MERGE` (a partial update, as `PATCH`).
    static let merge = HTTPRequest.Method("MERGE")!

    func add(to router: Router<MidtierRequestContext>) {
        let path = "/odata/applications/:version/:appId/:entity"
        router.on(RouterPath(path), method: .post) { request, context in try await self.create(request, context) }
        for method in [HTTPRequest.Method.get, .put, .patch, Self.merge, .delete] {
            router.on(RouterPath(path), method: method) { request, context in try await self.single(request, context) }
        }
        router.on(RouterPath("/odata/applications/:version/:appId"), method: .get) { request, context in
            try await self.serviceDocument(request, context)
        }
    }

    /// The sign-in in force (read once per request), and the `{appId}` and `{entity}` of the
    /// path, after checking the version and the app.
    private func target(
        _ context: MidtierRequestContext
    ) throws(Refusal) -> (signIn: CallerSignIn, version: String, app: AppConfiguration, entity: String) {
        let signIn = signIn.current
        let version = context.parameters.get("version") ?? ""
        guard Self.isVersion(version) else { throw .notFound("unknown API version \(version); use latest, v1 or later") }
        let appID = context.parameters.get("appId") ?? ""
        guard let app = signIn.configuration.apps[appID] else { throw .notFound("unknown application \(appID)") }
        let entity = (context.parameters.get("entity") ?? "").removingPercentEncoding ?? ""
        return (signIn, version, app, entity)
    }

    private func create(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let (signIn, version, app, entity) = try target(context)
        if entity == "Endpoints" || entity.hasPrefix("Endpoints(") {
            throw .methodNotAllowed("POST is not supported on Endpoints; they are read-only", allow: "GET")
        }
        guard entity == "Connections" else { throw .notFound("unknown entity set \(entity)") }
        let user = try await signIn.authenticate(request, app: app, client: context.clientIP)
        var body = request
        let device = try await Self.deviceDetails(from: &body, context: context, existing: DeviceDetails())
        // The answer's format: `$format`, then `Accept`, then the request body's (docs/device-api.md).
        let atom = ConnectionAtom.preference(request) ?? ConnectionAtom.isBody(request)
        let registration = try await callers.onboard(
            app: app, user: user.identity, requestedID: RegistrationHeaders.registrationID(of: request),
            device: device, source: context.clientIP ?? "")
        logger.info("device registered", metadata: ["app": "\(app.id)", "user": "\(user.identity)", "registration": "\(registration.id)"])
        try await PushTokenRelease.release(registration, store: registrations.store, logger: logger)
        var response = entityResponse(
            registration, app: app, version: version, publicURL: signIn.configuration.server.publicURL,
            status: .created, atom: atom)
        response.headers[HTTPField.Name("X-SMP-APPCID")!] = registration.id
        response.headers[.setCookie] = "X-SMP-APPCID=\(registration.id); Path=/; HttpOnly; SameSite=Strict\(Self.cookieSecurity(signIn))"
        response.headers[.location] = Self.entityURI(registration, version: version, publicURL: signIn.configuration.server.publicURL)
        return response
    }

    private func single(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let (signIn, version, app, entity) = try target(context)
        if entity == "Endpoints" || entity.hasPrefix("Endpoints(") {
            return try await endpoints(request, context, signIn: signIn, version: version, app: app, entity: entity)
        }
        guard let id = Self.connectionID(entity) else {
            if entity == "$metadata", request.method == .get {
                _ = try await signIn.authenticate(request, app: app, client: context.clientIP)
                let xml = ConnectionAtom.metadata(connection: Self.entityTypes(app: app), endpoint: EndpointsCollection.sample)
                return ConnectionAtom.response(xml, status: .ok, contentType: "application/xml;charset=utf-8")
            }
            if entity == "Connections", request.method == .get {
                return try await collection(request, context, signIn: signIn, version: version, app: app)
            }
            if entity == "Connections" { throw .methodNotAllowed("\(request.method) is not supported on the Connections collection") }
            throw .notFound("unknown entity \(entity)")
        }
        let user = try await signIn.authenticate(request, app: app, client: context.clientIP)
        let notFound = Refusal.notFound("registration \(id) does not exist")
        do {
            switch request.method {
            case .get:
                guard let registration = try await registrations.owned(id: id, user: user.identity, app: app.id) else { throw notFound }
                return entityResponse(
                    registration, app: app, version: version, publicURL: signIn.configuration.server.publicURL,
                    status: .ok, atom: ConnectionAtom.isWanted(request))
            case .delete:
                switch try await registrations.delete(id: id, user: user.identity, app: app.id, source: context.clientIP ?? "") {
                case .deleted:
                    logger.info("registration deleted", metadata: ["app": "\(app.id)", "user": "\(user.identity)", "registration": "\(id)"])
                    // The device forgets the id too: its cookie expires.
                    var response = Response(status: .noContent)
                    response.headers[.setCookie] =
                        "X-SMP-APPCID=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Strict\(Self.cookieSecurity(signIn))"
                    return response
                case .notFound:
                    throw notFound
                case .refused(.locked):
                    throw Refusal.forbidden("the registration is locked; only an admin can delete it", messageCode: "TRAFFIC_REG_LOCKED")
                case .refused:
                    throw Refusal.forbidden("the registration is wiped; only an admin can delete it", messageCode: "TRAFFIC_REG_WIPED")
                }
            default:
                guard let existing = try await registrations.owned(id: id, user: user.identity, app: app.id) else { throw notFound }
                var body = request
                let device = try await Self.deviceDetails(from: &body, context: context, existing: DeviceDetails(of: existing))
                switch try await registrations.updateDevice(
                    id: id, user: user.identity, app: app.id, source: context.clientIP ?? "",
                    policy: app.blockWipingPolicy, { $0 = device })
                {
                case .updated(let updated):
                    try await PushTokenRelease.release(updated, store: registrations.store, logger: logger)
                    return Response(status: .noContent)
                case .notFound:
                    throw notFound
                case .deviceHeld(let held) where UserIdentity.sameBytes(held.id, id):
                    throw DeviceFields.held(held, "its device fields cannot change")
                case .deviceHeld(let held):
                    throw DeviceFields.held(held, "no other registration can take its DeviceId")
                case .tokenHeldByAnotherUser:
                    throw DeviceFields.tokenHeldByAnotherUser
                }
            }
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw Refusal.storeFailed(error, logger)
        }
    }

    /// `GET …/Connections`: the caller's own registrations in this app (`{"d":{"results":[…]}}`,
    /// or an Atom feed).
    private func collection(
        _ request: Request, _ context: MidtierRequestContext, signIn: CallerSignIn, version: String,
        app: AppConfiguration
    ) async throws(Refusal) -> Response {
        let user = try await signIn.authenticate(request, app: app, client: context.clientIP)
        let owned = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user.identity, app: app.id))
        }
        let publicURL = signIn.configuration.server.publicURL
        let entities = owned.map { Self.entity($0, app: app, version: version, publicURL: publicURL) }
        if ConnectionAtom.isWanted(request) {
            let base = "\(publicURL)/odata/applications/\(version)/\(app.id)/Connections"
            return ConnectionAtom.response(ConnectionAtom.feed(entities, base: base, now: registrations.clock.now()), status: .ok)
        }
        return ODataEntity.response(entities)
    }

    /// `GET …/Endpoints` and `GET …/Endpoints('{name}')`: the app's destinations, read-only
    /// (`{"d":{"results":[…]}}` or `{"d":{…}}`, or Atom as for Connections).
    private func endpoints(
        _ request: Request, _ context: MidtierRequestContext, signIn: CallerSignIn, version: String, app: AppConfiguration,
        entity: String
    ) async throws(Refusal) -> Response {
        guard request.method == .get else {
            throw .methodNotAllowed("\(request.method) is not supported on Endpoints; they are read-only", allow: "GET")
        }
        _ = try await signIn.authenticate(request, app: app, client: context.clientIP)
        let configuration = signIn.configuration
        let atom = ConnectionAtom.isWanted(request)
        if entity == "Endpoints" {
            let entities = EndpointsCollection.entities(app: app, configuration: configuration, version: version)
            if atom {
                let base = "\(configuration.server.publicURL)/odata/applications/\(version)/\(app.id)/Endpoints"
                return ConnectionAtom.response(
                    ConnectionAtom.feed(entities, base: base, set: "Endpoints", now: registrations.clock.now()), status: .ok)
            }
            return ODataEntity.response(entities)
        }
        guard let name = EndpointsCollection.key(entity) else { throw .notFound("unknown entity \(entity)") }
        guard let endpoint = EndpointsCollection.entity(named: name, app: app, configuration: configuration, version: version) else {
            throw .notFound("application \(app.id) has no destination \(name)")
        }
        if atom { return ConnectionAtom.response(ConnectionAtom.entry(endpoint, now: registrations.clock.now()), status: .ok) }
        return ODataEntity.response(endpoint)
    }

    /// `GET /odata/applications/{version}/{appId}/`: the service document (Atom by default;
    /// `{"d":{"EntitySets":["Connections","Endpoints"]}}` when `$format` or `Accept` asks for JSON).
    private func serviceDocument(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let version = context.parameters.get("version") ?? ""
        guard Self.isVersion(version) else { throw .notFound("unknown API version \(version); use latest, v1 or later") }
        let appID = context.parameters.get("appId") ?? ""
        let signIn = signIn.current
        guard let app = signIn.configuration.apps[appID] else { throw .notFound("unknown application \(appID)") }
        _ = try await signIn.authenticate(request, app: app, client: context.clientIP)
        if ConnectionAtom.preference(request) == false { return .json(["d": ["EntitySets": .strings(ConnectionAtom.entitySets)]]) }
        let base = "\(signIn.configuration.server.publicURL)/odata/applications/\(version)/\(app.id)/"
        return ConnectionAtom.response(
            ConnectionAtom.serviceDocument(base: base), status: .ok,
            contentType: "application/atomsvc+xml;charset=utf-8")
    }

    /// The Connection entity's properties and their values' kinds, for `$metadata`: those of
    /// an entity as `entity(…)` writes it for this app, so the two never disagree.
    static func entityTypes(app: AppConfiguration) -> ODataEntity {
        let sample = Registration(id: "", appId: app.id, user: UserIdentity(realm: "", id: ""), createdAt: 0)
        return entity(sample, app: app, version: "v1", publicURL: "")
    }

    /// `; Secure` when devices reach Midtier over https.
    private static func cookieSecurity(_ signIn: CallerSignIn) -> String {
        signIn.configuration.server.publicURL.hasPrefix("https:") ? "; Secure" : ""
    }

    /// `Connections('id')` → `id` (OData v2 key syntax, `''` for a quote).
    static func connectionID(_ entity: String) -> String? {
        guard entity.hasPrefix("Connections('"), entity.hasSuffix("')"), entity.count > "Connections('')".count else { return nil }
        let key = entity.dropFirst("Connections('".count).dropLast(2)
        return key.replacingOccurrences(of: "''", with: "'")
    }

    /// Reads the device fields from a JSON body (`{..}` or OData's `{"d":{..}}`) or, when the
    /// `Content-Type` is Atom or XML, an Atom entry's `m:properties` (as strings; `m:null="true"`
    /// as null). Both go through the same checks. Fields that are not given keep their
    /// `existing` values; unknown fields are ignored, as SAP does.
    static func deviceDetails(
        from request: inout Request, context: MidtierRequestContext, existing: DeviceDetails
    ) async throws(Refusal) -> DeviceDetails {
        guard ConnectionAtom.isBody(request) || BrowserRequests.isJSONOrUnlabelled(request) else {
            throw .unsupportedMediaType(request, takes: "application/json, or Atom: application/atom+xml, application/xml")
        }
        let buffer = try await request.collectBody(upTo: context.maxUploadSize, describedAs: "registration body")
        guard buffer.readableBytes > 0 else { return existing }
        let bytes = Array(buffer.readableBytesView)
        var object: [String: JSON]
        if ConnectionAtom.isBody(request) {
            switch DeviceFields.fields(ofAtom: bytes) {
            case .success(let fields):
                object = fields
            case .failure(let problem):
                throw .badRequest("the registration body is not an Atom entry Midtier can read: \(problem.message)")
            }
        } else {
            switch StrictJSON.object(bytes) {
            case .success(let parsed): object = parsed
            case .failure(let error): throw .badRequest("the registration body is not a JSON object: \(error.message)")
            }
            if let wrapped = object["d"] {
                guard let inner = wrapped.members else { throw .badRequest("d must be an object") }
                object = Dictionary(inner.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
            }
        }
        return try DeviceFields.read(object, existing: existing)
    }

    static func entityURI(_ registration: Registration, version: String, publicURL: String) -> String {
        "\(publicURL)/odata/applications/\(version)/\(registration.appId)/Connections('\(registration.id.replacingOccurrences(of: "'", with: "''"))')"
    }

    /// The SAP `Connection` entity: the stored fields, the other writable ones (`""` or
    /// `false` when not sent), and the read-only policy the app gives (`PasswordPolicy…` from
    /// its `passwordPolicy`, `UploadLogs` from `logSettings.logEnabled`).
    static func entity(_ registration: Registration, app: AppConfiguration, version: String, publicURL: String) -> ODataEntity {
        let policy = app.blockWipingPolicy
        var properties: [String: ODataEntity.Value] = [
            "ApplicationConnectionId": .string(registration.id),
            "ApplicationId": .string(registration.appId),
            "DeviceType": .string(registration.deviceType),
            "DeviceModel": .string(registration.deviceModel),
            "DeviceId": .string(registration.deviceId),
            "FormFactor": .string(registration.formFactor),
            "UserName": .string(registration.user.id),
            "CreatedAt": .dateTime(Int64(registration.createdAt)),
            "LastKnownLocation": .string(""),
            "ApnsDeviceToken": .string(registration.apnsDeviceToken),
            "AndroidGcmRegistrationId": .string(registration.androidGcmRegistrationId),
            "BlockWipeEnabled": .bool(policy.blockWipeEnabled),
            "BlockDisconnectedPeriod": .int(policy.blockDisconnectedPeriod),
            "WipeDisconnectedPeriod": .int(policy.wipeDisconnectedPeriod),
            "IsWiped": .bool(registration.state == .wiped),
        ]
        for (name, isBoolean) in DeviceFields.detailFields {
            let value = registration.details[name]
            properties[name] = isBoolean ? .bool(value == "true") : .string(value ?? "")
        }
        for (key, value) in app.passwordPolicy {
            // passwordPolicyMinLength → PasswordPolicyMinLength
            properties[key.prefix(1).uppercased() + key.dropFirst()] = ODataEntity.Value(value)
        }
        if case .bool(let upload)? = app.logSettings["logEnabled"] {
            properties["UploadLogs"] = .bool(upload)
        } else {
            properties["UploadLogs"] = .bool(false)
        }
        return ODataEntity(
            uri: entityURI(registration, version: version, publicURL: publicURL), type: "applications.Connection", properties: properties)
    }

    /// The SAP `{"d":{...}}` entity body, or its Atom `entry` when `atom`.
    func entityResponse(
        _ registration: Registration, app: AppConfiguration, version: String, publicURL: String,
        status: HTTPResponse.Status, atom: Bool = false
    ) -> Response {
        let entity = Self.entity(registration, app: app, version: version, publicURL: publicURL)
        if atom { return ConnectionAtom.response(ConnectionAtom.entry(entity, now: registrations.clock.now()), status: status) }
        return ODataEntity.response(entity, status: status)
    }
}
