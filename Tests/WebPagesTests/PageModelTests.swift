import Foundation
import Testing

@testable import WebPages

extension WebPagesTests {
    /// The pages' typed models as the templates show them (docs/console.md): every value is
    /// escaped for HTML, the layout's values reach the page's forms, a `nil` shows nothing, and
    /// a page comes out byte for byte as the templates spell it.
    @Suite struct PageModelTests {
        static let console = Pages(site: "Midtier console", stylesheet: "/console/style.css")
        static let me = Pages(site: "My devices", stylesheet: "/mobileservices/me/style.css")
        static let hostile = "<script>alert('x')</script>&\"q\""
        static let escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;q&quot;"

        static func count(_ text: String, in html: String) -> Int { html.components(separatedBy: text).count - 1 }

        /// A device's text in every field of the confirmation shows escaped; the layout's CSRF
        /// token reaches both forms (sign-out and confirm); the navigation marks its entry only.
        @Test func consoleConfirmEscapesDeviceTextAndCarriesTheToken() {
            let page = ConsolePage.Confirm(
                action: "wipe", label: "Wipe", consequence: "gone", id: Self.hostile, user: Self.hostile,
                app: Self.hostile, deviceType: Self.hostile, deviceModel: Self.hostile, state: "active",
                back: "/console/registrations?user=a")
            let layout = ConsolePage.Layout(admin: "admin#<1>", csrf: "c0ffee", notice: Self.hostile, nav: .init(.registrations))
            let html = Self.console.html("console-confirm", page, layout: layout)
            #expect(!html.contains("<script"), "\(html)")
            #expect(Self.count(Self.escaped, in: html) == 7, "id twice, user, app, type, model, notice: \(html)")
            #expect(Self.count(#"name="csrf" value="c0ffee""#, in: html) == 2, "\(html)")
            #expect(html.contains(#"<span class="who">admin#&lt;1&gt;</span>"#))
            #expect(Self.count(#"aria-current="page""#, in: html) == 1)
            #expect(html.contains(#"<a href="/console/registrations" aria-current="page">Registrations</a>"#))
            #expect(html.contains("<title>Confirm · Midtier console</title>"))
        }

        /// The error page of the self-service page, signed in, exactly as the templates spell it
        /// (the page the code rendered from dictionaries before, byte for byte).
        @Test func selfServiceProblemIsByteForByteTheTemplate() {
            let html = Self.me.html(
                "me-problem", SelfServicePage.Problem(heading: "Refused", message: "action must be lock or wipe"),
                layout: SelfServicePage.Layout(user: "alice", csrf: "c0ffee", notice: nil))
            #expect(
                html == """
                    <!DOCTYPE html>
                    <html lang="en">
                    <head>
                    <meta charset="utf-8">
                    <meta name="viewport" content="width=device-width, initial-scale=1">
                    <title>Refused · My devices</title>
                    <link rel="stylesheet" href="/mobileservices/me/style.css">
                    </head>
                    <body>
                    <header class="bar">
                      <span class="brand">My devices</span>
                      <form method="post" action="/mobileservices/me/sign-out" class="sign-out">
                        <input type="hidden" name="csrf" value="c0ffee">
                        <span class="who" id="who">alice</span>
                        <button type="submit" id="sign-out">Sign out</button>
                      </form>

                    </header>
                    <main>

                    <h1>Refused</h1>
                    <p class="problem" id="problem" role="alert">action must be lock or wipe</p>
                    <p><a href="/mobileservices/me/">Back</a></p>

                    </main>
                    </body>
                    </html>
                    """)
        }

        /// Nobody signed in (an error before sign-in, the sign-in form): no navigation, no
        /// sign-out form, no notice; an absent problem shows no problem paragraph.
        @Test func noLayoutShowsNobodySignedIn() {
            let problem = Self.console.html(
                "console-problem", ConsolePage.Problem(heading: "Not available", message: "store", back: "/console/"),
                layout: ConsolePage.Layout())
            #expect(!problem.contains("<nav>") && !problem.contains("sign-out") && !problem.contains("notice"), "\(problem)")
            let signIn = Self.me.html("me-sign-in", SelfServicePage.SignIn(tokenSignIn: false, problem: nil, signInToken: "f00d"))
            #expect(!signIn.contains("sign-out") && !signIn.contains(#"id="problem""#) && !signIn.contains("sign-in-token"), "\(signIn)")
            #expect(Self.count(#"name="csrf" value="f00d""#, in: signIn) == 1)
            let withToken = Self.me.html("me-sign-in", SelfServicePage.SignIn(tokenSignIn: true, problem: Self.hostile, signInToken: "f00d"))
            #expect(withToken.contains(#"<p class="problem" id="problem" role="alert">\#(Self.escaped)</p>"#), "\(withToken)")
            #expect(Self.count(#"name="csrf" value="f00d""#, in: withToken) == 2)
        }

        /// The users page: a block without a reason shows none; the block and unblock forms
        /// carry the layout's token and the user's percent-encoded id; an identity provider's
        /// user shows their realm, escaped.
        @Test func usersPageShowsTheBlockAndCarriesTheUser() {
            func user(block: ConsolePage.Users.User.Block?) -> ConsolePage.Users {
                var page = ConsolePage.Users(query: .init(id: "dora"), realms: [.init(value: "https://idp", selected: true)])
                page.user = .init(
                    id: "dora", carriedID: "dora%C2%A0", carriedRealm: "https%3A%2F%2Fidp", known: false,
                    realmLabel: "https://idp/<r>", history: "/console/audit?user=dora", registrationsPage: "/console/registrations",
                    block: block, registrations: [], hasRegistrations: false)
                return page
            }
            let layout = ConsolePage.Layout(admin: "admin#1", csrf: "c0ffee", nav: .init(.users))
            let unblocked = Self.console.html("console-users", user(block: nil), layout: layout)
            #expect(unblocked.contains(#"<p class="ok" id="block-state">Not blocked</p>"#), "\(unblocked)")
            #expect(unblocked.contains(#"<span class="realm">of https://idp/&lt;r&gt;</span>"#))
            #expect(unblocked.contains(#"<input type="hidden" name="id" value="dora%C2%A0">"#))
            #expect(Self.count(#"name="csrf" value="c0ffee""#, in: unblocked) == 2, "sign-out and block")
            #expect(unblocked.contains(#"<p class="hint">No registrations.</p>"#))
            let blocked = Self.console.html(
                "console-users", user(block: .init(type: "all", since: "then", by: "admin#2", reason: nil)), layout: layout)
            #expect(blocked.contains(#"id="block-state">Blocked (all) since then by admin#2</p>"#), "\(blocked)")
            let reasoned = Self.console.html(
                "console-users", user(block: .init(type: "all", since: "then", by: "admin#2", reason: Self.hostile)),
                layout: layout)
            #expect(reasoned.contains("by admin#2: \(Self.escaped)</p>"), "\(reasoned)")
            #expect(Self.count(#"name="csrf" value="c0ffee""#, in: reasoned) == 2, "sign-out and unblock")
        }

        /// The devices of the self-service page: a model's text escaped, the actions' links with
        /// the percent-encoded id, a row's values not mistaken for the layout's (`user`).
        @Test func selfServiceDevicesEscapeTheModel() {
            let device = SelfServicePage.Device(
                id: "r1", model: Self.hostile, type: "Android", app: "demo", created: "then", lastContact: "now",
                state: "active", actions: [.init(action: "lock", label: "Lock", registrationID: "r%2F1")])
            let html = Self.me.html(
                "me-devices", SelfServicePage.Devices(devices: [device], hasDevices: true),
                layout: SelfServicePage.Layout(user: "alice", csrf: "c0ffee", notice: "Locked."))
            #expect(html.contains("<td>\(Self.escaped)</td>") && !html.contains("<script"), "\(html)")
            #expect(html.contains(#"<a href="/mobileservices/me/confirm?id=r%2F1&amp;action=lock" class="action-lock">Lock</a>"#))
            #expect(html.contains(#"<p class="notice" id="notice" role="status">Locked.</p>"#))
            #expect(html.contains(#"<span class="who" id="who">alice</span>"#))
            let none = Self.me.html("me-devices", SelfServicePage.Devices(devices: [], hasDevices: false), layout: SelfServicePage.Layout())
            #expect(none.contains(#"id="no-devices""#) && !none.contains("<table"), "\(none)")
        }
    }
}
