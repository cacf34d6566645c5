import Foundation
import HTTPTypes
import Hummingbird
import MidtierConfiguration
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

    /// A destination without secrets: no passwords, keys, passphrases or key file contents.
    static func destination(_ d: DestinationConfiguration) -> [String: Any] {
        var object: [String: Any] = ["name": d.name, "url": d.url, "timeout": d.timeoutMilliseconds,
                                     "headers": d.extraHeaders.map(\.name), "queries": d.extraQueries.map(\.name)]
        if let source = d.userIdSource { object["userIdSource"] = source }
        switch d.authentication {
        case .noAuthentication:
            object["authentication"] = "NoAuthentication"
        case .basic(let user, _):
            object["authentication"] = "BasicAuthentication"
            object["user"] = user
        case .samlBearer(let s):
            object["authentication"] = "OAuth2SAMLBearerAssertion"
            object["tokenServiceURL"] = s.tokenServiceURL
            object["clientKey"] = s.clientKey
            object["companyId"] = s.companyId
            object["audience"] = s.audience
            object["nameIdFormat"] = s.nameIdFormat
        }
        return object
    }

    static func response(_ status: HTTPResponse.Status, _ object: Any) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
