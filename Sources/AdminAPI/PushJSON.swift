import Administration
import MidtierCore
import MidtierJSON
import MidtierStore

// The push shapes of the admin API (`docs/admin-api.yaml`): a notification as the console
// shows it (docs/console.md, "Push"), with its deliveries. What the sender sent is its own
// data, returned as JSON, never interpreted; members in key order, as in AdminJSON.swift.

/// `PushNotification`: a notification, SAP's status of the whole, how many deliveries are in
/// each state, and a page of its deliveries (at most ``maximumDeliveries``) by registration id's
/// bytes, with `deliveriesNext` when more follow.
struct PushNotificationJSON {
    /// The most deliveries one notification lists (the console's notification page shows as
    /// many); `deliveryCount` and `deliveryStates` count them all.
    static let maximumDeliveries = Administration.pushDeliveryPageMaximum

    var detail: Administration.PushNotificationDetail

    init(_ detail: Administration.PushNotificationDetail) { self.detail = detail }

    var json: JSON {
        let n = detail.notification
        var states: [String: JSON] = [:]
        for state in PushDeliveryState.allCases { states[state.rawValue] = .number(detail.counts[state]) }
        var members: [String: JSON] = [
            "app": .string(n.app),
            "createdAt": AdminTime.json(n.createdAt),
            "deliveries": .array(detail.deliveries.prefix(Self.maximumDeliveries).map { PushDeliveryJSON($0).json }),
            "deliveryCount": .number(detail.counts.total),
            "deliveryStates": .sortedObject(states),
            "id": .string(n.id),
            // The notification as stored, as JSON (as the usage reports' `report`).
            "notification": UsageReportJSON.report(n.payload),
            "sender": .string(n.sender),
            "status": .string(detail.overall),
        ]
        if let next = detail.deliveriesNext { members["deliveriesNext"] = .string(next) }
        return .sortedObject(members)
    }
}

/// `PushDelivery`: one registration's delivery of a notification. `reason` is the push
/// service's status and reason code, never a token; `nextAttemptAt` only while pending.
struct PushDeliveryJSON {
    var delivery: PushDeliveryRecord

    init(_ delivery: PushDeliveryRecord) { self.delivery = delivery }

    var json: JSON {
        let d = delivery
        return [
            "attempts": .number(d.attempts),
            "nextAttemptAt": d.state == .pending ? AdminTime.json(d.nextAttemptAt) : .null,
            "provider": d.provider.map { JSON.string($0.rawValue) } ?? .null,
            "reason": .string(d.reason),
            "registration": .string(d.registration),
            "state": .string(d.state.rawValue),
            "updatedAt": AdminTime.json(d.updatedAt),
        ]
    }
}
