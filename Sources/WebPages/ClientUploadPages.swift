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
        let level = form["level"] ?? ""
        let pager = Self.pager("/console/client-logs", form, cursor: query.cursor, next: page.next)
        let shown = ConsolePage.ClientLogs(
            query: Self.uploadQuery(form), realms: uploadRealms(form), apps: uploadApps(form),
            levels: ClientLogSeverity.allCases.map { ConsolePage.Option(value: $0.rawValue, selected: $0.rawValue == level) },
            entries: page.records.map { record in
                let e = record.entry
                return .init(
                    time: Self.preciseTime(e.time), severity: e.severity.rawValue, registration: record.upload.registration,
                    registrationLink: Self.path("/console/client-logs", [("registration", record.upload.registration)]),
                    user: record.upload.user.description, app: record.upload.app, source: e.source,
                    location: e.location, message: e.message,
                    // Mustache shows a section for an empty string too.
                    correlationId: e.correlationId.isEmpty ? nil : e.correlationId)
            },
            hasEntries: !page.records.isEmpty, first: pager.first, next: pager.next)
        return pages.page("console-client-logs", shown, layout: layout(admin, nav: .clientLogs))
    }

    func clientUsage(_ request: Request, _ admin: SignedIn) async throws(Refusal) -> Response {
        let form = try FormBody.query(request)
        let query = try Self.clientUploadQuery(.usage, form)
        let page = try await administration.clientUsage(query)
        let pager = Self.pager("/console/client-usage", form, cursor: query.cursor, next: page.next)
        let shown = ConsolePage.ClientUsage(
            query: Self.uploadQuery(form), realms: uploadRealms(form), apps: uploadApps(form),
            reports: page.uploads.map { upload in
                .init(
                    time: Self.preciseTime(upload.receivedAt), registration: upload.registration,
                    registrationLink: Self.path("/console/client-logs", [("registration", upload.registration)]),
                    user: upload.user.description, app: upload.app, size: upload.size,
                    preview: String(upload.report.prefix(Self.reportPreview)), truncated: upload.report.count > Self.reportPreview,
                    full: Self.path(
                        "/console/client-usage/report",
                        [
                            ("registration", upload.registration),
                            ("at", String(upload.receivedAt)), ("id", upload.id),
                        ]))
            },
            hasReports: !page.uploads.isEmpty, first: pager.first, next: pager.next)
        return pages.page("console-client-usage", shown, layout: layout(admin, nav: .clientUsage))
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
        let report = ConsolePage.ClientUsageReport.Report(
            time: Self.preciseTime(upload.receivedAt), registration: upload.registration,
            registrationLink: Self.path("/console/client-logs", [("registration", upload.registration)]),
            user: upload.user.description, app: upload.app, size: upload.size, text: upload.report, deviceId: upload.deviceId)
        let shown = ConsolePage.ClientUsageReport(
            report: report,
            back: Self.path("/console/client-usage", [("registration", upload.registration)]))
        return pages.page("console-client-usage-report", shown, layout: layout(admin, nav: .clientUsage))
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

    /// The filter form's fields, as the admin typed them.
    private static func uploadQuery(_ form: FormBody) -> ConsolePage.UploadQuery {
        ConsolePage.UploadQuery(
            registration: form["registration"] ?? "", userId: form["userId"] ?? "", from: form["from"] ?? "",
            until: form["until"] ?? "", text: form["text"] ?? "")
    }

    private func uploadRealms(_ form: FormBody) -> [ConsolePage.Option] {
        realmOptions(selected: form["realm"] ?? UserIdentity.localRealm)
    }

    /// The configured apps, and the one the form names when it is none of them.
    private func uploadApps(_ form: FormBody) -> [ConsolePage.Option] {
        let app = form["app"] ?? ""
        var apps = facts.apps().sorted()
        if !app.isEmpty, !apps.contains(where: { UserIdentity.sameBytes($0, app) }) { apps.append(app) }
        return apps.map { ConsolePage.Option(value: $0, selected: UserIdentity.sameBytes($0, app)) }
    }

    /// The "Newest" link when a cursor is given, and the "Older" link when there are more.
    private static func pager(_ page: String, _ form: FormBody, cursor: ClientUploadCursor?, next: String?) -> (first: String?, next: String?) {
        var filters: [(String, String)] = []
        for name in ["registration", "userId", "realm", "app", "level", "from", "until", "text"] {
            guard let value = form[name], !value.isEmpty, name != "realm" || !(form["userId"] ?? "").isEmpty else { continue }
            filters.append((name, value))
        }
        return (cursor == nil ? nil : path(page, filters), next.map { path(page, filters + [("cursor", $0)]) })
    }

    /// `2026-11-25 14:03:07.250 UTC`: log entries come many a minute.
    static func preciseTime(_ milliseconds: Int64) -> String {
        let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        return date.formatted(
            Date.VerbatimFormatStyle(
                format:
                    "\(year: .defaultDigits)-\(month: .twoDigits)-\(day: .twoDigits) \(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits):\(second: .twoDigits).\(secondFraction: .fractional(3)) UTC",
                timeZone: .gmt, calendar: Calendar(identifier: .gregorian)))
    }
}
