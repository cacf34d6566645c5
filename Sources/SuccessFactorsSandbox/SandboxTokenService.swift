package import Foundation
package import MidtierCore
package import MidtierJSON
package import SAMLSigning
import Synchronization

/// The sandbox's `/oauth/token` (docs/sandbox.md): the OAuth 2.0 SAML bearer grant as SuccessFactors
/// answers it. The assertion is verified against the registered certificate only, then its
/// issuer and `api_key` against `client_id`, its audience, recipient and time window, and
/// `company_id`. Tokens are opaque random strings kept in memory with their user.
package final class SandboxTokenService: Sendable {
    package struct Settings: Sendable {
        package var certificatePEM: [UInt8]
        package var clientID: String
        package var companyID: String
        package var audience: String
        /// The token URL assertions must name as `Recipient`; nil means "this server's own
        /// `/oauth/token` as the request's Host names it".
        package var tokenURL: String?
        package var tokenLifetimeSeconds: Int

        package init(
            certificatePEM: [UInt8], clientID: String, companyID: String, audience: String = "www.successfactors.com",
            tokenURL: String? = nil, tokenLifetimeSeconds: Int = 3600
        ) {
            self.certificatePEM = certificatePEM
            self.clientID = clientID
            self.companyID = companyID
            self.audience = audience
            self.tokenURL = tokenURL
            self.tokenLifetimeSeconds = tokenLifetimeSeconds
        }
    }

    /// An answer: status and JSON body (members in key order, as SuccessFactors writes them).
    package struct Answer: Sendable {
        package var status: Int
        package var body: JSON
    }

    /// Counters for tests and demos (`GET /sandbox/stats`).
    package struct Statistics: Sendable {
        package var exchanges = 0
        package var newTokenRequests = 0
        package var rejected = 0
        package var exchangesByUser: [String: Int] = [:]
    }

    private struct IssuedToken {
        let user: String
        let expiresAt: Date
    }

    private struct State {
        var tokens: [String: IssuedToken] = [:]
        /// The current token per user, handed out again until it expires unless `new_token=true`.
        var currentToken: [String: String] = [:]
        var statistics = Statistics()
    }

    private let settings: Settings
    private let verifier: AssertionVerifier
    private let state = Mutex(State())

    package init(settings: Settings) throws(SigningError) {
        self.settings = settings
        self.verifier = AssertionVerifier(trustedCertificate: try SigningCertificate(pem: settings.certificatePEM))
    }

    package var statistics: Statistics { state.withLock { $0.statistics } }

    /// The user a token belongs to, while it is valid.
    package func user(forToken token: String, now: Date = Date()) -> String? {
        state.withLock { state in
            guard let issued = state.tokens[token], now < issued.expiresAt else { return nil }
            return issued.user
        }
    }

    /// Invalidates every token issued so far (so a test can make the back end answer 401).
    package func revokeAll() {
        state.withLock { state in
            state.tokens.removeAll()
            state.currentToken.removeAll()
        }
    }

    /// Handles a token request whose form fields are `form`; `host` is the request's Host.
    package func exchange(form: [String: String], host: String?, now: Date = Date()) -> Answer {
        func refuse(_ status: Int, _ message: String) -> Answer {
            state.withLock { $0.statistics.rejected += 1 }
            return Answer(
                status: status,
                body: .object([
                    "errorMessage": .string(message), "httpStatus": .string(status == 401 ? "401 Unauthorized" : "400 Bad Request"),
                ]))
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:saml2-bearer" else {
            return refuse(400, "Unsupported grant type; expected urn:ietf:params:oauth:grant-type:saml2-bearer")
        }
        guard let clientID = form["client_id"], !clientID.isEmpty else { return refuse(400, "client_id is missing") }
        guard clientID == settings.clientID else { return refuse(401, "Invalid client_id: the OAuth client is not registered") }
        guard let companyID = form["company_id"], !companyID.isEmpty else { return refuse(400, "company_id is missing") }
        guard companyID == settings.companyID else { return refuse(401, "Invalid company_id") }
        guard let encoded = form["assertion"], !encoded.isEmpty else { return refuse(400, "assertion is missing") }
        guard let xml = Self.decodeBase64(encoded) else { return refuse(400, "The SAML assertion is not base64 encoded") }

        let claims: VerifiedAssertion
        do {
            claims = try verifier.verify(xml)
        } catch {
            return refuse(
                401,
                "Unable to verify the signature of the SAML assertion. Please ensure that the assertion has a signature and the key pairs match the client ID (\(error.message))"
            )
        }
        let recipient = settings.tokenURL ?? "http://\(host ?? "localhost")/oauth/token"
        let expectations = AssertionExpectations(clientID: clientID, audience: settings.audience, recipient: recipient)
        do {
            try expectations.check(claims, now: now)
        } catch {
            return refuse(401, error.message)
        }

        let forceNew = form["new_token"] == "true"
        let user = claims.nameID
        return state.withLock { state in
            state.statistics.exchanges += 1
            state.statistics.exchangesByUser[user, default: 0] += 1
            if forceNew { state.statistics.newTokenRequests += 1 }
            if !forceNew, let current = state.currentToken[user], let issued = state.tokens[current], now < issued.expiresAt {
                return Self.granted(current, expiresIn: Int(issued.expiresAt.timeIntervalSince(now)))
            }
            let token = Self.randomToken()
            state.tokens[token] = IssuedToken(user: user, expiresAt: now.addingTimeInterval(Double(settings.tokenLifetimeSeconds)))
            state.currentToken[user] = token
            return Self.granted(token, expiresIn: settings.tokenLifetimeSeconds)
        }
    }

    private static func granted(_ token: String, expiresIn seconds: Int) -> Answer {
        Answer(
            status: 200,
            body: .object([
                "access_token": .string(token), "expires_in": .number(seconds), "token_type": .string("Bearer"),
            ]))
    }

    static func decodeBase64(_ text: String) -> [UInt8]? {
        var normalized = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        normalized = normalized.filter { !$0.isWhitespace }
        while normalized.count % 4 != 0 { normalized.append("=") }
        return Data(base64Encoded: normalized).map(Array.init)
    }

    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(generator.next() as UInt64, radix: 16).leftPadded(to: 16) }.joined()
    }
}

extension String {
    func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
