package import MidtierJSON

// What each push service is sent for a `PushMessage` (docs/push.md, "What the phone gets").

/// The most bytes of a payload APNs takes (Apple: 4 KB for a remote notification); FCM's
/// limit for a message's payload is the same.
package let pushPayloadLimit = 4096

/// An APNs request: the JSON payload and the headers besides authorization and topic.
package struct APNsRequest: Sendable, Equatable {
    package var payload: String
    /// `apns-push-type`: `alert`, or `background` for a silent notification (whose `aps` then
    /// holds `content-available: 1`).
    package var pushType: String
    /// `apns-priority`: 10 at once, 5 when convenient (required for background pushes).
    package var priority: Int
    /// `apns-expiration`: seconds since 1970; 0 means "once, now or never".
    package var expiration: Int?
    /// `apns-collapse-id`: the notification's id, so that a copy sent again shows once.
    package var collapseID: String
}

extension PushMessage {
    /// APNs' payload: `aps` with the alert, badge and sound; the SAP `data` as `data`; the
    /// custom members and the notification's id at the top level.
    package func apnsRequest(notificationID: String, now: Int) -> APNsRequest {
        var aps: [JSONMember] = []
        let title = apns.alertTitle ?? title
        let body = apns.alertBody ?? body ?? alert
        if title != nil || apns.alertSubtitle != nil {
            var alertMembers: [JSONMember] = []
            if let title { alertMembers.append(JSONMember(key: "title", value: .string(title))) }
            if let subtitle = apns.alertSubtitle { alertMembers.append(JSONMember(key: "subtitle", value: .string(subtitle))) }
            if let body { alertMembers.append(JSONMember(key: "body", value: .string(body))) }
            aps.append(JSONMember(key: "alert", value: .object(alertMembers)))
        } else if let body {
            aps.append(JSONMember(key: "alert", value: .string(body)))
        }
        if let badge { aps.append(JSONMember(key: "badge", value: .number(badge))) }
        if let sound = apns.sound ?? sound { aps.append(JSONMember(key: "sound", value: .string(sound))) }
        if let category = apns.category { aps.append(JSONMember(key: "category", value: .string(category))) }
        if let thread = apns.threadId { aps.append(JSONMember(key: "thread-id", value: .string(thread))) }
        let alerting = aps.contains { ["alert", "badge", "sound"].contains($0.key) }
        // Nothing to show: a background push, which iOS hands to the app only with
        // `content-available: 1` (Apple, "Pushing background updates to your App"; docs/push.md).
        if apns.contentAvailable || !alerting { aps.append(JSONMember(key: "content-available", value: 1)) }
        if apns.mutableContent { aps.append(JSONMember(key: "mutable-content", value: 1)) }
        var top = [JSONMember(key: "aps", value: .object(aps))]
        if let data { top.append(JSONMember(key: "data", value: .string(data))) }
        for (key, value) in custom where key != "notificationId" { top.append(JSONMember(key: key, value: .string(value))) }
        top.append(JSONMember(key: "notificationId", value: .string(notificationID)))
        let expiration = apns.expiration ?? timeToLive.map { now + $0 }
        return APNsRequest(
            payload: JSON.object(top).serialized(), pushType: alerting ? "alert" : "background",
            priority: alerting && priority == .high ? 10 : 5, expiration: expiration, collapseID: notificationID)
    }

    /// FCM HTTP v1's `message` for `token`, as SAP's FCM provider builds it
    /// (docs/push.md, "What Android gets"): a data message — nothing for the system to show, the
    /// app's handler gets it in the background too — when the notification has `data` and nothing
    /// to show but its alert (no title, body, badge, sound or FCM display member); else a
    /// notification message (title, body). Either way the data holds the key/value pairs of the
    /// `data` JSON object (text values; a `data` that is not an object goes as one `data` entry),
    /// the custom members and the notification's id (FCM data values are strings); a data
    /// message's alert too, where nothing else carries it.
    package func fcmMessage(token: String, notificationID: String) -> JSON {
        var message: [JSONMember] = [JSONMember(key: "token", value: .string(token))]
        let title = gcm.title ?? title
        let body = gcm.body ?? body ?? alert
        let isDataMessage = data != nil && !showsOnAndroid
        if !isDataMessage && (title != nil || body != nil) {
            var shown: [JSONMember] = []
            if let title { shown.append(JSONMember(key: "title", value: .string(title))) }
            if let body { shown.append(JSONMember(key: "body", value: .string(body))) }
            message.append(JSONMember(key: "notification", value: .object(shown)))
        }
        // A key once: the notification's id and the alert are Midtier's to set, then the data
        // object's keys, then the custom members'.
        var data: [JSONMember] = []
        var used: Set<String> = ["notificationId"]
        let alertInData = isDataMessage ? alert : nil
        if alertInData != nil { used.insert("alert") }
        func add(_ key: String, _ value: String) {
            if used.insert(key).inserted { data.append(JSONMember(key: key, value: .string(value))) }
        }
        if let payload = self.data {
            if case .success(let object) = StrictJSON.value(Array(payload.utf8)), let members = object.members {
                // SAP: Android takes key/text value pairs; other values are not passed on.
                for member in members { if case .string(let text) = member.value { add(member.key, text) } }
            } else {
                add("data", payload)
            }
        }
        for (key, value) in custom { add(key, value) }
        if let alertInData { data.append(JSONMember(key: "alert", value: .string(alertInData))) }
        data.append(JSONMember(key: "notificationId", value: .string(notificationID)))
        message.append(JSONMember(key: "data", value: .object(data)))
        var android: [JSONMember] = [JSONMember(key: "priority", value: .string(priority == .high ? "HIGH" : "NORMAL"))]
        if let ttl = gcm.timeToLive ?? timeToLive { android.append(JSONMember(key: "ttl", value: .string("\(ttl)s"))) }
        if let collapseKey = gcm.collapseKey { android.append(JSONMember(key: "collapse_key", value: .string(collapseKey))) }
        var shown: [JSONMember] = []
        if let sound = gcm.sound ?? sound { shown.append(JSONMember(key: "sound", value: .string(sound))) }
        if let icon = gcm.icon { shown.append(JSONMember(key: "icon", value: .string(icon))) }
        // The tag replaces a shown notification with the same tag: by default the notification's
        // id, so that a copy sent again (an answer lost with its connection) shows once.
        if title != nil || body != nil || gcm.tag != nil { shown.append(JSONMember(key: "tag", value: .string(gcm.tag ?? notificationID))) }
        if let color = gcm.color { shown.append(JSONMember(key: "color", value: .string(color))) }
        if let action = gcm.clickAction { shown.append(JSONMember(key: "click_action", value: .string(action))) }
        if let badge { shown.append(JSONMember(key: "notification_count", value: .number(badge))) }
        if !shown.isEmpty && !isDataMessage { android.append(JSONMember(key: "notification", value: .object(shown))) }
        message.append(JSONMember(key: "android", value: .object(android)))
        return ["message": .object(message)]
    }

    /// Whether the notification has something for Android to show besides its alert: a title,
    /// a body, a badge, a sound, or one of FCM's display members.
    var showsOnAndroid: Bool {
        title != nil || body != nil || badge != nil || sound != nil || gcm.title != nil || gcm.body != nil || gcm.sound != nil
            || gcm.icon != nil || gcm.tag != nil || gcm.color != nil || gcm.clickAction != nil
    }

    /// Refuses a notification too large for a push service, naming the size: checked when a
    /// sender sends it, with the longest token and id the worker could put in.
    package func checkSize() throws(PushMessageError) {
        let id = String(repeating: "0", count: 36)
        let apnsSize = apnsRequest(notificationID: id, now: 0).payload.utf8.count
        if apnsSize > pushPayloadLimit {
            throw PushMessageError(message: "the notification is \(apnsSize) bytes for APNs; at most \(pushPayloadLimit) are delivered")
        }
        // FCM counts the message without the token.
        let fcmSize = fcmMessage(token: "", notificationID: id).serialized().utf8.count
        if fcmSize > pushPayloadLimit {
            throw PushMessageError(message: "the notification is \(fcmSize) bytes for FCM; at most \(pushPayloadLimit) are delivered")
        }
    }
}
