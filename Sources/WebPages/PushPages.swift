import Administration
import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP
import MidtierStore

/// The console's "Push" page and a notification's page (docs/console.md, "Push"): the recent
/// notifications with each registration's delivery, and a test notification to one user,
/// sent as a back end's call is (`Administration.sendTestNotification`).
extension ConsoleRoutes {
    static let pushRows = 50
    /// Deliveries shown at most on a notification's page.
    static let deliveryRows = 500

    func push(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let form = try FormBody.query(request)
        let app = form["app"] ?? ""
        try Administration.checkText(app, named: "the app")
        let found = try await administration.recentPushNotifications(app: app.isEmpty ? nil : app, limit: Self.pushRows)
        let configured = administration.apps()
        let pushApps = configured.values.filter(\.push.isEnabled).map(\.id).sorted()
        var apps = configured.keys.sorted()
        if !app.isEmpty, !apps.contains(where: { UserIdentity.sameBytes($0, app) }) { apps.append(app) }
        let page = ConsolePage.Push(
            realms: realmOptions(selected: UserIdentity.localRealm),
            pushApps: pushApps.map { ConsolePage.Option(value: $0, selected: false) }, hasPushApps: !pushApps.isEmpty,
            apps: apps.map { ConsolePage.Option(value: $0, selected: UserIdentity.sameBytes($0, app)) },
            test: .init(userId: "", alert: ""), maximumAlert: Administration.maximumTestAlert,
            notifications: found.map { detail in
                let n = detail.notification
                return .init(
                    id: n.id, link: Self.pushNotificationPage(n.id), app: n.app, sender: n.sender,
                    time: Self.preciseTime(n.createdAt), status: detail.overall, deliveries: detail.deliveries.count)
            },
            hasNotifications: !found.isEmpty, limit: Self.pushRows)
        return pages.page("console-push", page, layout: layout(admin, nav: .push))
    }

    func pushNotification(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let form = try FormBody.query(request)
        let id = try form.required("id")
        let detail = try await administration.pushNotification(id: id)
        let shown = detail.deliveries.prefix(Self.deliveryRows)
        var deliveries: [ConsolePage.PushNotification.Delivery] = []
        for delivery in shown {
            var link: String?
            do throws(Refusal) {
                link = Self.registrationsPage(of: try await administration.registration(id: delivery.registration).user)
            } catch  where error.status == .notFound {
                link = nil
            }
            deliveries.append(
                .init(
                    registration: delivery.registration, registrationLink: link, state: delivery.state.rawValue,
                    attempts: delivery.attempts, provider: delivery.provider?.rawValue,
                    reason: delivery.reason.isEmpty ? nil : delivery.reason, updated: Self.preciseTime(delivery.updatedAt)))
        }
        let n = detail.notification
        let page = ConsolePage.PushNotification(
            id: n.id, app: n.app, sender: n.sender, time: Self.preciseTime(n.createdAt), status: detail.overall, payload: n.payload,
            deliveries: deliveries, hasDeliveries: !deliveries.isEmpty, truncated: detail.deliveries.count > shown.count,
            total: detail.deliveries.count, back: Self.path("/console/push", [("app", n.app)]))
        return pages.page("console-push-notification", page, layout: layout(admin, nav: .push))
    }

    func sendTestPush(_ form: FormBody, _ admin: SignedIn) async throws(Refusal) -> Response {
        let id = try form.required("userId")
        let realm = form["realm"] ?? UserIdentity.localRealm
        let app = try form.required("app")
        let alert = try form.required("alert")
        let sent = try await administration.sendTestNotification(
            user: UserIdentity(realm: realm, id: id), app: app, alert: alert,
            by: admin.actor)
        return Pages.redirect(to: Self.pushNotificationPage(sent.notification.id))
    }

    static func pushNotificationPage(_ id: String) -> String {
        path("/console/push/notification", [("id", id)])
    }
}
