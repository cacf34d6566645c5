import Foundation
import HTTPTypes
package import Hummingbird
package import Logging
import MidtierCore
import MidtierJSON
import NIOCore

/// The SuccessFactors sandbox as an HTTP application (docs/sandbox.md):
/// - `POST /oauth/token`: the SAML bearer grant (`SandboxTokenService`);
/// - `/odata/v2/...`: the payroll OData service, for the token's own user only;
/// - `GET /sandbox/stats`: exchange counters, and `POST /sandbox/revoke-tokens`: forget every
///   issued token. These two are sandbox-only test hooks, not SuccessFactors APIs.
package struct SandboxServer: Sendable {
    package let tokens: SandboxTokenService
    package let odata: PayrollODataService

    package init(tokens: SandboxTokenService, odata: PayrollODataService = PayrollODataService()) {
        self.tokens = tokens
        self.odata = odata
    }

    package func makeApplication(
        address: BindAddress,
        logger: Logger,
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router()
        router.post("/oauth/token") { request, context -> Response in
            var request = request
            let body = try await request.collectBody(upTo: 1 << 20)
            let form = Self.parseForm(String(buffer: body))
            let answer = tokens.exchange(form: form, host: request.head.authority)
            return Self.json(status: answer.status, answer.body)
        }
        router.get("/sandbox/stats") { _, _ -> Response in
            let statistics = tokens.statistics
            let byUser = statistics.exchangesByUser.sorted { $0.key < $1.key }.map { JSONMember(key: $0.key, value: .number($0.value)) }
            return Self.json(
                status: 200,
                .object([
                    "exchanges": .number(statistics.exchanges), "exchangesByUser": .object(byUser),
                    "newTokenRequests": .number(statistics.newTokenRequests), "rejected": .number(statistics.rejected),
                ]))
        }
        router.post("/sandbox/revoke-tokens") { _, _ -> Response in
            tokens.revokeAll()
            return Self.json(status: 200, .object(["revoked": .bool(true)]))
        }
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete, .head] {
            router.on("/odata/v2/**", method: method) { request, _ -> Response in
                guard let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer "),
                    let user = tokens.user(forToken: String(authorization.dropFirst("Bearer ".count)))
                else {
                    let error = ODataError(status: 401, code: "COE_INVALID_TOKEN", message: "Invalid or expired OAuth token")
                    var response = Self.json(status: error.status, error.json)
                    response.headers[.wwwAuthenticate] = "Bearer"
                    return response
                }
                let path = String(request.uri.path.dropFirst("/odata/v2/".count))
                let serviceRoot = "http://\(request.head.authority ?? "localhost")/odata/v2/"
                let result = odata.handle(
                    method: request.method.rawValue, path: path, query: request.uri.query,
                    serviceRoot: serviceRoot, user: user)
                var headers = HTTPFields()
                headers[.contentType] = result.contentType
                return Response(
                    status: .init(code: result.status), headers: headers,
                    body: .init(byteBuffer: ByteBuffer(bytes: result.body)))
            }
        }
        return Application(
            router: router, configuration: .init(address: address, serverName: nil),
            onServerRunning: onServerRunning, logger: logger)
    }

    static func json(status: Int, _ value: JSON) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = PayrollODataService.jsonContentType
        return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(string: value.serialized())))
    }

    /// `application/x-www-form-urlencoded` → fields (the first value of a repeated name wins).
    static func parseForm(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            // A malformed escape reads as empty, so the field counts as missing.
            let name = String(parts[0]).formDecoded ?? ""
            if fields[name] == nil { fields[name] = parts.count > 1 ? String(parts[1]).formDecoded ?? "" : "" }
        }
        return fields
    }
}
