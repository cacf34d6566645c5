import DeviceAuthentication
import DeviceProxy
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
    let runtime: RuntimeHolder
    let registrations: RegistrationService
    let logger: Logger

    /// The most bytes of one document (its JSON text as stored), and of all a user's documents
    /// (each counted with its name, ``StorageKey/storedSize(of:)``).
    static let documentLimit = 64 * 1024
    static let userLimit = 1024 * 1024
    /// The most segments after the level (the document name and up to 31 keys inside it), and
    /// the most bytes of one segment once percent-decoded (docs/device-api.md, "User and device
    /// storage"). Checked before anything is built from the path.
    static let maximumSegments = 32
    static let segmentLimit = 256

    static let roots = ["/mobileservices/application/{appId}/Storage/v1/runtime/application/{storageAppId}",
                        "/mobileservices/Storage/v1/runtime/application/{appId}"]
    static let prefixes = roots.map { $0 + "/global" }

    func add(to router: Router<MidtierRequestContext>) {
        for prefix in Self.prefixes {
            for path in [prefix, prefix + "/**"] {
                router.get(RouterPath(path)) { request, context throws(Refusal) -> Response in
                    let (app, _) = try await self.signedIn(request, context)
                    let keyPath = try Self.keyPath(context)
                    guard let value = Self.storedValue(at: keyPath, in: ClientConfigurationRoutes.settings(app)) else {
                        throw .notFound("no setting at global/\(keyPath.joined(separator: "/")) in application \(app.id)")
                    }
                    return .json(value)
                }
                for method in [HTTPRequest.Method.put, .post, .patch, .delete] {
                    router.on(RouterPath(path), method: method) { request, context throws(Refusal) -> Response in
                        let (app, _) = try await self.signedIn(request, context)
                        throw .forbidden("the global settings of application \(app.id) are read-only for devices; an administrator sets them in the app's configuration")
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
        let registration = try await admitted(request, context, app: app, user: user.identity)
        let keyPath = try Self.keyPath(context)
        let level = registration.isEmpty ? "currentuser" : "device/\(registration)"
        let store = registrations.store
        guard let name = keyPath.first else {
            guard request.method == .get else {
                throw .badRequest("\(request.method) needs a document name after \(level) (…/\(level)/{name}[/{key}…])")
            }
            return .json(try await levelDocuments(request, app: app, user: user.identity, registration: registration))
        }
        // The name is kept in the store: no control characters (docs/identity.md, "Stored text").
        guard !StoredText.hasControlCharacters(name) else { throw .badRequest("the document name has a control character") }
        let key = StorageKey(app: app.id, user: user.identity, registration: registration, name: name)
        let inside = Array(keyPath.dropFirst())
        let place = "\(level)/\(keyPath.joined(separator: "/"))"
        switch request.method {
        case .get where Self.overwrite(request):
            let merged = try await levelDocuments(request, app: app, user: user.identity, registration: registration)
            guard let value = Self.storedValue(at: keyPath, in: merged) else { throw .notFound("nothing is stored at \(place), nor above it") }
            return .json(value)
        case .get:
            let text = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await store.storageDocument(key) }
            guard let text, let value = Self.storedValue(at: inside, in: Self.document(text)) else { throw .notFound("nothing is stored at \(place)") }
            return .json(value)
        case .put:
            let value = try await Self.body(request, inside: inside.count)
            return try await write(key, place: place) { current throws(Refusal) in
                try Self.setting(value, at: inside[...], in: current.map(Self.document) ?? [:], place: place)
            }
        case .post:
            let value = try await Self.body(request, inside: inside.count)
            return try await write(key, place: place) { current throws(Refusal) in
                let document = current.map(Self.document) ?? [:]
                if current != nil, Self.storedValue(at: inside, in: document) != nil {
                    throw Refusal(.conflict, code: "CONFLICT", "something is already stored at \(place); PUT replaces it, PATCH merges into it")
                }
                return try Self.setting(value, at: inside[...], in: document, place: place)
            }
        case .patch:
            let patch = try await Self.body(request, inside: inside.count)
            return try await write(key, place: place) { current throws(Refusal) in
                let document = current.map(Self.document) ?? [:]
                let merged = Self.mergePatch(Self.storedValue(at: inside, in: document) ?? .null, with: patch)
                return try Self.setting(merged, at: inside[...], in: document, place: place)
            }
        case .delete:
            return try await write(key, place: place) { current throws(Refusal) in
                guard let current else { throw .notFound("nothing is stored at \(place)") }
                guard !inside.isEmpty else { return nil }
                return try Self.removing(inside[...], from: Self.document(current), place: place)
            }
        default:
            throw .methodNotAllowed("\(request.method) is not supported on the user and device storage", allow: "GET, PUT, POST, PATCH, DELETE")
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
    private func levelDocuments(_ request: Request, app: AppConfiguration, user: UserIdentity,
                                registration: String) async throws(Refusal) -> JSON {
        let store = registrations.store
        let levels = Self.overwrite(request) ? (registration.isEmpty ? [""] : ["", registration]) : [registration]
        var merged: JSON = Self.overwrite(request) ? ClientConfigurationRoutes.settings(app) : [:]
        for level in levels {
            let documents = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await store.storageDocuments(app: app.id, user: user, registration: level)
            }
            merged = Self.merging(.object(documents.map { JSONMember(key: $0.name, value: Self.document($0.text)) }), over: merged)
        }
        return merged
    }

    /// `over` with `value` laid on it: objects member by member (keys by their bytes), anything
    /// else replaced.
    static func merging(_ value: JSON, over base: JSON) -> JSON {
        guard let members = value.members, var result = base.members else { return value }
        for member in members {
            if let index = index(of: member.key, in: result) {
                result[index].value = merging(member.value, over: result[index].value)
            } else {
                result.append(member)
            }
        }
        return .object(result)
    }

    /// RFC 7396 JSON merge patch: `patch`'s members set into `target`, `null` removing one.
    static func mergePatch(_ target: JSON, with patch: JSON) -> JSON {
        guard let members = patch.members else { return patch }
        guard var object = target.members else { return mergePatch([:], with: patch) }
        for member in members {
            let existing = index(of: member.key, in: object)
            if member.value == .null {
                if let existing { object.remove(at: existing) }
            } else if let existing {
                object[existing].value = mergePatch(object[existing].value, with: member.value)
            } else {
                object.append(JSONMember(key: member.key, value: mergePatch(.null, with: member.value)))
            }
        }
        return .object(object)
    }

    /// A PUT, POST or PATCH body: one JSON object, at most `documentLimit` bytes, that nests
    /// no deeper than the stored document may once it is set `inside` keys deep (the strict
    /// reader's ``StrictJSON/maximumDepth``, so that every stored document reads back).
    private static func body(_ request: Request, inside: Int) async throws(Refusal) -> JSON {
        guard BrowserRequests.isJSONOrUnlabelled(request) else { throw .unsupportedMediaType(request, takes: "application/json") }
        var body = request
        let bytes = try await body.collectBody(upTo: documentLimit, describedAs: "storage document")
        switch StrictJSON.value(Array(buffer: bytes)) {
        case .success(let value) where value.members != nil:
            guard inside + value.nestingDepth <= StrictJSON.maximumDepth else {
                throw .badRequest("the document would nest more than \(StrictJSON.maximumDepth) levels deep (\(inside) keys in the path and \(value.nestingDepth) levels in the body)")
            }
            return value
        case .success(let value): throw .badRequest("the body is not a JSON object: it is \(value.kind)")
        case .failure(let error): throw .badRequest("the body is not a JSON object: \(error)")
        }
    }

    /// Writes the document `change` makes of the stored one (nil: delete it), in the store's
    /// transaction; 200 with SAP's `code` and `message`.
    private func write(_ key: StorageKey, place: String,
                       _ change: @escaping @Sendable (String?) throws(Refusal) -> JSON?) async throws(Refusal) -> Response {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let store = registrations.store
        let result = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await store.writeStorage(key, userLimit: Self.userLimit, now: now) { current -> StorageEdit<Refusal> in
                do throws(Refusal) {
                    guard let document = try change(current) else { return .remove }
                    let text = Self.text(document)
                    guard text.utf8.count <= Self.documentLimit else {
                        return .refuse(Refusal(.contentTooLarge, code: "PAYLOAD_TOO_LARGE",
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
            throw .forbidden("the registration \(key.registration) is no longer active")
        }
    }

    /// The registration whose storage the call reaches: for `device/{id}`, the caller's own
    /// registration in this app that `{id}` names (``CallerRegistration``); for `currentuser`,
    /// "" — the user, not blocked, and the caller's registration admitted too when the call
    /// names one.
    private func admitted(_ request: Request, _ context: MidtierRequestContext, app: AppConfiguration,
                          user: UserIdentity) async throws(Refusal) -> String {
        if let raw = context.parameters.get("deviceId") {
            guard let decoded = raw.removingPercentEncoding else { throw .badRequest("the device id \(raw) is not percent-encoded correctly") }
            return try await CallerRegistration.named(decoded, request: request, app: app, user: user, registrations: registrations, logger: logger)
        }
        if let named = ProxyHandler.registrationID(of: request) {
            try await CallerRegistration.admit(named, app: app, user: user, registrations: registrations, logger: logger)
            return ""
        }
        let block = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in try await registrations.store.block(of: user) }
        if let block, block.kind.blocksTraffic { throw Refusal.userBlocked(block.kind) }
        return ""
    }

    /// A stored document (an object; nothing readable counts as empty).
    static func document(_ text: String) -> JSON {
        guard case .success(let value) = StrictJSON.value(Array(text.utf8)), value.members != nil else { return [:] }
        return value
    }

    /// A document as stored: compact JSON, keys sorted (by their bytes) at every level.
    static func text(_ document: JSON) -> String {
        document.sortedByKey.serialized()
    }

    /// Where the member whose key is `key` by its bytes is in `members`.
    private static func index(of key: String, in members: [JSONMember]) -> Int? {
        members.firstIndex { UserIdentity.sameBytes($0.key, key) }
    }

    /// `document` with `value` at `path`, objects made on the way.
    static func setting(_ value: JSON, at path: ArraySlice<String>, in document: JSON, place: String) throws(Refusal) -> JSON {
        guard let key = path.first else { return value }
        guard var object = document.members else {
            throw Refusal(.conflict, code: "CONFLICT", "a value on the way to \(place) is not an object, so it cannot hold \(key)")
        }
        if let existing = index(of: key, in: object) {
            object[existing].value = try setting(value, at: path.dropFirst(), in: object[existing].value, place: place)
        } else {
            object.append(JSONMember(key: key, value: try setting(value, at: path.dropFirst(), in: [:], place: place)))
        }
        return .object(object)
    }

    /// `document` without the value at `path` (not empty).
    static func removing(_ path: ArraySlice<String>, from document: JSON, place: String) throws(Refusal) -> JSON {
        guard let key = path.first, var object = document.members, let existing = index(of: key, in: object) else {
            throw .notFound("nothing is stored at \(place)")
        }
        if path.count == 1 {
            object.remove(at: existing)
        } else {
            object[existing].value = try removing(path.dropFirst(), from: object[existing].value, place: place)
        }
        return .object(object)
    }

    /// The value at `keyPath` in `document` (keys by their bytes), nil when a key is missing or
    /// a step is not an object.
    static func storedValue(at keyPath: [String], in document: JSON) -> JSON? {
        var current = document
        for key in keyPath {
            guard let members = current.members, let found = index(of: key, in: members) else { return nil }
            current = members[found].value
        }
        return current
    }

    // MARK: Signing in

    /// The app the path names and its signed-in caller (the storage app must be the same app).
    private func signedIn(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> (AppConfiguration, AuthenticatedUser) {
        try await ServiceSignIn.signedIn(request, context, runtime: runtime.current, serviceAppParameter: "storageAppId", service: "storage")
    }

    /// The key path after the level, each segment percent-decoded.
    static func keyPath(_ context: MidtierRequestContext) throws(Refusal) -> [String] {
        try keyPath(context.parameters.getCatchAll())
    }

    /// `segments` percent-decoded, within ``maximumSegments`` and ``segmentLimit``: counted
    /// before any is decoded, so that a path of thousands of segments costs nothing more.
    package static func keyPath(_ segments: some Collection<Substring>) throws(Refusal) -> [String] {
        guard segments.count <= maximumSegments else {
            throw .badRequest("the path names \(segments.count) segments after the level; at most \(maximumSegments) (a document name and up to \(maximumSegments - 1) keys)")
        }
        var keys: [String] = []
        for segment in segments {
            guard let key = segment.removingPercentEncoding else {
                throw .badRequest("the key path segment \(segment.prefix(64)) is not percent-encoded correctly")
            }
            guard key.utf8.count <= segmentLimit else {
                throw .badRequest("a document name or key is longer than \(segmentLimit) bytes")
            }
            keys.append(key)
        }
        return keys
    }
}
