import MidtierJSON
import PushAPI

/// `push-bulk`: a sender's bulk push body (SAP's `{"notification", "userNotifications"}`) as the
/// push API reads it before it looks anyone up, then each notification rendered for APNs and FCM.
enum PushBulkTarget {
    static func run(_ bytes: [UInt8]) {
        guard case .success(let value) = StrictJSON.value(bytes), value.members != nil else { return }
        guard let body = try? PushBulkBody.read(value, realm: "") else { return }
        for entry in body.entries {
            _ = entry.notification.serialized()
        }
    }
}
