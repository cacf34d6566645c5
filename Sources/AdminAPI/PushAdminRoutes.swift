import Administration
import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP
import MidtierJSON
import MidtierStore
import Registrations

/// `GET /admin/v1/push/notifications`, `GET /admin/v1/push/notifications/{id}` and
/// `POST /admin/v1/push/notifications` (docs/admin-api.yaml): the push notifications Midtier
/// holds with each registration's delivery, and a test notification to one user, as the
/// console's Push pages show and send them (`Administration+Push`).
extension AdminRoutes {
    /// Notifications listed when `limit` is not given (the console's page shows as many).
    static let pushListDefault = 50
    /// The most notifications one listing holds: each carries up to
    /// `PushNotificationJSON.maximumDeliveries` deliveries.
    static let pushListMaximum = 100
    /// The members of a test notification's body.
    static let testNotificationMembers: Set<String> = ["userId", "realm", "app", "alert"]

    func listPushNotifications(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        var limit = Self.pushListDefault
        if let text = try single(request, "limit") {
            guard let parsed = Int(text), (1...Self.pushListMaximum).contains(parsed) else {
                throw .badRequest("limit must be between 1 and \(Self.pushListMaximum)")
            }
            limit = parsed
        }
        var before: PushNotificationCursor?
        if let text = try single(request, "after"), !text.isEmpty {
            guard let cursor = PushNotificationCursorText.decode(text) else {
                throw .badRequest("after is malformed: pass the previous page's next value unchanged")
            }
            before = cursor
        }
        // An empty app is no filter, as on the console's page.
        let app = try query(request, "app").flatMap { $0.isEmpty ? nil : $0 }
        let page = try await administration.pushNotificationPage(app: app, before: before, limit: limit)
        var answer: [String: JSON] = ["notifications": .array(page.notifications.map { PushNotificationJSON($0).json })]
        if let next = page.next { answer["next"] = .string(next) }
        return .json(.sortedObject(answer))
    }

    func getPushNotification(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        // Its deliveries a page at a time, as the registrations list pages (docs/admin.md).
        let limit = try Administration.pageLimit(
            try single(request, "limit"), default: Administration.pushDeliveryPageMaximum, maximum: Administration.pushDeliveryPageMaximum)
        let after = try Administration.registrationCursor(try single(request, "after"))
        let detail = try await administration.pushNotification(id: try parameter(context, "id"), deliveriesAfter: after, limit: limit)
        return .json(PushNotificationJSON(detail).json)
    }

    /// A test notification (`Administration.sendTestNotification`): stored, woken and audited
    /// as the console's; `201` with the notification and its `Location`.
    func sendTestNotification(_ request: Request, _ context: MidtierRequestContext, _ actor: AuditActor) async throws(Refusal) -> Response {
        let body = try await Self.jsonObject(request, context)
        if let unknown = body.keys.sorted().first(where: { !Self.testNotificationMembers.contains($0) }) {
            throw .badRequest("unknown member \(unknown)")
        }
        let userId = try Self.text(body, "userId") ?? ""
        let realm = try Self.text(body, "realm", required: false) ?? UserIdentity.localRealm
        let app = try Self.text(body, "app") ?? ""
        let alert = try Self.text(body, "alert") ?? ""
        // As the document's schema says, before Administration's own checks (which measure the
        // alert without its surrounding white space, in characters).
        guard alert.unicodeScalars.count <= Administration.maximumTestAlert else {
            throw .badRequest("alert has \(alert.unicodeScalars.count) code points; at most \(Administration.maximumTestAlert)")
        }
        guard !alert.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw .badRequest("alert has nothing but white space")
        }
        let sent = try await administration.sendTestNotification(
            user: UserIdentity(realm: realm, id: userId), app: app, alert: alert, by: actor)
        var headers = HTTPFields()
        headers[.location] = "/admin/v1/push/notifications/\(sent.notification.id)"
        return .json(PushNotificationJSON(sent).json, status: .created, headers: headers)
    }

    /// The string member `name` of a test notification's body: `400` naming it when it is
    /// missing or empty (and `required`), not a string, or has a control character; nil when
    /// it is absent and not required.
    private static func text(_ body: [String: JSON], _ name: String, required: Bool = true) throws(Refusal) -> String? {
        switch body[name] {
        case nil:
            guard !required else { throw .badRequest("\(name) is missing") }
            return nil
        case .string(let value)?:
            guard !required || !value.isEmpty else { throw .badRequest("\(name) is empty") }
            try Administration.checkText(value, named: name)
            return value
        case _?:
            throw .badRequest("\(name) must be a string")
        }
    }
}
