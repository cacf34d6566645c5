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

/// SAP Mobile Services' push registration (docs/push.md, "Registering a device"):
/// `POST`/`PUT /mobileservices/push/v1/runtime/applications/{appId}/os/{os}/devices/{deviceId}`
/// with `{"pushToken": …}` sets the push token of the caller's registration that `{deviceId}`
/// names (its registration id, its `DeviceId`, or an id the device chose, bound to the call's
/// own registration: ``Callers/pushRegistration(namedByDevicePath:request:app:user:)``);
/// `DELETE` removes it. `{os}` is `ios` (APNs: the `ApnsDeviceToken`) or `android` (FCM: the
/// `AndroidGcmRegistrationId`); a new token replaces the old one, and leaves every other
/// registration of the app that held it (``PushTokenRelease``).
struct PushRegistrationRoutes: Sendable {
    let signIn: CurrentSignIn
    let callers: Callers
    var registrations: RegistrationService { callers.registrations }
    let logger: Logger

    static let path = "/mobileservices/push/v1/runtime/applications/{appId}/os/{os}/devices/{deviceId}"
    /// Longer than any APNs or FCM token.
    static let tokenLimit = 4096

    func add(to router: Router<MidtierRequestContext>) {
        for method in [HTTPRequest.Method.post, .put, .delete] {
            router.on(RouterPath(Self.path), method: method) { request, context throws(Refusal) -> Response in
                try await self.register(request, context)
            }
        }
        router.on(RouterPath(Self.path), method: .get) { _, _ throws(Refusal) -> Response in
            throw .methodNotAllowed("a push registration is set with POST or PUT and removed with DELETE", allow: "POST, PUT, DELETE")
        }
    }

    private func register(_ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let signIn = signIn.current
        let app = try ClientConfigurationRoutes.app(context, signIn)
        let user = try await signIn.authenticate(request, app: app, client: context.clientIP)
        let os = context.parameters.get("os") ?? ""
        guard os == "ios" || os == "android" else {
            throw .badRequest("Midtier delivers through APNs (os ios) and FCM (os android); \(os) is not one of them")
        }
        guard app.push.isEnabled else { throw .notFound("push notifications are not enabled for application \(app.id)") }
        let raw = context.parameters.get("deviceId") ?? ""
        guard let named = raw.removingPercentEncoding else { throw .badRequest("the device id \(raw) is not percent-encoded correctly") }
        let (id, isNewDeviceId) = try await callers.pushRegistration(namedByDevicePath: named, request: request, app: app, user: user.identity)

        var token = ""
        var fields: [String: String] = [:]
        if request.method != .delete {
            (token, fields) = try await Self.body(request, os: os)
        }
        let source = context.clientIP ?? ""
        let outcome = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.updateDevice(id: id, user: user.identity, app: app.id, source: source, policy: app.blockWipingPolicy) { device in
                if os == "ios" { device.apnsDeviceToken = token } else { device.androidGcmRegistrationId = token }
                for (key, value) in fields { device.details[key] = value }
                if isNewDeviceId { device.details[Callers.pushDeviceIdDetail] = named }
            }
        }
        switch outcome {
        case .updated(let updated):
            try await PushTokenRelease.release(updated, store: registrations.store, logger: logger)
            if isNewDeviceId {
                try await callers.settlePushDeviceId(named, boundTo: id, app: app, user: user.identity, source: source)
            }
        case .notFound: throw .forbidden("the registration id is not known")
        case .deviceHeld(let held): throw DeviceFields.held(held, "its push token cannot change")
        case .tokenHeldByAnotherUser: throw DeviceFields.tokenHeldByAnotherUser
        }
        switch request.method {
        case .delete: return Response(status: .noContent)
        case .post: return .json(["status": ["code": 201, "message": "push registration stored"]], status: .created)
        default: return .json(["status": ["code": 200, "message": "push registration stored"]])
        }
    }

    /// `{"pushToken": …}` and the optional members SAP's SDKs send, kept in the registration's
    /// details (`PushGroup`, `UserLocale`, `TimeZone`).
    static func body(_ request: Request, os: String) async throws(Refusal) -> (token: String, fields: [String: String]) {
        guard BrowserRequests.isJSONOrUnlabelled(request) else { throw .unsupportedMediaType(request, takes: "application/json") }
        var request = request
        let bytes = try await request.collectBody(upTo: 16 * 1024, describedAs: "push registration")
        let object: [String: JSON]
        switch StrictJSON.object(Array(buffer: bytes)) {
        case .success(let parsed): object = parsed
        case .failure(let error): throw .badRequest("the push registration is not a JSON object: \(error.message)")
        }
        guard case .string(let token)? = object["pushToken"], !token.isEmpty else { throw .badRequest("pushToken is missing (a string)") }
        guard token.utf8.count <= tokenLimit else { throw .badRequest("pushToken is longer than \(tokenLimit) bytes") }
        guard !StoredText.hasControlCharacters(token), !token.contains(" ") else { throw .badRequest("pushToken has a space or a control character") }
        if os == "ios", !token.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0) }) {
            throw .badRequest("pushToken of an iOS device is the APNs device token in hexadecimal")
        }
        var fields: [String: String] = [:]
        for (member, detail) in [("pushGroup", "PushGroup"), ("userLocale", "UserLocale"), ("timeZone", "TimeZone")] {
            switch object[member] {
            case nil, .null?: continue
            case .string(let text)?:
                guard text.utf8.count <= 256, !StoredText.hasControlCharacters(text) else {
                    throw .badRequest("\(member) must be at most 256 bytes without control characters")
                }
                fields[detail] = text
            case _?: throw .badRequest("\(member) must be a string")
            }
        }
        return (os == "ios" ? DeviceDetails.apnsToken(token) : token, fields)
    }
}
