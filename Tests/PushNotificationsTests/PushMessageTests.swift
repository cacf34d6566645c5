import MidtierJSON
import Testing

@testable import PushNotifications

/// SAP's notification object as a sender gives it: what is taken, what is refused (naming the
/// member), and what APNs and FCM are sent for it.
@Suite struct PushMessageTests {
    static func read(_ text: String) throws -> PushMessage {
        try PushMessage.read(try StrictJSON.value(Array(text.utf8)).get())
    }

    static func refusal(_ text: String) -> String? {
        do {
            _ = try read(text)
            return nil
        } catch let error as PushMessageError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    @Test func readsSAPsMembers() throws {
        let message = try Self.read(
            #"""
            {"alert":"New payslip","badge":3,"sound":"default","priority":"normal","data":{"slip":"2026-11"},
             "custom":{"kind":"payslip"},"sendAsSms":false,"wns":{},
             "apns":{"alertTitle":"Payroll","alertSubtitle":"November","category":"PAY","threadId":"pay","mutableContent":true,"expiration":1800000000},
             "gcm":{"title":"Payroll","collapseKey":"pay","timeToLive":"3600s","tag":"pay","color":"#00ff00"}}
            """#)
        #expect(message.alert == "New payslip" && message.badge == 3 && message.priority == .normal)
        #expect(message.data == #"{"slip":"2026-11"}"#, "an object is passed on as its JSON text")
        #expect(message.custom.map(\.key) == ["kind"])
        #expect(message.apns.alertTitle == "Payroll" && message.apns.mutableContent && message.apns.expiration == 1_800_000_000)
        #expect(message.gcm.timeToLive == 3600 && message.gcm.collapseKey == "pay")
    }

    @Test func refusesWhatItCannotDeliverNamingTheMember() {
        #expect(Self.refusal(#"{"alert":"x","alret":"y"}"#)?.contains("notification.alret is not a member") == true)
        #expect(Self.refusal(#"{"alert":5}"#)?.contains("notification.alert must be a string") == true)
        #expect(Self.refusal(#"{"badge":-1}"#)?.contains("notification.badge must be a whole number") == true)
        #expect(Self.refusal(#"{"alert":"x","priority":"urgent"}"#)?.contains("high or normal") == true)
        #expect(Self.refusal(#"{"alert":"x","custom":{"aps":"x"}}"#)?.contains("custom.aps") == true)
        #expect(Self.refusal(#"{"alert":"x","custom":{"n":1}}"#)?.contains("custom.n must be a string") == true)
        #expect(Self.refusal(#"{"alert":"x","apns":{"alertTitel":"t"}}"#)?.contains("apns.alertTitel") == true)
        #expect(Self.refusal(#"{"alert":"x","gcm":{"timeToLive":"forever"}}"#)?.contains("gcm.timeToLive") == true)
        #expect(Self.refusal(#"{"alert":"x","timeToLive":99999999}"#)?.contains("timeToLive") == true)
        #expect(Self.refusal(#"{}"#)?.contains("nothing to show") == true)
        #expect(Self.refusal(#"[1]"#)?.contains("must be an object") == true)
    }

    /// Control characters (C0, DEL, C1) in a text a phone shows or a name it uses are refused
    /// naming the member and the character; the alert and the bodies may break lines.
    @Test func refusesControlCharactersNamingTheMember() throws {
        #expect(Self.refusal(#"{"alert":"a\u0000b"}"#) == "notification.alert has a control character (U+0000); only a line feed is allowed")
        #expect(Self.refusal(#"{"alert":"\u001b[31mred"}"#)?.hasPrefix("notification.alert has a control character (U+001B)") == true)
        #expect(Self.refusal(#"{"title":"a\nb"}"#) == "notification.title has a control character (U+000A); none is allowed")
        #expect(Self.refusal(#"{"alert":"x","body":"a\rb"}"#)?.hasPrefix("notification.body has a control character (U+000D)") == true)
        #expect(Self.refusal(#"{"alert":"x","apns":{"alertSubtitle":"a\u007fb"}}"#)?.hasPrefix("notification.apns.alertSubtitle") == true)
        #expect(
            Self.refusal(#"{"alert":"x","gcm":{"title":"a\u0085b"}}"#)?.hasPrefix("notification.gcm.title has a control character (U+0085)") == true)
        #expect(Self.refusal(#"{"alert":"x","sound":"a\tb"}"#)?.hasPrefix("notification.sound") == true)
        #expect(Self.refusal(#"{"alert":"x","apns":{"category":"\u0001"}}"#)?.hasPrefix("notification.apns.category") == true)
        let lines = try Self.read(#"{"alert":"line 1\nline 2","gcm":{"body":"a\nb"},"apns":{"alertBody":"c\nd"}}"#)
        #expect(lines.alert == "line 1\nline 2" && lines.gcm.body == "a\nb" && lines.apns.alertBody == "c\nd")
        #expect(try Self.read(#"{"alert":"Grüße — ✓ 日本"}"#).alert == "Grüße — ✓ 日本")
    }

    @Test func apnsGetsAnAlertWithTitleBadgeSoundAndTheIdentifiers() throws {
        let message = try Self.read(#"{"alert":"body text","title":"Title","badge":2,"sound":"chime","data":"d","custom":{"k":"v"},"timeToLive":60}"#)
        let request = message.apnsRequest(notificationID: "n-1", now: 1000)
        #expect(
            request.payload
                == #"{"aps":{"alert":{"title":"Title","body":"body text"},"badge":2,"sound":"chime"},"data":"d","k":"v","notificationId":"n-1"}"#)
        #expect(request.pushType == "alert" && request.priority == 10 && request.expiration == 1060)
        #expect(request.collapseID == "n-1", "a copy sent again shows once")
    }

    @Test func aSilentNotificationIsABackgroundPushAtPriorityFive() throws {
        let message = try Self.read(#"{"apns":{"contentAvailable":true},"data":"sync"}"#)
        let request = message.apnsRequest(notificationID: "n-2", now: 0)
        #expect(request.payload == #"{"aps":{"content-available":1},"data":"sync","notificationId":"n-2"}"#)
        #expect(request.pushType == "background" && request.priority == 5 && request.expiration == nil)
    }

    /// A notification with nothing to show (data or custom members only) is a background push,
    /// and iOS hands a background push to the app only with `content-available: 1` (Apple,
    /// "Pushing background updates to your App"): without it the app never sees it.
    @Test func dataOnlyIsABackgroundPushWithContentAvailable() throws {
        for (text, payload) in [
            (#"{"data":"sync"}"#, #"{"aps":{"content-available":1},"data":"sync","notificationId":"n-4"}"#),
            (#"{"custom":{"k":"v"},"priority":"high"}"#, #"{"aps":{"content-available":1},"k":"v","notificationId":"n-4"}"#),
        ] {
            let request = try Self.read(text).apnsRequest(notificationID: "n-4", now: 0)
            #expect(request.payload == payload)
            #expect(request.pushType == "background" && request.priority == 5, "Apple: background pushes go at priority 5")
        }
        // One that shows something stays an alert, with content-available only when asked for.
        let shown = try Self.read(#"{"alert":"hi","data":"d"}"#).apnsRequest(notificationID: "n-5", now: 0)
        #expect(shown.payload == #"{"aps":{"alert":"hi"},"data":"d","notificationId":"n-5"}"#)
        #expect(shown.pushType == "alert" && shown.priority == 10)
    }

    @Test func fcmGetsANotificationDataAsStringsAndAndroidOptions() throws {
        let message = try Self.read(
            ##"{"alert":"body","badge":4,"priority":"normal","custom":{"k":"v"},"gcm":{"title":"T","collapseKey":"c","timeToLive":120,"color":"#fff"}}"##
        )
        let json = message.fcmMessage(token: "tok", notificationID: "n-3").serialized()
        #expect(
            json
                == ##"{"message":{"token":"tok","notification":{"title":"T","body":"body"},"data":{"k":"v","notificationId":"n-3"},"android":{"priority":"NORMAL","ttl":"120s","collapse_key":"c","notification":{"tag":"n-3","color":"#fff","notification_count":4}}}}"##
        )
    }

    /// SAP's FCM provider: an alert with data and nothing else to show goes as a data message
    /// (no `notification`, so the app's handler gets it in the background too), the data object's
    /// key/text pairs and the alert in the data; anything to show makes it a notification message
    /// with the same pairs and the alert shown. Docs: help.sap.com, "Google/Firebase Cloud Messaging".
    @Test func androidGetsADataMessageForAnAlertWithData() throws {
        let data = try Self.read(#"{"alert":"New payslip","data":"{\"slip\":\"2026-11\",\"count\":3,\"alert\":\"forged\"}"}"#)
        #expect(
            data.fcmMessage(token: "t", notificationID: "n-6").serialized()
                == #"{"message":{"token":"t","data":{"slip":"2026-11","alert":"New payslip","notificationId":"n-6"},"android":{"priority":"HIGH"}}}"#,
            "a number is not text and is not passed on; the alert is the notification's")
        let shown = try Self.read(#"{"alert":"New payslip","badge":1,"data":"{\"slip\":\"2026-11\"}"}"#)
        #expect(
            shown.fcmMessage(token: "t", notificationID: "n-7").serialized()
                == #"{"message":{"token":"t","notification":{"body":"New payslip"},"data":{"slip":"2026-11","notificationId":"n-7"},"android":{"priority":"HIGH","notification":{"tag":"n-7","notification_count":1}}}}"#
        )
        let text = try Self.read(#"{"alert":"x","data":"not an object"}"#)
        #expect(
            text.fcmMessage(token: "t", notificationID: "n-8")["message"]?["data"] == [
                "data": "not an object", "alert": "x", "notificationId": "n-8",
            ])
        #expect(text.fcmMessage(token: "t", notificationID: "n-8")["message"]?["notification"] == nil)
    }

    /// The notification's id is Midtier's: a custom member of that name cannot replace it.
    @Test func theNotificationIdCannotBeSetBySender() throws {
        let message = try Self.read(#"{"alert":"x","custom":{"notificationId":"forged"}}"#)
        #expect(message.apnsRequest(notificationID: "real", now: 0).payload == #"{"aps":{"alert":"x"},"notificationId":"real"}"#)
        #expect(message.fcmMessage(token: "t", notificationID: "real")["message"]?["data"] == ["notificationId": "real"])
    }

    @Test func tooLargeForAPNsIsRefusedNamingTheSize() throws {
        let message = try Self.read("{\"alert\":\"" + String(repeating: "a", count: 5000) + "\"}")
        #expect(throws: PushMessageError.self) { try message.checkSize() }
        do {
            try message.checkSize()
        } catch {
            #expect(error.message.contains("bytes for APNs; at most 4096"))
        }
        try Self.read("{\"alert\":\"" + String(repeating: "a", count: 3000) + "\"}").checkSize()
    }

    @Test func reasonCodesCarryNoTokenOrText() {
        #expect(reasonCode("BadDeviceToken") == "BadDeviceToken")
        #expect(reasonCode("token 0410abc\n\"quoted\"") == "token0410abcquoted")
        #expect(reasonCode(String(repeating: "x", count: 100)).count == 60)
        #expect(retryAfterSeconds("5") == 5 && retryAfterSeconds("99999") == 3600 && retryAfterSeconds("Wed, 21 Oct 2026 07:28:00 GMT") == 1)
    }
}
