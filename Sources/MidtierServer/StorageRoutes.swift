import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP

/// SAP Mobile Services' Storage service, `global` level: the app's client policy where the SAP
/// SDKs read it (docs/device-api.md, "Storage service"):
/// - `…/mobileservices/application/{appId}/Storage/v1/runtime/application/{appId}/global/{keyPath}`
///   (SAPcpmsSettings on iOS, `Settings` on Android);
/// - `…/mobileservices/Storage/v1/runtime/application/{appId}/global/{keyPath}` (MDK).
/// A GET answers the value at the key path (`mobileservices/settingsExchange/passwordPolicy`),
/// from the same document as the settings exchange; the level is read-only for devices.
/// Signed in and throttled exactly as `GET /mobileservices/settingsExchange/v1/{appId}`.
struct StorageRoutes: Sendable {
    let runtime: RuntimeHolder

    static let prefixes = ["/mobileservices/application/{appId}/Storage/v1/runtime/application/{storageAppId}/global",
                           "/mobileservices/Storage/v1/runtime/application/{appId}/global"]

    func add(to router: Router<MidtierRequestContext>) {
        for prefix in Self.prefixes {
            for path in [prefix, prefix + "/**"] {
                router.get(RouterPath(path)) { request, context throws(Refusal) -> Response in
                    let app = try await self.signedIn(request, context)
                    let keyPath = try Self.keyPath(context)
                    guard let value = Self.value(at: keyPath, in: ClientConfigurationRoutes.settings(app)) else {
                        throw .notFound("no setting at global/\(keyPath.joined(separator: "/")) in application \(app.id)")
                    }
                    return ClientConfigurationRoutes.json(value)
                }
                for method in [HTTPRequest.Method.put, .post, .patch, .delete] {
                    router.on(RouterPath(path), method: method) { request, context throws(Refusal) -> Response in
                        let app = try await self.signedIn(request, context)
                        throw .forbidden("the global settings of application \(app.id) are read-only for devices; an administrator sets them in the app's configuration")
                    }
                }
            }
        }
    }

    /// The app the path names, its caller signed in with the app's method. The MDK form names
    /// the app once; the other names it twice (the app that signs the caller in, then the app
    /// whose storage is read), and both must be the same app.
    private func signedIn(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> AppConfiguration {
        let runtime = runtime.current
        let app = try ClientConfigurationRoutes.app(context, runtime)
        let storageID = context.parameters.get("storageAppId") ?? app.id
        guard runtime.configuration.apps[storageID] != nil else { throw .notFound("unknown application \(storageID)") }
        _ = try await runtime.authenticate(request, app: app, client: context.clientIP)
        guard UserIdentity.sameBytes(storageID, app.id) else {
            throw .forbidden("the storage of application \(storageID) cannot be reached through application \(app.id)")
        }
        return app
    }

    /// The key path after `global`, each segment percent-decoded.
    static func keyPath(_ context: MidtierRequestContext) throws(Refusal) -> [String] {
        var keys: [String] = []
        for segment in context.parameters.getCatchAll() {
            guard let key = segment.removingPercentEncoding else { throw .badRequest("the key path segment \(segment) is not percent-encoded correctly") }
            keys.append(key)
        }
        return keys
    }

    /// The value at `keyPath` in `document`, nil when a key is missing or a step is not an object.
    static func value(at keyPath: [String], in document: [String: Any]) -> Any? {
        var current: Any = document
        for key in keyPath {
            guard let object = current as? [String: Any], let next = object.first(where: { UserIdentity.sameBytes($0.key, key) })?.value else { return nil }
            current = next
        }
        return current
    }
}
