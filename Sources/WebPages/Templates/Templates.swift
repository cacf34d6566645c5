/// The pages' templates (swift-mustache): one file per page set, each template a Swift string
/// so that the binary carries them. `{{value}}` is escaped for HTML; the templates never use
/// the unescaped `{{{value}}}` form. No inline script or style anywhere (the pages' Content
/// Security Policy forbids both): styles come from `stylesheet`.
enum Templates {
    static let all: [(name: String, text: String)] = [
        ("layout", layout),
        ("console-header", consoleHeader),
        ("console-sign-in", consoleSignIn),
        ("console-overview", consoleOverview),
        ("console-users", consoleUsers),
        ("console-registration-table", consoleRegistrationTable),
        ("console-registrations", consoleRegistrations),
        ("console-confirm", consoleConfirm),
        ("console-audit", consoleAudit),
        ("console-destinations", consoleDestinations),
        ("console-problem", consoleProblem),
        ("console-client-upload-filters", consoleClientUploadFilters),
        ("console-client-logs", consoleClientLogs),
        ("console-client-usage", consoleClientUsage),
        ("console-client-usage-report", consoleClientUsageReport),
        ("console-push", consolePush),
        ("console-push-notification", consolePushNotification),
        ("me-header", meHeader),
        ("me-sign-in", meSignIn),
        ("me-devices", meDevices),
        ("me-confirm", meConfirm),
        ("me-problem", meProblem),
    ]
}

extension Templates {
    /// The page every other extends: `site` and `stylesheet` name the page set; the `title`,
    /// `header` and `content` blocks are the page's own.
    static let layout = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{$title}}{{site}}{{/title}} · {{site}}</title>
        <link rel="stylesheet" href="{{stylesheet}}">
        </head>
        <body>
        <header class="bar">
          <span class="brand">{{site}}</span>
          {{$header}}{{/header}}
        </header>
        <main>
        {{#notice}}<p class="notice" id="notice" role="status">{{notice}}</p>{{/notice}}
        {{$content}}{{/content}}
        </main>
        </body>
        </html>
        """
}
