import MidtierCore
import MidtierHTTP
import MidtierJSON
import MidtierStore
import Testing

@testable import PushAPI

/// How the Notification Backend API reads a sender's call and reports a notification, on its
/// own (docs/push.md, "Sending"); the whole path through stand-in APNs and FCM is
/// `Tests/e2e/push.py`.
@Suite struct PushSenderRulesTests {
    static func json(_ text: String) throws -> JSON {
        switch StrictJSON.value(Array(text.utf8)) {
        case .success(let value): return value
        case .failure(let error): throw error
        }
    }

    /// The notification object is the body itself (v1 to an app or a device), or its
    /// `notification` member (users, v2), nested once more in v2's localized form.
    @Test func theNotificationObjectInEachForm() throws {
        let plain = try Self.json(#"{"alert":"hi"}"#)
        #expect(PushSenderRoutes.notification(in: plain, audience: .app)["alert"]?.stringValue == "hi")
        let users = try Self.json(#"{"users":["a"],"notification":{"alert":"to users"}}"#)
        #expect(PushSenderRoutes.notification(in: users, audience: .users)["alert"]?.stringValue == "to users")
        let wrapped = try Self.json(#"{"notification":{"notification":{"alert":"nested"}}}"#)
        #expect(PushSenderRoutes.notification(in: wrapped, audience: .app)["alert"]?.stringValue == "nested")
        let missing = try Self.json(#"{"users":["a"]}"#)
        #expect(PushSenderRoutes.notification(in: missing, audience: .users) == .null)
    }

    /// A user a sender names is in the app's realm unless it names its own; never empty, never
    /// with control characters.
    @Test func usersAreNamedInTheAppsRealm() throws {
        #expect(try PushSenderRoutes.user(.string("alice"), realm: "", at: "users[0]") == UserIdentity(realm: "", id: "alice"))
        let other = try Self.json(#"{"realm":"https://idp.example","id":"bob"}"#)
        #expect(try PushSenderRoutes.user(other, realm: "", at: "users[1]") == UserIdentity(realm: "https://idp.example", id: "bob"))
        for bad in [JSON.string(""), .string("a\u{0}b"), .number("1"), try Self.json(#"{"realm":"x"}"#)] {
            #expect(throws: Refusal.self) { try PushSenderRoutes.user(bad, realm: "", at: "users[2]") }
        }
    }

    /// A notification whose text has a control character is refused with 400 naming the member,
    /// as any other member that does not read; one whose alert breaks lines is taken.
    @Test func controlCharactersInTheTextAreRefusedNamingTheMember() throws {
        func refusal(_ notification: JSON) -> Refusal? {
            do throws(Refusal) {
                try PushSenderRoutes.check(notification)
                return nil
            } catch {
                return error
            }
        }
        for (text, member) in [
            (#"{"alert":"a\u0000b"}"#, "notification.alert"), (#"{"alert":"\u001b[2J"}"#, "notification.alert"),
            (#"{"alert":"x","title":"t\u0007"}"#, "notification.title"),
            (#"{"alert":"x","apns":{"alertTitle":"t\u0085"}}"#, "notification.apns.alertTitle"),
            (#"{"alert":"x","gcm":{"body":"b\u007f"}}"#, "notification.gcm.body"),
        ] {
            let refused = refusal(try Self.json(text))
            #expect(refused?.code == "BAD_REQUEST", "\(text)")
            #expect(refused?.message.hasPrefix("\(member) has a control character") == true, "\(String(describing: refused?.message))")
        }
        #expect(refusal(try Self.json(#"{"alert":"line 1\nline 2"}"#)) == nil)
    }

    /// SAP's status of the whole notification, from the counts of its deliveries in each state:
    /// queued while any delivery waits, sent when one was delivered, an error otherwise.
    @Test func theOverallStatus() {
        #expect(PushSenderRoutes.overall(PushDeliveryCounts(pending: 1, delivered: 1)) == "QUEUED")
        #expect(PushSenderRoutes.overall(PushDeliveryCounts(delivered: 1, failed: 1)) == "SENT")
        #expect(PushSenderRoutes.overall(PushDeliveryCounts(failed: 1)) == "ERROR")
        #expect(PushSenderRoutes.overall(PushDeliveryCounts()) == "ERROR")
    }

    /// SAP's notification type, from the services its deliveries went through.
    @Test func theNotificationType() {
        #expect(PushSenderRoutes.notificationType([]) == "")
        #expect(PushSenderRoutes.notificationType([.fcm]) == "android")
        #expect(PushSenderRoutes.notificationType([.fcm, .apns]) == "ios,android")
    }
}
