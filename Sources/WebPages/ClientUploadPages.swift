import Administration
import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP
import MidtierStore

/// The console's "Client logs" and "Usage reports" pages (docs/console.md): what devices
/// uploaded, newest first, 50 a page, filtered as the admin API filters
/// (`ClientUploadQuery`, the same field names and the same `400`s).
extension ConsoleRoutes {
    static let clientUploadPage = 50
    /// How much of a usage report a row of the listing shows, in characters.
    static let reportPreview = 200

    func clientLogs(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let form = try FormBody.query(request)
        let query = try Self.clientUploadQuery(.log, form)
        let page = try await administration.clientLogs(query)
        var values = clientUploadValues(form, admin, nav: "clientLogs")
        let level = form["level"] ?? ""
        values["levels"] = ClientLogSeverity.allCases.map { ["value": $0.rawValue, "selected": $0.rawValue == level] }
        values["entries"] = page.records.map { record -> [String: Any] in
            let e = record.entry
            var row: [String: Any] = ["time": Self.preciseTime(e.time), "severity": e.severity.rawValue, "registration": record.upload.registration,
                                      "registrationLink": Self.path("/console/client-logs", [("registration", record.upload.registration)]),
                                      "user": record.upload.user.description, "app": record.upload.app, "source": e.source,
                                      "location": e.location, "message": e.message]
            // Mustache shows a section for an empty string too.
            if !e.correlationId.isEmpty { row["correlationId"] = e.correlationId }
            return row
        }
        values["hasEntries"] = !page.records.isEmpty
        Self.pager(&values, "/console/client-logs", form, cursor: query.cursor, next: page.next)
        return pages.page("console-client-logs", values)
    }

    func clientUsage(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let form = try FormBody.query(request)
        let query = try Self.clientUploadQuery(.usage, form)
        let page = try await administration.clientUsage(query)
        var values = clientUploadValues(form, admin, nav: "clientUsage")
        values["reports"] = page.uploads.map { upload -> [String: Any] in
            var row = Self.reportValues(upload)
            row["preview"] = String(upload.report.prefix(Self.reportPreview))
            row["truncated"] = upload.report.count > Self.reportPreview
            row["full"] = Self.path("/console/client-usage/report", [("registration", upload.registration),
                                                                     ("at", String(upload.receivedAt)), ("id", upload.id)])
            return row
        }
        values["hasReports"] = !page.uploads.isEmpty
        Self.pager(&values, "/console/client-usage", form, cursor: query.cursor, next: page.next)
        return pages.page("console-client-usage", values)
    }

    /// One usage report whole: the one of `registration` received at `at` (ms) with `id`.
    func clientUsageReport(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let form = try FormBody.query(request)
        let registration = try form.required("registration"), id = try form.required("id")
        try Administration.checkText(registration, named: "registration")
        try Administration.checkText(id, named: "id")
        guard let at = form["at"].flatMap({ Int64($0) }), at < Int64.max else {
            throw .badRequest("at must be the report's time in milliseconds since 1970")
        }
        let filter = ClientUploadFilter(registration: registration, from: at, until: at + 1)
        let page = try await administration.clientUsage(ClientUploadQuery(filter: filter, limit: ClientUploadQuery.maximumLimit))
        guard let upload = page.uploads.first(where: { UserIdentity.sameBytes($0.id, id) }) else {
            throw .notFound("no usage report \(id) of registration \(registration) at that time; it may have been dropped or purged")
        }
        var values = base(admin, nav: "clientUsage")
        var shown = Self.reportValues(upload)
        shown["text"] = upload.report
        shown["deviceId"] = upload.deviceId
        values["report"] = shown
        values["back"] = Self.path("/console/client-usage", [("registration", upload.registration)])
        return pages.page("console-client-usage-report", values)
    }

    // MARK: Helpers

    /// The filter a page's form sent: the admin API's names; the console pages by 50 and
    /// ignores a realm without a user (the form always sends one).
    private static func clientUploadQuery(_ kind: ClientUploadKind, _ form: FormBody) throws(Refusal) -> ClientUploadQuery {
        try ClientUploadQuery.read(kind, defaultLimit: clientUploadPage, lenientTimes: true) { name in
            switch name {
            case "limit": nil
            case "realm" where (form["userId"] ?? "").isEmpty: nil
            default: form[name]
            }
        }
    }

    /// The layout's values and the filter form's, as the admin typed them.
    private func clientUploadValues(_ form: FormBody, _ admin: SignedIn, nav: String) -> [String: Any] {
        var values = base(admin, nav: nav)
        var query: [String: String] = [:]
        for name in ["registration", "userId", "from", "until", "text"] { query[name] = form[name] ?? "" }
        values["query"] = query
        values["realms"] = realmOptions(selected: form["realm"] ?? UserIdentity.localRealm)
        let app = form["app"] ?? ""
        var apps = facts.apps().sorted()
        if !app.isEmpty, !apps.contains(where: { UserIdentity.sameBytes($0, app) }) { apps.append(app) }
        values["apps"] = apps.map { ["value": $0, "selected": UserIdentity.sameBytes($0, app)] }
        return values
    }

    private static func reportValues(_ upload: ClientUpload) -> [String: Any] {
        ["time": preciseTime(upload.receivedAt), "registration": upload.registration,
         "registrationLink": path("/console/client-logs", [("registration", upload.registration)]),
         "user": upload.user.description, "app": upload.app, "size": upload.size]
    }

    /// The "Newest" link when a cursor is given, and the "Older" link when there are more.
    private static func pager(_ values: inout [String: Any], _ page: String, _ form: FormBody, cursor: ClientUploadCursor?, next: String?) {
        var filters: [(String, String)] = []
        for name in ["registration", "userId", "realm", "app", "level", "from", "until", "text"] {
            guard let value = form[name], !value.isEmpty, name != "realm" || !(form["userId"] ?? "").isEmpty else { continue }
            filters.append((name, value))
        }
        if cursor != nil { values["first"] = path(page, filters) }
        if let next { values["next"] = path(page, filters + [("cursor", next)]) }
    }

    /// `2026-11-25 14:03:07.250 UTC`: log entries come many a minute.
    static func preciseTime(_ milliseconds: Int64) -> String {
        let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return date.formatted(Date.VerbatimFormatStyle(
            format: "\(year: .defaultDigits)-\(month: .twoDigits)-\(day: .twoDigits) \(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits):\(second: .twoDigits).\(secondFraction: .fractional(3)) UTC",
            timeZone: .gmt, calendar: Calendar(identifier: .gregorian)))
    }
}
