// The admin console's pages (docs/console.md). Every page extends `layout`, with the
// console's navigation and sign-out form in its header.

extension Templates {
    /// The console's navigation and sign-out form, in the layout's header.
    static let consoleHeader = """
        {{#admin}}
        <nav>
          <a href="/console/"{{#nav.overview}} aria-current="page"{{/nav.overview}}>Overview</a>
          <a href="/console/users"{{#nav.users}} aria-current="page"{{/nav.users}}>Users</a>
          <a href="/console/registrations"{{#nav.registrations}} aria-current="page"{{/nav.registrations}}>Registrations</a>
          <a href="/console/audit"{{#nav.audit}} aria-current="page"{{/nav.audit}}>Audit</a>
          <a href="/console/client-logs"{{#nav.clientLogs}} aria-current="page"{{/nav.clientLogs}}>Client logs</a>
          <a href="/console/client-usage"{{#nav.clientUsage}} aria-current="page"{{/nav.clientUsage}}>Usage reports</a>
          <a href="/console/push"{{#nav.push}} aria-current="page"{{/nav.push}}>Push</a>
          <a href="/console/destinations"{{#nav.destinations}} aria-current="page"{{/nav.destinations}}>Destinations</a>
        </nav>
        <form method="post" action="/console/sign-out" class="sign-out">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <span class="who">{{admin}}</span>
          <button type="submit" id="sign-out">Sign out</button>
        </form>
        {{/admin}}
        """

    static let consoleSignIn = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Sign in{{/title}}
        {{$content}}
        <h1>Sign in</h1>
        {{#problem}}<p class="problem" id="problem" role="alert">{{problem}}</p>{{/problem}}
        <form method="post" action="/console/sign-in" class="card narrow">
          <input type="hidden" name="csrf" value="{{signInToken}}">
          <label for="token">Admin token</label>
          <input type="password" id="token" name="token" autocomplete="off" required autofocus>
          <button type="submit" id="sign-in">Sign in</button>
        </form>
        <p class="hint">An admin token is one whose hash is in <code>adminTokenHashes</code> of <code>midtier.json</code>.
        The console signs you out after {{idleMinutes}} minutes without a request.</p>
        {{/content}}
        {{/layout}}
        """

    static let consoleOverview = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Overview{{/title}}
        {{$content}}
        <h1>Overview</h1>
        <section class="cards">
          <div class="card">
            <h2>Store</h2>
            {{#storeReachable}}<p class="ok" id="store-state">reachable</p>{{/storeReachable}}
            {{^storeReachable}}<p class="bad" id="store-state">not answering</p>{{/storeReachable}}
            <p class="hint">{{storeKind}}</p>
          </div>
          <div class="card">
            <h2>Configuration</h2>
            <p class="ok">loaded</p>
            <p>{{apps}} apps, {{destinations}} destinations, {{users}} users in users.json</p>
          </div>
        </section>
        <h2>Token exchanges since start</h2>
        {{#hasExchanges}}
        <table>
          <thead><tr><th>Destination</th><th>Exchanges</th><th>Failed</th></tr></thead>
          <tbody>
          {{#exchanges}}<tr><td>{{destination}}</td><td>{{total}}</td><td{{#failed}} class="bad"{{/failed}}>{{failures}}</td></tr>{{/exchanges}}
          </tbody>
        </table>
        {{/hasExchanges}}
        {{^exchanges}}<p class="hint">None yet.</p>{{/exchanges}}
        <h2>Onboarding configuration</h2>
        <p class="hint">What an SAP SDK app reads to onboard, for its developers: the <code>ConfigurationProvider.plist</code> of the app bundle, or the same as JSON. No secrets.</p>
        <table>
          <thead><tr><th>App</th><th>Download</th></tr></thead>
          <tbody>
          {{#onboardingApps}}<tr><td>{{app}}</td><td>{{#downloads}}<a href="{{href}}" download>{{label}}</a> {{/downloads}}</td></tr>{{/onboardingApps}}
          </tbody>
        </table>
        {{/content}}
        {{/layout}}
        """

    static let consoleUsers = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Users{{/title}}
        {{$content}}
        <h1>Users</h1>
        <form method="get" action="/console/users" class="filters">
          <label for="user-id">User id</label>
          <input id="user-id" name="id" value="{{query.id}}" required>
          <label for="user-realm">Realm</label>
          <select id="user-realm" name="realm">
            {{#realms}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/realms}}
          </select>
          <button type="submit" id="find-user">Find</button>
        </form>
        {{#hasSuggestions}}
        <p class="hint">users.json ids starting like that:
          {{#suggestions}}<a href="/console/users?id={{urlID}}">{{id}}</a> {{/suggestions}}</p>
        {{/hasSuggestions}}
        {{#missing}}<p class="problem" id="problem">No user {{missing}} is known: not in users.json, never blocked, no registrations.</p>{{/missing}}
        {{#user}}
        <section class="card" id="user">
          <h2><span id="user-name">{{id}}</span>{{#realmLabel}} <span class="realm">of {{realmLabel}}</span>{{/realmLabel}}</h2>
          <p>{{#known}}In users.json.{{/known}}{{^known}}Not in users.json.{{/known}}</p>
          {{#block}}
          <p class="bad" id="block-state">Blocked ({{type}}) since {{since}} by {{by}}{{#reason}}: {{reason}}{{/reason}}</p>
          <form method="post" action="/console/users/unblock">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="id" value="{{carriedID}}">
            <input type="hidden" name="realm" value="{{carriedRealm}}">
            <button type="submit" id="unblock">Unblock</button>
          </form>
          {{/block}}
          {{^block}}
          <p class="ok" id="block-state">Not blocked</p>
          <form method="post" action="/console/users/block" class="inline">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="id" value="{{carriedID}}">
            <input type="hidden" name="realm" value="{{carriedRealm}}">
            <label for="block-type">Block</label>
            <select id="block-type" name="type">
              <option value="all">everything (traffic and new registrations)</option>
              <option value="traffic">traffic only</option>
              <option value="registration">new registrations only</option>
            </select>
            <label for="block-reason">Reason</label>
            <input id="block-reason" name="reason" maxlength="1000">
            <button type="submit" id="block">Block</button>
          </form>
          {{/block}}
          <p><a href="{{history}}" id="user-history">This user's audit trail</a> · <a href="{{registrationsPage}}">Registrations page</a></p>
          <h3>Registrations</h3>
          {{>console-registration-table}}
        </section>
        {{/user}}
        {{/content}}
        {{/layout}}
        """

    /// The registrations table of the users and registrations pages.
    static let consoleRegistrationTable = """
        {{#hasRegistrations}}
        <table class="registrations">
          <thead><tr><th>Id</th><th>User</th><th>App</th><th>Device</th><th>Created</th><th>Last contact</th><th>State</th><th>Actions</th></tr></thead>
          <tbody>
          {{#registrations}}
          <tr id="registration-{{id}}">
            <td class="mono">{{id}}</td><td>{{user}}</td><td>{{app}}</td><td>{{deviceType}} {{deviceModel}}</td>
            <td class="when">{{created}}</td><td class="when">{{lastContact}}</td><td class="state-{{state}}">{{state}}</td>
            <td class="actions">{{#actions}}<a href="/console/registrations/confirm?id={{registrationID}}&amp;action={{action}}" class="action-{{action}}">{{label}}</a> {{/actions}}<a href="{{history}}" class="history">History</a> <a href="{{clientLogs}}" class="client-logs">Logs</a></td>
          </tr>
          {{/registrations}}
          </tbody>
        </table>
        {{/hasRegistrations}}
        {{^registrations}}<p class="hint">No registrations.</p>{{/registrations}}
        """

    static let consoleRegistrations = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Registrations{{/title}}
        {{$content}}
        <h1>Registrations</h1>
        <form method="get" action="/console/registrations" class="filters">
          <label for="filter-user">User</label>
          <input id="filter-user" name="user" value="{{query.user}}">
          <label for="filter-realm">Realm</label>
          <select id="filter-realm" name="realm">
            {{#realms}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/realms}}
          </select>
          <label for="filter-app">App</label>
          <select id="filter-app" name="app">
            <option value="">any</option>
            {{#apps}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/apps}}
          </select>
          <label for="filter-state">State</label>
          <select id="filter-state" name="state">
            <option value="">any</option>
            {{#states}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/states}}
          </select>
          <button type="submit" id="filter">Filter</button>
        </form>
        {{>console-registration-table}}
        <p class="pager">{{#first}}<a href="{{first}}" id="first-page">First page</a>{{/first}} {{#next}}<a href="{{next}}" id="next-page">Next page</a>{{/next}}</p>
        {{/content}}
        {{/layout}}
        """

    static let consoleConfirm = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Confirm{{/title}}
        {{$content}}
        <h1>{{label}} registration {{id}}?</h1>
        <section class="card narrow">
          <p>{{deviceType}} {{deviceModel}} of <strong>{{user}}</strong> in app {{app}}, now {{state}}.</p>
          <p class="consequence">{{consequence}}</p>
          <form method="post" action="/console/registrations/{{action}}">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="id" value="{{id}}">
            <button type="submit" id="confirm" class="danger">{{label}}</button>
            <a href="{{back}}" id="cancel">Cancel</a>
          </form>
        </section>
        {{/content}}
        {{/layout}}
        """

    static let consoleAudit = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Audit{{/title}}
        {{$content}}
        <h1>Audit</h1>
        <form method="get" action="/console/audit" class="filters">
          <label for="audit-user">User</label>
          <input id="audit-user" name="user" value="{{query.user}}">
          <label for="audit-realm">Realm</label>
          <select id="audit-realm" name="realm">
            {{#realms}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/realms}}
          </select>
          <label for="audit-registration">or registration</label>
          <input id="audit-registration" name="registration" value="{{query.registration}}">
          <button type="submit" id="filter">Filter</button>
        </form>
        {{#hasEntries}}
        <table class="audit">
          <thead><tr><th>#</th><th>When</th><th>Who</th><th>What</th><th>Target</th><th>Detail</th><th>From</th></tr></thead>
          <tbody>
          {{#entries}}<tr><td>{{sequence}}</td><td class="when">{{at}}</td><td>{{actor}}</td><td>{{action}}</td><td>{{target}}</td><td>{{detail}}</td><td>{{source}}</td></tr>{{/entries}}
          </tbody>
        </table>
        {{/hasEntries}}
        {{^entries}}<p class="hint">No entries.</p>{{/entries}}
        <p class="pager">{{#newer}}<a href="{{newer}}" id="newest">Newest</a>{{/newer}} {{#older}}<a href="{{older}}" id="older">Older</a>{{/older}}</p>
        {{/content}}
        {{/layout}}
        """

    static let consoleDestinations = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Destinations{{/title}}
        {{$content}}
        <h1>Destinations</h1>
        <p class="hint">As configured, without passwords, keys or key files.</p>
        <table>
          <thead><tr><th>Name</th><th>URL</th><th>Authentication</th><th>Token service</th><th>Timeout</th><th>Added headers</th><th>Device cookies forwarded</th></tr></thead>
          <tbody>
          {{#destinations}}<tr><td>{{name}}</td><td class="mono">{{url}}</td><td>{{authentication}}{{#user}} ({{user}}){{/user}}</td><td class="mono">{{tokenService}}</td><td>{{timeout}} ms</td><td>{{headers}}</td><td>{{cookies}}</td></tr>{{/destinations}}
          </tbody>
        </table>
        {{/content}}
        {{/layout}}
        """

    static let consoleProblem = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}{{heading}}{{/title}}
        {{$content}}
        <h1>{{heading}}</h1>
        <p class="problem" id="problem" role="alert">{{message}}</p>
        <p><a href="{{back}}">Back</a></p>
        {{/content}}
        {{/layout}}
        """
}

// The client logs and usage reports devices uploaded (docs/console.md, "Client logs" and
// "Usage reports"). Everything in them but the filter's own links is device-supplied text,
// shown escaped like every `{{value}}`.
extension Templates {
    /// The filter fields both listings share (the form's names are the admin API's).
    static let consoleClientUploadFilters = """
          <label for="filter-registration">Registration</label>
          <input id="filter-registration" name="registration" value="{{query.registration}}">
          <label for="filter-user">User</label>
          <input id="filter-user" name="userId" value="{{query.userId}}">
          <label for="filter-realm">Realm</label>
          <select id="filter-realm" name="realm">
            {{#realms}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/realms}}
          </select>
          <label for="filter-app">App</label>
          <select id="filter-app" name="app">
            <option value="">any</option>
            {{#apps}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/apps}}
          </select>
          <label for="filter-from">From (UTC)</label>
          <input id="filter-from" name="from" value="{{query.from}}" placeholder="2026-11-25T08:00:00Z">
          <label for="filter-until">until</label>
          <input id="filter-until" name="until" value="{{query.until}}" placeholder="2026-11-25T18:00:00Z">
        """

    static let consoleClientLogs = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Client logs{{/title}}
        {{$content}}
        <h1>Client logs</h1>
        <form method="get" action="/console/client-logs" class="filters">
        {{>console-client-upload-filters}}
          <label for="filter-level">Level</label>
          <select id="filter-level" name="level">
            <option value="">any</option>
            {{#levels}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}} and higher</option>{{/levels}}
          </select>
          <label for="filter-text">Message contains</label>
          <input id="filter-text" name="text" value="{{query.text}}">
          <button type="submit" id="filter">Filter</button>
        </form>
        {{#hasEntries}}
        <table class="client-logs">
          <thead><tr><th>Time</th><th>Level</th><th>Registration</th><th>User</th><th>App</th><th>Source</th><th>Location</th><th>Message</th></tr></thead>
          <tbody>
          {{#entries}}<tr class="client-log"><td class="when">{{time}}</td><td class="severity-{{severity}}">{{severity}}</td><td class="mono"><a href="{{registrationLink}}">{{registration}}</a></td><td>{{user}}</td><td>{{app}}</td><td>{{source}}</td><td class="mono">{{location}}</td><td class="message">{{message}}{{#correlationId}} <span class="hint">({{correlationId}})</span>{{/correlationId}}</td></tr>{{/entries}}
          </tbody>
        </table>
        {{/hasEntries}}
        {{^entries}}<p class="hint">No entries.</p>{{/entries}}
        <p class="pager">{{#first}}<a href="{{first}}" id="newest">Newest</a>{{/first}} {{#next}}<a href="{{next}}" id="older">Older</a>{{/next}}</p>
        {{/content}}
        {{/layout}}
        """

    static let consoleClientUsage = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Usage reports{{/title}}
        {{$content}}
        <h1>Usage reports</h1>
        <form method="get" action="/console/client-usage" class="filters">
        {{>console-client-upload-filters}}
          <button type="submit" id="filter">Filter</button>
        </form>
        {{#hasReports}}
        <table class="client-usage">
          <thead><tr><th>Received</th><th>Registration</th><th>User</th><th>App</th><th>Size</th><th>Report</th></tr></thead>
          <tbody>
          {{#reports}}<tr class="usage-report"><td class="when">{{time}}</td><td class="mono"><a href="{{registrationLink}}">{{registration}}</a></td><td>{{user}}</td><td>{{app}}</td><td>{{size}} bytes</td><td class="mono"><span class="report">{{preview}}</span>{{#truncated}}…{{/truncated}} <a href="{{full}}" class="full-report">Full report</a></td></tr>{{/reports}}
          </tbody>
        </table>
        {{/hasReports}}
        {{^reports}}<p class="hint">No reports.</p>{{/reports}}
        <p class="pager">{{#first}}<a href="{{first}}" id="newest">Newest</a>{{/first}} {{#next}}<a href="{{next}}" id="older">Older</a>{{/next}}</p>
        {{/content}}
        {{/layout}}
        """

    static let consoleClientUsageReport = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Usage report{{/title}}
        {{$content}}
        <h1>Usage report</h1>
        {{#report}}
        <section class="card">
          <p>Received {{time}} from registration <a href="{{registrationLink}}" class="mono">{{registration}}</a> of {{user}}, app {{app}}{{#deviceId}}, device {{deviceId}}{{/deviceId}}: {{size}} bytes.</p>
          <pre class="mono" id="report">{{text}}</pre>
        </section>
        {{/report}}
        <p><a href="{{back}}">Back to the usage reports</a></p>
        {{/content}}
        {{/layout}}
        """
}
