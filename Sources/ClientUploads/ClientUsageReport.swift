import MidtierCore
import MidtierJSON

/// A client usage report as SAP's usage upload takes it (docs/device-api.md, "Client logs and
/// usage"): a JSON object with a `report` id (a string), `appInfo` with `application`, and
/// optionally `deviceInfo` and `sessions` whose `events` each have a `time`. Kept whole as sent.
package enum ClientUsageReport {
    /// The report's text, checked; errors name the member that is wrong.
    package static func check(_ body: [UInt8], limit: Int) throws(ClientUploadError) -> String {
        guard !body.isEmpty else { throw .invalid("the usage report is empty (a JSON object with report and appInfo)") }
        guard body.count <= limit else { throw .tooLarge("the usage report is larger than \(limit) bytes") }
        let report: [String: JSON]
        switch StrictJSON.object(body) {
        case .success(let object): report = object
        case .failure(let error): throw .invalid("the usage report is not a JSON object: \(error)")
        }
        guard case .string(let id)? = report["report"], !id.isEmpty else { throw .invalid("the usage report has no report id (report, a string)") }
        guard !StoredText.hasControlCharacters(id) else { throw .invalid("the usage report's report id has a control character") }
        guard let appInfo = report["appInfo"], appInfo.members != nil else { throw .invalid("the usage report has no appInfo object") }
        guard case .string? = appInfo["application"] else { throw .invalid("the usage report's appInfo has no application (a string)") }
        if let deviceInfo = report["deviceInfo"] {
            guard case .object = deviceInfo else { throw .invalid("the usage report's deviceInfo is not an object") }
        }
        if let sessions = report["sessions"] {
            guard case .array(let list) = sessions else { throw .invalid("the usage report's sessions is not a list") }
            for (s, session) in list.enumerated() {
                guard session.members != nil else { throw .invalid("sessions[\(s)] is not an object") }
                guard let events = session["events"] else { continue }
                guard case .array(let eventList) = events else { throw .invalid("sessions[\(s)].events is not a list") }
                for (e, event) in eventList.enumerated() {
                    guard event.members != nil else { throw .invalid("sessions[\(s)].events[\(e)] is not an object") }
                    guard let time = event["time"], time != .null else { throw .invalid("sessions[\(s)].events[\(e)] has no time") }
                }
            }
        }
        // Kept as sent: the strict reader refused raw control characters inside strings and
        // anything that is not UTF-8, so the text holds no NUL (which PostgreSQL cannot keep).
        return String(decoding: body, as: UTF8.self)
    }
}
