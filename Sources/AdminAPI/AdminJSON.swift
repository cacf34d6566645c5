import Administration
import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierStore

/// The JSON shapes of the admin API (`docs/admin-api.yaml`).
enum AdminJSON {
    static func timestamp(_ milliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
    }

    static func registration(_ r: Registration) -> [String: Any] {
        ["id": r.id, "appId": r.appId, "userId": r.user.id, "realm": r.user.realm, "deviceType": r.deviceType, "deviceModel": r.deviceModel,
         "deviceId": r.deviceId, "formFactor": r.formFactor, "state": r.state.rawValue,
         "createdAt": timestamp(r.createdAt), "lastContactAt": timestamp(r.lastContactAt)]
    }

    static func block(_ b: UserBlock?) -> Any {
        guard let b else { return NSNull() }
        return ["type": b.kind.rawValue, "reason": b.reason, "since": timestamp(b.since), "by": b.by]
    }

    static func audit(_ e: AuditEntry) -> [String: Any] {
        ["sequence": e.sequence, "at": timestamp(e.at), "actor": e.actor, "action": e.action, "target": e.target,
         "detail": e.detail, "source": e.source]
    }

    /// A destination without secrets (`Administration.DestinationSummary`).
    static func destination(_ d: Administration.DestinationSummary) -> [String: Any] {
        var object: [String: Any] = ["name": d.name, "url": d.url, "timeout": d.timeoutMilliseconds, "headers": d.headers,
                                     "queries": d.queries, "forwardDeviceCookies": d.forwardDeviceCookies, "authentication": d.authentication]
        let optional: [(String, String?)] = [("userIdSource", d.userIdSource), ("user", d.user), ("tokenServiceURL", d.tokenServiceURL),
                                             ("clientKey", d.clientKey), ("companyId", d.companyId), ("audience", d.audience),
                                             ("nameIdFormat", d.nameIdFormat)]
        for case let (key, value?) in optional { object[key] = value }
        return object
    }

    static func response(_ status: HTTPResponse.Status, _ object: Any) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
