import Callers
import ClientUploads
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

/// SAP Mobile Services' client log upload and client usage upload (docs/device-api.md, "Client
/// logs and usage"), as SAPcpmsLogUploader and the usage uploader of the SAP BTP SDK post them:
/// - `POST /mobileservices/application/{appId}/clientlogs/v1/runtime/log/application/{appId}?deviceId=…`
/// - `POST /mobileservices/application/{appId}/clientusage/v1/runtime/clientusage/application/{appId}[/device/{deviceId}]`
///
/// Signed in and throttled as the Storage service; the upload always belongs to the caller's
/// own registration (`X-SMP-APPCID`, else its device `X-SMP-DEVICEID` or the path's or query's
/// `deviceId`), admitted as the proxy admits it. 204 once it is in the store.
struct ClientUploadRoutes: Sendable {
    let signIn: CurrentSignIn
    let callers: Callers
    var registrations: RegistrationService { callers.registrations }
    let logger: Logger

    static let logPath = "/mobileservices/application/{appId}/clientlogs/v1/runtime/log/application/{uploadAppId}"
    static let usagePath = "/mobileservices/application/{appId}/clientusage/v1/runtime/clientusage/application/{uploadAppId}"
    static let usageDevicePath = usagePath + "/device/{deviceId}"
    static let hour: Int64 = 3_600_000

    func add(to router: Router<MidtierRequestContext>) {
        let routes: [(String, ClientUploadKind)] = [(Self.logPath, .log), (Self.usagePath, .usage), (Self.usageDevicePath, .usage)]
        for (path, kind) in routes {
            router.post(RouterPath(path)) { request, context throws(Refusal) -> Response in
                try await self.upload(kind, request, context)
            }
            for method in [HTTPRequest.Method.get, .head, .put, .patch, .delete] {
                router.on(RouterPath(path), method: method) { _, _ throws(Refusal) -> Response in
                    throw .methodNotAllowed("\(method) is not supported on the client \(kind.rawValue) upload; use POST", allow: "POST")
                }
            }
        }
    }

    private func upload(_ kind: ClientUploadKind, _ request: Request, _ context: MidtierRequestContext) async throws(Refusal) -> Response {
        let signIn = signIn.current
        let settings = signIn.configuration.server.clientUploads
        let (app, user) = try await signedIn(request, context, signIn: signIn)
        switch kind {
        case .log:
            guard Self.isOn(app.logSettings["logEnabled"]) else {
                throw .forbidden("client log upload is not enabled for application \(app.id) (logSettings.logEnabled)")
            }
        case .usage:
            guard Self.isOn(app.usagePolicy["dataCollectionEnabled"]) else {
                throw .forbidden("client usage upload is not enabled for application \(app.id) (usagePolicy.dataCollectionEnabled)")
            }
        }
        let named = try Self.namedDevice(request, context)
        let registration = try await admitted(request, app: app, user: user.identity, namedDevice: named)
        // The upload is the caller's registration's: a deviceId naming another device is a
        // mistake, never a way into another registration (docs/identity.md, "The same device").
        if let named, !named.isEmpty, !registration.deviceId.isEmpty, !DeviceIdentity.same(named, registration.deviceId) {
            throw .badRequest("the deviceId is not the device of the caller's registration")
        }

        var body = request
        let bytes: ByteBuffer
        do {
            bytes = try await body.collectBody(upTo: settings.maxUploadBytes, describedAs: "client \(kind.rawValue) upload")
        } catch  where error.status == .contentTooLarge {
            throw Refusal(
                .contentTooLarge, code: "PAYLOAD_TOO_LARGE",
                "the client \(kind.rawValue) upload is larger than \(settings.maxUploadBytes) bytes (clientUploads.maxUploadBytes)")
        }
        let received = Array(buffer: bytes)
        let id = UUID().uuidString.lowercased()
        var entries: [ClientLogEntry]
        let report: String
        do {
            switch kind {
            case .log:
                entries = try ClientLogBody.entries(
                    of: received, contentType: request.headers[.contentType], upload: id,
                    limits: .forUploads(of: settings.maxUploadBytes))
                report = ""
            case .usage:
                entries = []
                report = try ClientUsageReport.check(received, limit: settings.maxUploadBytes)
            }
        } catch {
            switch error.kind {
            case .invalid: throw .badRequest(error.message)
            case .tooLarge: throw Refusal(.contentTooLarge, code: "PAYLOAD_TOO_LARGE", error.message)
            }
        }

        let now = registrations.clock.now()
        // An entry dated more than a day after it arrived (a device clock far off, or
        // 9999-12-31) is kept at its arrival, so it never sorts before every real entry.
        for index in entries.indices where entries[index].time > now + 24 * Self.hour {
            entries[index].time = now
        }
        // The quotas count what is stored, not the body as sent: a small zip of many entries
        // is as large as its entries (docs/device-api.md, "Client logs and usage").
        let stored = kind == .log ? entries.reduce(0) { $0 + $1.storedSize } : report.utf8.count
        guard stored <= settings.maxStoredBytesPerRegistration else {
            throw Refusal(
                .contentTooLarge, code: "PAYLOAD_TOO_LARGE",
                "the upload would take \(stored) bytes stored, more than clientUploads.maxStoredBytesPerRegistration (\(settings.maxStoredBytesPerRegistration))"
            )
        }
        // The registration's own device, whatever the call names (it was checked above).
        let upload = ClientUpload(
            id: id, kind: kind, app: app.id, user: user.identity, registration: registration.id,
            deviceId: registration.deviceId, receivedAt: now, size: stored, report: report)
        let bounds = ClientUploadBounds(
            bytesPerRegistration: settings.maxStoredBytesPerRegistration, bytesPerUser: settings.maxStoredBytesPerUser,
            uploadsPerWindow: settings.maxUploadsPerHour, window: Self.hour)
        let store = registrations.store
        let saved = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await store.saveClientUpload(upload, entries: entries, bounds: bounds, now: now)
        }
        switch saved {
        case .saved(let dropped):
            logger.info(
                "client upload kept",
                metadata: [
                    "kind": "\(kind.rawValue)", "app": "\(app.id)", "registration": "\(registration.id)",
                    "bytes": "\(received.count)", "storedBytes": "\(stored)", "entries": "\(entries.count)",
                    "droppedOlder": "\(dropped)",
                ])
            return Response(status: .noContent)
        case .tooMany:
            throw Refusal(
                .tooManyRequests, code: "TOO_MANY_REQUESTS",
                "the registration made \(settings.maxUploadsPerHour) client \(kind.rawValue) uploads in the last hour, the most allowed (clientUploads.maxUploadsPerHour)",
                retryAfter: 300)
        case .registrationInactive:
            throw .forbidden("the registration \(registration.id) is no longer active")
        }
    }

    /// Whether a `logSettings` or `usagePolicy` value is on: `true` or `"true"`.
    static func isOn(_ value: JSON?) -> Bool {
        switch value {
        case .bool(let on)?: on
        case .string(let text)?: text.lowercased() == "true"
        default: false
        }
    }

    /// The `deviceId` the path (usage) or the query (log) names, percent-decoded; nil when none.
    static func namedDevice(_ request: Request, _ context: MidtierRequestContext) throws(Refusal) -> String? {
        let raw: String
        if let segment = context.parameters.get("deviceId") {
            guard let decoded = segment.removingPercentEncoding else {
                throw .badRequest("the device id in the path is not percent-encoded correctly")
            }
            raw = decoded
        } else {
            let values = request.uri.queryParameters.getAll("deviceId")
            guard values.count <= 1 else { throw .badRequest("the query names deviceId more than once") }
            guard let value = values.first else { return nil }
            raw = String(value)
        }
        // Kept in the store: no control characters (docs/identity.md, "Stored text").
        guard !StoredText.hasControlCharacters(raw), raw.utf8.count <= 256 else {
            throw .badRequest("the deviceId has a control character or is longer than 256 bytes")
        }
        return raw
    }

    /// The caller's registration the upload belongs to: the one `X-SMP-APPCID` (header or
    /// cookie) names, else the user's one registration in this app of the device that
    /// `X-SMP-DEVICEID`, or failing that the `deviceId` of the path or query, names; admitted as
    /// the proxy admits it (blocked user, locked or wiped registration refused).
    private func admitted(
        _ request: Request, app: AppConfiguration, user: UserIdentity,
        namedDevice: String?
    ) async throws(Refusal) -> Registration {
        guard request.headers[values: RegistrationHeaders.registration].count <= 1 else {
            throw .badRequest("the request has more than one X-SMP-APPCID header")
        }
        guard request.headers[values: RegistrationHeaders.device].count <= 1 else {
            throw .badRequest("the request has more than one X-SMP-DEVICEID header")
        }
        let store = registrations.store
        let id: String
        if let named = RegistrationHeaders.registrationID(of: request) {
            id = named
        } else {
            guard
                let device = request.headers[RegistrationHeaders.device].flatMap({ $0.isEmpty ? nil : $0 })
                    ?? namedDevice.flatMap({ $0.isEmpty ? nil : $0 })
            else {
                throw .forbidden("the upload names no registration (X-SMP-APPCID) and no device (X-SMP-DEVICEID or deviceId)")
            }
            let candidates = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
                try await store.registrations(matching: RegistrationFilter(user: user, app: app.id))
            }
            let matching = candidates.filter { DeviceIdentity.namesADevice($0.deviceId) && DeviceIdentity.same($0.deviceId, device) }
            guard let only = matching.first else {
                throw .forbidden("the user has no registration of this device in this app")
            }
            guard matching.count == 1 else {
                throw .forbidden("the user has more than one registration of this device in this app; send X-SMP-APPCID")
            }
            id = only.id
        }
        let found = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            RegistrationService.isAcceptableID(id) ? try await store.registrationAndBlock(id: id) : nil
        }
        guard let found, UserIdentity.sameBytes(found.registration.appId, app.id) else {
            try Admission.unknown.refuseUnlessAdmitted()
            throw .forbidden("the registration id is not known")
        }
        let admission = try await Refusal.unlessStoreFails(logger) { () async throws(StoreError) in
            try await registrations.admit(RegistrationStanding(found.registration, block: found.block), user: user, policy: app.blockWipingPolicy)
        }
        try admission.refuseUnlessAdmitted()
        return found.registration
    }

    /// The app the path names and its signed-in caller (the upload's app must be the same app).
    private func signedIn(
        _ request: Request, _ context: MidtierRequestContext,
        signIn: CallerSignIn
    ) async throws(Refusal) -> (AppConfiguration, AuthenticatedUser) {
        try await ServiceSignIn.signedIn(request, context, signIn: signIn, serviceAppParameter: "uploadAppId", service: "uploads")
    }
}
