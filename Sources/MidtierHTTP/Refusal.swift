import Foundation
package import HTTPTypes
package import Hummingbird
package import MidtierCore
import MidtierJSON

/// A refusal as the device sees it (docs/device-api.md, "Refusals"): a status, an OData v2 error body
/// `{"error":{"code":..,"message":{"lang":"en","value":..}}}`, and where SAP defines one, the
/// `x-message-code` header. Messages never carry tokens, passwords or assertions.
package struct Refusal: Error, Sendable, Equatable {
    package var status: HTTPResponse.Status
    package var code: String
    package var message: String
    /// SAP Mobile Services' `x-message-code`, e.g. `TRAFFIC_REG_LOCKED`.
    package var messageCode: String?
    /// For 401: the challenge to send.
    package var challenge: String?
    /// For 405: the methods that are allowed (`Allow`).
    package var allow: String?
    /// For 429 and 503: seconds to wait (`Retry-After`).
    package var retryAfter: Int?

    package init(
        _ status: HTTPResponse.Status, code: String, _ message: String, messageCode: String? = nil, challenge: String? = nil,
        allow: String? = nil, retryAfter: Int? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.messageCode = messageCode
        self.challenge = challenge
        self.allow = allow
        self.retryAfter = retryAfter
    }

    package var response: Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json;charset=utf-8"
        if let messageCode { headers[HTTPField.Name("x-message-code")!] = messageCode }
        if let challenge { headers[.wwwAuthenticate] = challenge }
        if let allow { headers[.allow] = allow }
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        let body = JSON.object(["error": .object(["code": .string(code), "message": .object(["lang": .string("en"), "value": .string(message)])])])
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body.serialized())))
    }
}

extension Refusal {
    package static let basicChallenge = "Basic realm=\"midtier\", charset=\"UTF-8\""
    package static let bearerChallenge = "Bearer realm=\"midtier\""

    package static func unauthorized(_ message: String) -> Refusal {
        Refusal(.unauthorized, code: "UNAUTHORIZED", message, challenge: basicChallenge)
    }
    /// A 401 for an app whose devices sign in with a bearer token (JWT): a Bearer challenge.
    package static func bearerUnauthorized(_ message: String) -> Refusal {
        Refusal(.unauthorized, code: "UNAUTHORIZED", message, challenge: bearerChallenge)
    }
    /// Too many failed sign-ins (429, `Retry-After`).
    package static func tooManySignIns(_ message: String, retryAfter: Int) -> Refusal {
        Refusal(.tooManyRequests, code: "TOO_MANY_REQUESTS", message, retryAfter: retryAfter)
    }
    /// The sign-in queue is full (503, `Retry-After`).
    package static func signInBusy(_ message: String, retryAfter: Int) -> Refusal {
        Refusal(.serviceUnavailable, code: "SERVICE_UNAVAILABLE", message, retryAfter: retryAfter)
    }
    package static func notFound(_ message: String) -> Refusal { Refusal(.notFound, code: "NOT_FOUND", message) }
    package static func badRequest(_ message: String) -> Refusal { Refusal(.badRequest, code: "BAD_REQUEST", message) }
    package static func forbidden(_ message: String, messageCode: String? = nil) -> Refusal {
        Refusal(.forbidden, code: messageCode ?? "FORBIDDEN", message, messageCode: messageCode)
    }
    /// A blocked user: `TRAFFIC_BLOCKED`, `REG_BLOCKED`, or `TRAFFIC_REG_BLOCKED` for both.
    package static func userBlocked(_ kind: UserBlock.Kind) -> Refusal {
        switch kind {
        case .traffic: .forbidden("the user is blocked", messageCode: "TRAFFIC_BLOCKED")
        case .registration: .forbidden("the user is blocked from registering devices", messageCode: "REG_BLOCKED")
        case .all: .forbidden("the user is blocked", messageCode: "TRAFFIC_REG_BLOCKED")
        }
    }
    package static func badGateway(_ message: String) -> Refusal { Refusal(.badGateway, code: "BAD_GATEWAY", message) }
    package static func gatewayTimeout(_ message: String) -> Refusal { Refusal(.gatewayTimeout, code: "GATEWAY_TIMEOUT", message) }
    package static func unavailable(_ message: String) -> Refusal { Refusal(.serviceUnavailable, code: "SERVICE_UNAVAILABLE", message) }
    package static func methodNotAllowed(_ message: String, allow: String? = nil) -> Refusal {
        Refusal(.methodNotAllowed, code: "METHOD_NOT_ALLOWED", message, allow: allow)
    }
}
