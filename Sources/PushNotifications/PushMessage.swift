package import MidtierJSON

/// A notification as a back end sends it: SAP Mobile Services' notification object
/// (docs/push.md, "Sending"), checked. The common members (`alert`, `badge`, `sound`,
/// `priority`, `data`, `custom`) go to every platform; the `apns` and `gcm` sections to one.
/// Midtier also takes `title`, `body` and `timeToLive` (seconds) for both platforms at once.
package struct PushMessage: Sendable, Equatable {
    package enum Priority: String, Sendable {
        case high, normal
    }

    package var alert: String?
    package var title: String?
    package var body: String?
    package var badge: Int?
    package var sound: String?
    package var priority: Priority = .high
    /// Handed to the app as it is (SAP sends a string, often JSON text).
    package var data: String?
    /// Extra string members, in the order given.
    package var custom: [(key: String, value: String)] = []
    /// Seconds the push services keep trying to reach the device.
    package var timeToLive: Int?
    package var apns = APNs()
    package var gcm = GCM()

    /// The `apns` section (SAP's names).
    package struct APNs: Sendable, Equatable {
        package var alertTitle: String?
        package var alertSubtitle: String?
        package var alertBody: String?
        package var category: String?
        package var threadId: String?
        package var sound: String?
        package var contentAvailable = false
        package var mutableContent = false
        /// Seconds since 1970 after which APNs stops trying.
        package var expiration: Int?
    }

    /// The `gcm` section (SAP's name for FCM).
    package struct GCM: Sendable, Equatable {
        package var title: String?
        package var body: String?
        package var collapseKey: String?
        /// Seconds (SAP writes `"3600s"`; a number is taken too).
        package var timeToLive: Int?
        package var icon: String?
        package var sound: String?
        package var tag: String?
        package var color: String?
        package var clickAction: String?
    }

    package static func == (a: PushMessage, b: PushMessage) -> Bool {
        a.alert == b.alert && a.title == b.title && a.body == b.body && a.badge == b.badge && a.sound == b.sound
            && a.priority == b.priority && a.data == b.data && a.timeToLive == b.timeToLive && a.apns == b.apns && a.gcm == b.gcm
            && a.custom.map(\.key) == b.custom.map(\.key) && a.custom.map(\.value) == b.custom.map(\.value)
    }
}

/// Why a notification object is refused, naming the member.
package struct PushMessageError: Error, Sendable, Equatable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}

extension PushMessage {
    /// SAP's members Midtier takes and does not use (other platforms, SMS): accepted, ignored.
    static let ignored: Set<String> = ["sendAsSms", "wns", "baidu", "w3c", "notifications"]

    /// Reads a notification object; every member's type is checked and unknown members are
    /// refused by name, so a typo does not silently send something else.
    package static func read(_ value: JSON, at path: String = "notification") throws(PushMessageError) -> PushMessage {
        guard let members = value.members else { throw PushMessageError(message: "\(path) must be an object") }
        var message = PushMessage()
        for member in members {
            let key = member.key, at = "\(path).\(key)"
            switch key {
            case "alert": message.alert = try text(member.value, at, lines: true)
            case "title": message.title = try text(member.value, at)
            case "body": message.body = try text(member.value, at, lines: true)
            case "badge": message.badge = try integer(member.value, at, in: 0...999_999)
            case "sound": message.sound = try text(member.value, at)
            case "priority":
                guard let text = try text(member.value, at) else { continue }
                guard let priority = Priority(rawValue: text.lowercased()) else { throw PushMessageError(message: "\(at) must be high or normal") }
                message.priority = priority
            case "data":
                switch member.value {
                case .null: break
                case .string(let text): message.data = text
                // An object is passed on as its JSON text, as SAP's libraries send it.
                case .object, .array: message.data = member.value.serialized()
                default: throw PushMessageError(message: "\(at) must be a string or an object")
                }
            case "custom":
                guard member.value != .null else { continue }
                guard let entries = member.value.members else { throw PushMessageError(message: "\(at) must be an object of strings") }
                for entry in entries {
                    guard let text = entry.value.stringValue else { throw PushMessageError(message: "\(at).\(entry.key) must be a string") }
                    guard entry.key != "aps" else { throw PushMessageError(message: "\(at).aps is APNs' own member and cannot be set") }
                    message.custom.append((entry.key, text))
                }
            case "timeToLive": message.timeToLive = try duration(member.value, at)
            case "apns": message.apns = try readAPNs(member.value, at)
            case "gcm", "fcm": message.gcm = try readGCM(member.value, at)
            case let other where ignored.contains(other): continue
            default: throw PushMessageError(message: "\(at) is not a member of a notification")
            }
        }
        guard message.hasContent else {
            throw PushMessageError(
                message: "\(path) has nothing to show or deliver: give alert, title, body, badge, sound, data, custom or apns.contentAvailable")
        }
        return message
    }

    /// Whether there is anything to deliver.
    var hasContent: Bool {
        [alert, title, body, sound, data, apns.alertTitle, apns.alertBody, apns.alertSubtitle, gcm.title, gcm.body].contains { $0 != nil }
            || badge != nil || !custom.isEmpty || apns.contentAvailable
    }

    private static func readAPNs(_ value: JSON, _ path: String) throws(PushMessageError) -> APNs {
        guard value != .null else { return APNs() }
        guard let members = value.members else { throw PushMessageError(message: "\(path) must be an object") }
        var apns = APNs()
        for member in members {
            let at = "\(path).\(member.key)"
            switch member.key {
            case "alertTitle": apns.alertTitle = try text(member.value, at)
            case "alertSubtitle": apns.alertSubtitle = try text(member.value, at)
            case "alertBody": apns.alertBody = try text(member.value, at, lines: true)
            case "category": apns.category = try text(member.value, at)
            case "threadId": apns.threadId = try text(member.value, at)
            case "sound": apns.sound = try text(member.value, at)
            case "contentAvailable": apns.contentAvailable = try flag(member.value, at)
            case "mutableContent": apns.mutableContent = try flag(member.value, at)
            case "expiration": apns.expiration = try integer(member.value, at, in: 0...Int(Int32.max))
            // SAP's other APNs members (localized keys, launch images, custom sounds): accepted, not used.
            case "localizedAlertKey", "localizedAlertArguments", "localizedAlertTitleKey", "localizedAlertTitleArguments",
                "localizedAlertSubtitleKey", "localizedAlertSubtitleArguments", "launchImageFileName", "showActionButton",
                "actionButtonLabel", "localizedActionButtonKey", "urlArguments", "customValues", "customSound", "topic", "pushType":
                continue
            default: throw PushMessageError(message: "\(at) is not a member of the apns section")
            }
        }
        return apns
    }

    private static func readGCM(_ value: JSON, _ path: String) throws(PushMessageError) -> GCM {
        guard value != .null else { return GCM() }
        guard let members = value.members else { throw PushMessageError(message: "\(path) must be an object") }
        var gcm = GCM()
        for member in members {
            let at = "\(path).\(member.key)"
            switch member.key {
            case "title": gcm.title = try text(member.value, at)
            case "body": gcm.body = try text(member.value, at, lines: true)
            case "collapseKey": gcm.collapseKey = try text(member.value, at)
            case "timeToLive": gcm.timeToLive = try duration(member.value, at)
            case "icon": gcm.icon = try text(member.value, at)
            case "sound": gcm.sound = try text(member.value, at)
            case "tag": gcm.tag = try text(member.value, at)
            case "color": gcm.color = try text(member.value, at)
            case "clickAction": gcm.clickAction = try text(member.value, at)
            case "delayWhileIdle", "restrictedPackageName", "bodyLocKey", "bodyLocArgs", "bodyLocArgsArray", "titleLocKey", "titleLocArgs",
                "titleLocArgsArray":
                continue
            default: throw PushMessageError(message: "\(at) is not a member of the gcm section")
            }
        }
        return gcm
    }

    /// A text member: never a control character (C0, DEL, C1: an escape sequence or a NUL
    /// shown on a phone, or cut off by one), but for a line feed in the texts of several lines
    /// (`lines`: the alert and the bodies, where it breaks the line). docs/push.md, "Sending".
    private static func text(_ value: JSON, _ path: String, lines: Bool = false) throws(PushMessageError) -> String? {
        switch value {
        case .null: return nil
        case .string(let text):
            if let found = text.unicodeScalars.first(where: { $0.properties.generalCategory == .control && !(lines && $0 == "\n") }) {
                let hex = String(found.value, radix: 16, uppercase: true)
                let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                throw PushMessageError(
                    message: "\(path) has a control character (\(code)); " + (lines ? "only a line feed is allowed" : "none is allowed"))
            }
            return text
        default: throw PushMessageError(message: "\(path) must be a string (found \(value.kind))")
        }
    }

    private static func flag(_ value: JSON, _ path: String) throws(PushMessageError) -> Bool {
        switch value {
        case .null: return false
        case .bool(let flag): return flag
        default: throw PushMessageError(message: "\(path) must be true or false (found \(value.kind))")
        }
    }

    private static func integer(_ value: JSON, _ path: String, in range: ClosedRange<Int>) throws(PushMessageError) -> Int? {
        switch value {
        case .null: return nil
        case .number(let text):
            guard let number = Int(text), range.contains(number) else {
                throw PushMessageError(message: "\(path) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        default: throw PushMessageError(message: "\(path) must be a number (found \(value.kind))")
        }
    }

    /// Seconds, as a number or as Google's duration text (`"3600s"`); at most 28 days (FCM's limit).
    private static func duration(_ value: JSON, _ path: String) throws(PushMessageError) -> Int? {
        let limit = 28 * 24 * 3600
        if case .string(let text) = value {
            let digits = text.hasSuffix("s") ? String(text.dropLast()) : text
            guard let seconds = Double(digits), seconds >= 0, seconds <= Double(limit) else {
                throw PushMessageError(message: "\(path) must be seconds from 0 to \(limit), as a number or as \"3600s\"")
            }
            return Int(seconds)
        }
        return try integer(value, path, in: 0...limit)
    }
}
