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

/// SAP Mobile Services' Storage service (docs/device-api.md, "Storage service"), under
/// - `…/mobileservices/application/{appId}/Storage/v1/runtime/application/{appId}/…`
///   (SAPcpmsSettings on iOS, `Settings` on Android);
/// - `…/mobileservices/Storage/v1/runtime/application/{appId}/…` (MDK).
///
/// `global/{keyPath}`: the app's client policy, from the same document as the settings
/// exchange; a GET answers the value at the key path (`mobileservices/settingsExchange/passwordPolicy`);
/// read-only for devices.
///
/// `currentuser/{name}/{keyPath}` and `device/{registrationId}/{name}/{keyPath}`: JSON documents
/// of the signed-in user, and of one of the user's registrations (docs/device-api.md, "User and
/// device storage"). GET answers the value at the key path, PUT sets it, DELETE removes it.
///
/// Signed in and throttled exactly as `GET /mobileservices/settingsExchange/v1/{appId}`; the
/// user and device levels also refuse a blocked user and a locked or wiped registration as the
/// proxy does.
struct StorageRoutes: Sendable {
    let signIn: CurrentSignIn
    let callers: Callers
    var registrations: RegistrationService { callers.registrations }
    let logger: Logger

    /// The most bytes of one document (its JSON text as stored), and of all a user's documents
    /// (each counted with its name, ``StorageKey/storedSize(of:)``).
    static let documentLimit = 64 * 1024
    static let userLimit = 1024 * 1024

    static let roots = [
        "/mobileservices/application/{appId}/Storage/v1/runtime/application/{storageAppId}",
        "/mobileservices/Storage/v1/runtime/application/{appId}",
    ]
    static let prefixes = roots.map { $0 + "/global" }

    func add(to router: Router<MidtierRequestContext>) {
        for prefix in Self.prefixes {
            for path in [prefix, prefix + "/**"] {
                router.get(RouterPath(path)) { request, context throws(Refusal) -> Response in
                    let (app, _) = try await self.signedIn(request, context)
                    let keyPath = try Self.keyPath(context)
                    guard let value = StorageDocuments.storedValue(at: keyPath, in: ClientConfigurationRoutes.settings(app)) else {
                        throw .notFound("no setting at global/\(keyPath.joined(separator: "/")) in application \(app.id)")
                    }
                    return .json(value)
                }
                for method in [HTTPRequest.Method.put, .post, .patch, .delete] {
                    router.on(RouterPath(path), method: method) { request, context throws(Refusal) -> Response in
                        let (app, _) = try await self.signedIn(request, context)
                        throw .forbidden(
                            "the global settings of application \(app.id) are read-only for devices; an administrator sets them in the app's configuration"
                        )
                    }
                }
            }
        }
        for root in Self.roots {
            for level in [root + "/currentuser", root + "/device/{deviceId}"] {
                for path in [level, level + "/**"] {
                    for method in [HTTPRequest.Method.get, .put, .delete, .post, .patch] {
                        router.on(RouterPath(path), method: method) { request, context throws(Refusal) -> Response in
                            try await self.personal(request, context)
                        }
                    }
                }
            }
        }
    }

    // MARK: currentuser and device

    /// A GET, PUT or DELETE on the user or device level.
    private func personal(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let (app, user) = try await signedIn(request, context)
        let level = try await admitted(request, context, app: app, user: user.identity)
        let keyPath = try Self.keyPath(context)
        let levelPath = Self.path(of: level)
        let store = registrations.store
        guard let name = keyPath.first else {
            guard request.method == .get else {
                throw .badRequest("\(request.method) needs a document name after \(levelPath) (…/\(levelPath)/{name}[/{key}…])")
            }
            return .json(try await levelDocuments(request, app: app, user: user.identity, level: level))
        }
        // The name is kept in the store: no control characters (docs/identity.md, "Stored text").
        guard !StoredText.hasControlCharacters(name) else { throw .badRequest("the document name has a control character") }
        let key = StorageKey(app: app.id, user: user.identity, level: level, name: name)
        let inside = Array(keyPath.dropFirst())
        let place = "\(levelPath)/\(keyPath.joined(separator: "/"))"
        switch request.method {
        case .get where Self.overwrite(request):
            let merged = try await levelDocuments(request, app: app, user: user.identity, level: level)
            guard let value = StorageDocuments.storedValue(at: keyPath, in: merged) else {
                throw .notFound("nothing is stored at \(place), nor above it")
            }
            return .json(value)
        case .get:
            let text = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await store.storageDocument(key) }
            guard let text, let value = StorageDocuments.storedValue(at: inside, in: StorageDocuments.document(text)) else {
                throw .notFound("nothing is stored at \(place)")
            }
            return .json(value)
        case .put:
            let value = try await Self.body(request, inside: inside.count)
            return try await write(key, place: place) { current throws(Refusal) in
                try StorageDocuments.setting(value, at: inside[...], in: current.map(StorageDocuments.document) ?? [:], place: place)
            }
        case .post:
            let value = try await Self.body(request, inside: inside.count)
            return try await write(key, place: place) { current throws(Refusal) in
                let document = current.map(StorageDocuments.document) ?? [:]
                if current != nil, StorageDocuments.storedValue(at: inside, in: document) != nil {
                    throw Refusal(.conflict, code: "CONFLICT", "something is already stored at \(place); PUT replaces it, PATCH merges into it")
                }
                return try StorageDocuments.setting(value, at: inside[...], in: document, place: place)
            }
        case .patch:
            let patch = try await Self.body(request, inside: inside.count)
            return try await write(key, place: place) { current throws(Refusal) in
                let document = current.map(StorageDocuments.document) ?? [:]
                let merged = StorageDocuments.mergePatch(StorageDocuments.storedValue(at: inside, in: document) ?? .null, with: patch)
                return try StorageDocuments.setting(merged, at: inside[...], in: document, place: place)
            }
        case .delete:
            return try await write(key, place: place) { current throws(Refusal) in
                guard let current else { throw .notFound("nothing is stored at \(place)") }
                guard !inside.isEmpty else { return nil }
                return try StorageDocuments.removing(inside[...], from: StorageDocuments.document(current), place: place)
            }
        default:
            throw .methodNotAllowed("\(request.method) is not supported on the user and device storage", allow: "GET, PUT, POST, PATCH, DELETE")
        }
    }

    /// How the paths name `level`: `currentuser` or `device/{registrationId}`.
    static func path(of level: StorageLevel) -> String {
        switch level {
        case .user: "currentuser"
        case .registration(let id): "device/\(id)"
        }
    }

    /// Whether a GET asks for the levels above merged in (`?overwrite=true`, SAP's runtime API).
    static func overwrite(_ request: Request) -> Bool {
        request.uri.queryParameters["overwrite"].map { $0.lowercased() == "true" } ?? false
    }

    /// The documents of a level by name. With `?overwrite=true`, the levels above are merged
    /// in under it, as SAP's runtime API does: the app's `global` settings, then the user's
    /// documents, then (for a device) the registration's; a lower level's value wins, objects
    /// merge member by member.
    private func levelDocuments(
        _ request: Request, app: AppConfiguration, user: UserIdentity,
        level: StorageLevel
    ) async throws(Refusal) -> JSON {
        let store = registrations.store
        let levels: [StorageLevel] = Self.overwrite(request) ? (level == .user ? [.user] : [.user, level]) : [level]
        var merged: JSON = Self.overwrite(request) ? ClientConfigurationRoutes.settings(app) : [:]
        for level in levels {
            let documents = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await store.storageDocuments(app: app.id, user: user, level: level)
            }
            merged = StorageDocuments.merging(
                .object(documents.map { JSONMember(key: $0.name, value: StorageDocuments.document($0.text)) }), over: merged)
        }
        return merged
    }

    /// A PUT, POST or PATCH body (``StorageDocuments/object(_:inside:)``), JSON-labelled or
    /// unlabelled, at most `documentLimit` bytes.
    private static func body(_ request: Request, inside: Int) async throws(Refusal) -> JSON {
        guard BrowserRequests.isJSONOrUnlabelled(request) else { throw .unsupportedMediaType(request, takes: "application/json") }
        var body = request
        let bytes = try await body.collectBody(upTo: documentLimit, describedAs: "storage document")
        return try StorageDocuments.object(Array(buffer: bytes), inside: inside)
    }

    /// Writes the document `change` makes of the stored one (nil: delete it), in the store's
    /// transaction; 200 with SAP's `code` and `message`.
    private func write(
        _ key: StorageKey, place: String,
        _ change: @escaping @Sendable (String?) throws(Refusal) -> JSON?
    ) async throws(Refusal) -> Response {
        let now = registrations.clock.now()
        let store = registrations.store
        let result = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await store.writeStorage(key, userLimit: Self.userLimit, now: now) { current -> StorageEdit<Refusal> in
                do throws(Refusal) {
                    guard let document = try change(current) else { return .remove }
                    let text = StorageDocuments.text(document)
                    guard text.utf8.count <= Self.documentLimit else {
                        return .refuse(
                            Refusal(
                                .contentTooLarge, code: "PAYLOAD_TOO_LARGE",
                                "the document \(key.name) would be larger than \(Self.documentLimit) bytes"))
                    }
                    return .set(text)
                } catch {
                    return .refuse(error)
                }
            }
        }
        switch result {
        case .written: return .json(["code": 200, "message": .string("stored at \(place)")])
        case .removed: return .json(["code": 200, "message": .string("deleted \(place)")])
        case .refused(let refusal): throw refusal
        case .overUserLimit(let limit):
            throw Refusal(.contentTooLarge, code: "PAYLOAD_TOO_LARGE", "the user's stored documents together would be larger than \(limit) bytes")
        case .registrationInactive:
            throw .forbidden("the registration \(key.level.storedRegistration) is no longer active")
        }
    }

    /// The level the call reaches: for `device/{id}`, the caller's own registration in this app
    /// that `{id}` names (``Callers/registration(namedByDevicePath:request:app:user:)``); for
    /// `currentuser`, the user, not blocked, and the caller's registration admitted too when the
    /// call names one.
    private func admitted(
        _ request: Request, _ context: MidtierRequestContext, app: AppConfiguration,
        user: UserIdentity
    ) async throws(Refusal) -> StorageLevel {
        if let raw = context.parameters.get("deviceId") {
            guard let decoded = raw.removingPercentEncoding else { throw .badRequest("the device id \(raw) is not percent-encoded correctly") }
            return .registration(try await callers.registration(namedByDevicePath: decoded, request: request, app: app, user: user))
        }
        if let named = RegistrationHeaders.registrationID(of: request) {
            try await callers.admit(registration: named, app: app, user: user)
            return .user
        }
        let block = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await registrations.store.block(of: user) }
        if let block, block.kind.blocksTraffic { throw Refusal.userBlocked(block.kind) }
        return .user
    }

    // MARK: Signing in

    /// The app the path names and its signed-in caller (the storage app must be the same app).
    private func signedIn(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> (AppConfiguration, AuthenticatedUser) {
        try await ServiceSignIn.signedIn(request, context, signIn: signIn.current, serviceAppParameter: "storageAppId", service: "storage")
    }

    /// The key path after the level, each segment percent-decoded.
    static func keyPath(_ context: MidtierRequestContext) throws(Refusal) -> [String] {
        try StorageDocuments.keyPath(context.parameters.getCatchAll())
    }
}
