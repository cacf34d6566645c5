import MidtierJSON
import PushNotifications

/// `push-message`: a push sender's notification body (SAP's notification JSON) as the push
/// API reads it, then rendered for APNs and FCM as the delivery worker does.
enum PushMessageTarget {
    static func run(_ bytes: [UInt8]) {
        guard case .success(let value) = StrictJSON.value(bytes), value.members != nil else { return }
        // Where the push API finds the notification (PushSenderRoutes.notification(in:audience:)).
        var notification = value
        if value["notification"]?.members != nil { notification = value["notification"] ?? .null }
        if let nested = notification["notification"], nested.members != nil { notification = nested }
        guard let message = try? PushMessage.read(notification) else { return }
        guard (try? message.checkSize()) != nil else { return }
        _ = message.apnsRequest(notificationID: "fuzz", now: 1_800_000_000)
        _ = message.fcmMessage(token: "fuzz-token", notificationID: "fuzz").serialized()
    }
}
