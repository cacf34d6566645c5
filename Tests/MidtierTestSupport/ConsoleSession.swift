package import AsyncHTTPClient
import Foundation
import NIOCore
package import NIOHTTP1
import Testing

/// A signed-in web console session, as a browser holds it: its cookie and its forms'
/// synchronizer token.
package struct ConsoleSession: Sendable {
    package let base: String
    package var cookie: String
    package var csrf = ""

    package init(base: String, cookie: String, csrf: String = "") {
        self.base = base
        self.cookie = cookie
        self.csrf = csrf
    }

    /// A call as the browser makes it (a form is posted as a form), redirects not followed.
    package func call(_ client: HTTPClient, _ method: HTTPMethod, _ path: String, body: String? = nil) async throws -> TestEnvironment.Reply {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: "Cookie", value: cookie)
        if let body {
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await client.execute(request, timeout: .seconds(30))
        let buffer = try await response.body.collect(upTo: 16 << 20)
        return TestEnvironment.Reply(
            status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
            body: Array(buffer.readableBytesView))
    }

    /// Signs in with the admin token, as a browser would; the forms' token is read from the
    /// page at `formPage`.
    package static func signIn(_ env: TestEnvironment, _ client: HTTPClient, formPage: String = "/console/users") async throws -> ConsoleSession {
        var console = ConsoleSession(base: "http://127.0.0.1:\(env.adminPort)", cookie: "")
        let page = try await console.call(client, .GET, "/console/sign-in")
        let signInToken = try #require(cookie(page, "midtier_console_sign_in"), "\(page.status)")
        console.cookie = "midtier_console_sign_in=\(signInToken)"
        let token = TestEnvironment.adminToken.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let signedIn = try await console.call(client, .POST, "/console/sign-in", body: "csrf=\(signInToken)&token=\(token)")
        let session = try #require(cookie(signedIn, "midtier_console"), "\(signedIn.status) \(signedIn.text.prefix(300))")
        console.cookie = "midtier_console=\(session)"
        let form = try await console.call(client, .GET, formPage)
        let marker = #"name="csrf" value=""#
        let start = try #require(form.text.range(of: marker), "\(form.status) \(form.text.prefix(300))")
        console.csrf = String(form.text[start.upperBound...].prefix { $0 != "\"" })
        return console
    }

    /// The value of the cookie `name` that `reply` sets, if any.
    package static func cookie(_ reply: TestEnvironment.Reply, _ name: String) -> String? {
        for (header, value) in reply.headers where header.lowercased() == "set-cookie" && value.hasPrefix("\(name)=") {
            let cookie = value.dropFirst(name.count + 1).prefix { $0 != ";" }
            if !cookie.isEmpty { return String(cookie) }
        }
        return nil
    }
}
