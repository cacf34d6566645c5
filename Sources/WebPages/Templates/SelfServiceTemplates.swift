// The self-service page for people who lost a phone (docs/console.md, "Lock my lost
// phone"). Every page extends `me-layout`.

extension Templates {
    /// The signed-in user and the sign-out form, in the layout's header.
    static let meHeader = """
        {{#user}}
        <form method="post" action="/mobileservices/me/sign-out" class="sign-out">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <span class="who" id="who">{{user}}</span>
          <button type="submit" id="sign-out">Sign out</button>
        </form>
        {{/user}}
        """

    static let meSignIn = """
        {{<layout}}{{$header}}{{>me-header}}{{/header}}
        {{$title}}Sign in{{/title}}
        {{$content}}
        <h1>Lost your phone?</h1>
        <p>Sign in to see the devices you use the company's apps on, and lock or wipe one.</p>
        {{#problem}}<p class="problem" id="problem" role="alert">{{problem}}</p>{{/problem}}
        <form method="post" action="/mobileservices/me/sign-in" class="card narrow">
          <input type="hidden" name="csrf" value="{{signInToken}}">
          <label for="user">User name</label>
          <input id="user" name="user" autocomplete="username" required autofocus>
          <label for="password">Password</label>
          <input type="password" id="password" name="password" autocomplete="current-password" required>
          <button type="submit" id="sign-in">Sign in</button>
        </form>
        {{#tokenSignIn}}
        <details class="card narrow">
          <summary>Sign in with your company account's token instead</summary>
          <form method="post" action="/mobileservices/me/sign-in">
            <input type="hidden" name="csrf" value="{{signInToken}}">
            <label for="bearer">Token (from your company's identity provider)</label>
            <textarea id="bearer" name="token" rows="4" autocomplete="off" required></textarea>
            <button type="submit" id="sign-in-token">Sign in with the token</button>
          </form>
        </details>
        {{/tokenSignIn}}
        {{/content}}
        {{/layout}}
        """

    static let meDevices = """
        {{<layout}}{{$header}}{{>me-header}}{{/header}}
        {{$title}}My devices{{/title}}
        {{$content}}
        <h1>Your devices</h1>
        {{#hasDevices}}
        <table class="registrations">
          <thead><tr><th>Device</th><th>Type</th><th>App</th><th>Registered</th><th>Last contact</th><th>State</th><th></th></tr></thead>
          <tbody>
          {{#devices}}
          <tr id="device-{{id}}">
            <td>{{model}}</td><td>{{type}}</td><td>{{app}}</td><td class="when">{{created}}</td><td class="when">{{lastContact}}</td>
            <td class="state-{{state}}">{{state}}</td>
            <td class="actions">{{#actions}}<a href="/mobileservices/me/confirm?id={{registrationID}}&amp;action={{action}}" class="action-{{action}}">{{label}}</a> {{/actions}}</td>
          </tr>
          {{/devices}}
          </tbody>
        </table>
        <p class="hint">Locking stops the app on that device from reaching company data until an administrator unlocks it.
        Wiping stops it for good; the device must be set up again.</p>
        {{/hasDevices}}
        {{^hasDevices}}<p class="hint" id="no-devices">You have no registered devices.</p>{{/hasDevices}}
        {{/content}}
        {{/layout}}
        """

    static let meConfirm = """
        {{<layout}}{{$header}}{{>me-header}}{{/header}}
        {{$title}}Confirm{{/title}}
        {{$content}}
        <h1>{{label}} {{model}}?</h1>
        <section class="card narrow">
          <p>{{type}} {{model}}, app {{app}}, registered {{created}}, now {{state}}.</p>
          <p class="consequence">{{consequence}}</p>
          <form method="post" action="/mobileservices/me/{{action}}">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="id" value="{{id}}">
            <button type="submit" id="confirm" class="danger">{{label}}</button>
            <a href="/mobileservices/me/" id="cancel">Cancel</a>
          </form>
        </section>
        {{/content}}
        {{/layout}}
        """

    static let meProblem = """
        {{<layout}}{{$header}}{{>me-header}}{{/header}}
        {{$title}}{{heading}}{{/title}}
        {{$content}}
        <h1>{{heading}}</h1>
        <p class="problem" id="problem" role="alert">{{message}}</p>
        <p><a href="/mobileservices/me/">Back</a></p>
        {{/content}}
        {{/layout}}
        """
}
