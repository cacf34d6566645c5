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
    /// Deliveries shown at most on a notification's page (a page of them; the counts count all).
    static let deliveryRows = Administration.pushDeliveryPageMaximum

    func push(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let form = try FormBody.query(request)
        let app = form["app"] ?? ""
        try Administration.checkText(app, named: "the app")
        // A page at a time, newest first, with the admin API's cursor: the Older link carries
        // it and the app (docs/console.md, "Push").
        var before: PushNotificationCursor?
        if let text = form["after"], !text.isEmpty {
            guard let cursor = PushNotificationCursorText.decode(text) else {
                throw .badRequest("after is malformed: use the Older link's value unchanged")
            }
            before = cursor
        }
        // The list shows each notification's counts, not its deliveries: none are read.
        let found = try await administration.pushNotificationPage(
            app: app.isEmpty ? nil : app, before: before, limit: Self.pushRows, deliveries: 0)
        let configured = administration.apps()
        let pushApps = configured.values.filter(\.push.isEnabled).map(\.id).sorted()
        var apps = configured.keys.sorted()
        if !app.isEmpty, !apps.contains(where: { UserIdentity.sameBytes($0, app) }) { apps.append(app) }
        let filters: [(String, String)] = app.isEmpty ? [] : [("app", app)]
        let page = ConsolePage.Push(
            realms: realmOptions(selected: UserIdentity.localRealm),
            pushApps: pushApps.map { ConsolePage.Option(value: $0, selected: false) }, hasPushApps: !pushApps.isEmpty,
            apps: apps.map { ConsolePage.Option(value: $0, selected: UserIdentity.sameBytes($0, app)) },
            test: .init(userId: "", alert: ""), maximumAlert: Administration.maximumTestAlert,
            notifications: found.notifications.map { detail in
                let n = detail.notification
                return .init(
                    id: n.id, link: Self.pushNotificationPage(n.id), app: n.app, sender: n.sender,
                    time: Self.preciseTime(n.createdAt), status: detail.overall, deliveries: detail.counts.total)
            },
            hasNotifications: !found.notifications.isEmpty, limit: Self.pushRows,
            first: before == nil ? nil : Self.path("/console/push", filters),
            next: found.next.map { Self.path("/console/push", filters + [("after", $0)]) })
        return pages.page("console-push", page, layout: layout(admin, nav: .push))
    }

    func pushNotification(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let form = try FormBody.query(request)
        let id = try form.required("id")
        // Its deliveries a page at a time, by registration id, as the admin API pages them.
        let after = try Administration.registrationCursor(form["after"])
        let detail = try await administration.pushNotification(id: id, deliveriesAfter: after, limit: Self.deliveryRows)
        var deliveries: [ConsolePage.PushNotification.Delivery] = []
        for delivery in detail.deliveries {
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
        let counts = detail.counts
        let page = ConsolePage.PushNotification(
            id: n.id, app: n.app, sender: n.sender, time: Self.preciseTime(n.createdAt), status: detail.overall, payload: n.payload,
            deliveries: deliveries, hasDeliveries: !deliveries.isEmpty,
            truncated: after != nil || detail.deliveriesNext != nil, total: counts.total,
            states: PushDeliveryState.allCases.map { .init(state: $0.rawValue, count: counts[$0]) },
            first: after == nil ? nil : Self.pushNotificationPage(n.id),
            next: detail.deliveriesNext.map { Self.path("/console/push/notification", [("id", n.id), ("after", $0)]) },
            back: Self.path("/console/push", [("app", n.app)]))
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
