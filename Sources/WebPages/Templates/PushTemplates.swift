// The console's Push pages (docs/console.md, "Push").

extension Templates {
    static let consolePush = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Push{{/title}}
        {{$content}}
        <h1>Push notifications</h1>
        <section class="card">
          <h2>Send a test notification</h2>
          {{#hasPushApps}}
          <form method="post" action="/console/push/test" class="filters" id="push-test">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <label for="test-realm">Realm</label>
            <select id="test-realm" name="realm">
              {{#realms}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/realms}}
            </select>
            <label for="test-user">User id</label>
            <input id="test-user" name="userId" value="{{test.userId}}" required>
            <label for="test-app">App</label>
            <select id="test-app" name="app">
              {{#pushApps}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/pushApps}}
            </select>
            <label for="test-alert">Alert</label>
            <input id="test-alert" name="alert" value="{{test.alert}}" maxlength="{{maximumAlert}}" required>
            <button type="submit" id="send-test">Send</button>
          </form>
          <p class="hint">Goes to the user's active registrations in the app that hold a push token, as a back end's call would, and is audited.</p>
          {{/hasPushApps}}
          {{^hasPushApps}}<p class="hint" id="no-push-apps">No app has push notifications set up (docs/push.md).</p>{{/hasPushApps}}
        </section>
        <h2>Recent notifications</h2>
        <form method="get" action="/console/push" class="filters">
          <label for="filter-app">App</label>
          <select id="filter-app" name="app">
            <option value="">any</option>
            {{#apps}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/apps}}
          </select>
          <button type="submit" id="filter">Filter</button>
        </form>
        {{#hasNotifications}}
        <table class="push-notifications">
          <thead><tr><th>Notification</th><th>App</th><th>Sender</th><th>Time</th><th>Status</th><th>Deliveries</th></tr></thead>
          <tbody>
          {{#notifications}}<tr class="push-notification"><td class="mono"><a href="{{link}}">{{id}}</a></td><td>{{app}}</td><td>{{sender}}</td><td class="when">{{time}}</td><td class="push-status">{{status}}</td><td>{{deliveries}}</td></tr>{{/notifications}}
          </tbody>
        </table>
        <p class="hint">{{limit}} at most to a page, newest first.</p>
        <p class="pager">{{#first}}<a href="{{first}}" id="newest">Newest</a>{{/first}} {{#next}}<a href="{{next}}" id="older">Older</a>{{/next}}</p>
        {{/hasNotifications}}
        {{^hasNotifications}}<p class="hint" id="no-notifications">No notifications.</p>{{/hasNotifications}}
        {{/content}}
        {{/layout}}
        """

    static let consolePushNotification = """
        {{<layout}}{{$header}}{{>console-header}}{{/header}}
        {{$title}}Notification{{/title}}
        {{$content}}
        <h1>Notification <span class="mono" id="notification-id">{{id}}</span></h1>
        <section class="card">
          <p>App {{app}}, sent by {{sender}} at {{time}}: <strong id="push-status">{{status}}</strong></p>
          <pre class="mono" id="payload">{{payload}}</pre>
          <p id="delivery-states">{{total}} deliveries:{{#states}} <span class="delivery-state">{{state}} {{count}}</span>{{/states}}</p>
        </section>
        {{#hasDeliveries}}
        <table class="push-deliveries">
          <thead><tr><th>Registration</th><th>State</th><th>Attempts</th><th>Provider</th><th>Reason</th><th>Updated</th></tr></thead>
          <tbody>
          {{#deliveries}}<tr class="push-delivery"><td class="mono">{{#registrationLink}}<a href="{{registrationLink}}">{{registration}}</a>{{/registrationLink}}{{^registrationLink}}{{registration}}{{/registrationLink}}</td><td>{{state}}</td><td>{{attempts}}</td><td>{{provider}}</td><td>{{reason}}</td><td class="when">{{updated}}</td></tr>{{/deliveries}}
          </tbody>
        </table>
        {{#truncated}}<p class="hint">A page of the {{total}} deliveries, by registration id.</p>{{/truncated}}
        {{/hasDeliveries}}
        {{^hasDeliveries}}<p class="hint">No deliveries.</p>{{/hasDeliveries}}
        <p class="pager">{{#first}}<a href="{{first}}" id="first-deliveries">First deliveries</a>{{/first}} {{#next}}<a href="{{next}}" id="next-deliveries">Next deliveries</a>{{/next}}</p>
        <p><a href="{{back}}">Back to the notifications</a></p>
        {{/content}}
        {{/layout}}
        """
}
