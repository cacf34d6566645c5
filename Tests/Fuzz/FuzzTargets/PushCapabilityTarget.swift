import MidtierJSON
import PushAPI

/// `push-capability`: a sender's push to a capability (SAP's `{"notification", "users"}`) as the
/// push API reads it before it looks anyone up, then each user's notification (with their badge).
enum PushCapabilityTarget {
    static func run(_ bytes: [UInt8]) {
        guard case .success(let value) = StrictJSON.value(bytes), value.members != nil else { return }
        guard let body = try? PushCapabilityBody.read(value) else { return }
        for target in body.targets {
            _ = body.notification(for: target).serialized()
        }
    }
}
