package import AsyncHTTPClient
import ExtrasBase64
package import Foundation
package import MidtierCore
import MidtierJSON
import NIOCore
import NIOHTTP1
import RequestTracing
package import SAMLSigning

/// The OAuth 2.0 SAML bearer grant (RFC 7522) against SuccessFactors' `/oauth/token`, the
/// ABAP OAuth 2.0 server's `/sap/bc/sec/oauth2/token` or any other SAML-bearer token service:
/// sign an assertion for the user, POST it as a form, read the token from the JSON answer
/// (docs/forwarding.md, "`OAuth2SAMLBearerAssertion`").
package struct SAMLBearerExchange: Sendable {
    package let settings: SAMLBearerSettings
    package let signer: AssertionSigner
    let httpClient: HTTPClient
    let timeout: TimeAmount

    /// Loads the signing key and certificate of `settings` (they must belong together).
    package init(settings: SAMLBearerSettings, httpClient: HTTPClient, timeoutMilliseconds: Int) throws(SigningError) {
        self.settings = settings
        self.signer = try AssertionSigner(
            keyPEM: settings.signingKeyPEM, passphrase: settings.signingKeyPassphrase,
            certificatePEM: settings.signingCertificatePEM)
        self.httpClient = httpClient
        self.timeout = .milliseconds(Int64(timeoutMilliseconds))
    }

    /// The assertion Midtier would send for `nameID` now (also what `midtier assertion` prints),
    /// with the user's `assertionAttributes` those of `attributes` that the user has.
    package func signedAssertion(nameID: String, attributes: [String: String] = [:], now: Date = Date()) throws(SigningError) -> String {
        let assertion = SAMLAssertion(
            issueInstant: now,
            issuer: settings.assertionIssuer,
            nameID: nameID,
            nameIDFormat: settings.nameIdFormat,
            recipient: settings.assertionRecipient,
            audience: settings.audience,
            authnContextClassRef: settings.authnContextClassRef,
            apiKey: settings.companyId == nil ? nil : settings.clientKey,
            nameQualifier: settings.nameQualifier,
            attributes: settings.assertionAttributes.compactMap { name in attributes[name].map { SAMLAttribute(name: name, value: $0) } }
        )
        return try signer.sign(assertion)
    }

    /// The assertion as the token request carries it (`samlAssertionEncoding`): base64 without
    /// line breaks, or base64url without padding.
    static func encode(_ assertion: String, as encoding: AssertionEncoding) -> String {
        Base64.encodeToString(bytes: Array(assertion.utf8), options: encoding == .base64url ? [.base64UrlAlphabet, .omitPaddingCharacter] : [])
    }

    /// Exchanges a fresh assertion for `nameID` into an access token.
    package func exchange(nameID: String, attributes: [String: String] = [:], newToken: Bool) async throws(TokenExchangeError) -> AccessToken {
        let assertion: String
        do {
            assertion = try signedAssertion(nameID: nameID, attributes: attributes)
        } catch {
            throw .assertionFailed(error.message)
        }
        let encoded = Self.encode(assertion, as: settings.assertionEncoding)
        var form: [(String, String)] = []
        if let companyId = settings.companyId { form.append(("company_id", companyId)) }
        form += [
            ("client_id", settings.clientKey),
            ("grant_type", "urn:ietf:params:oauth:grant-type:saml2-bearer"),
            ("assertion", encoded),
        ]
        if let scope = settings.scope { form.append(("scope", scope)) }
        // `new_token` is SuccessFactors' own parameter.
        if newToken, settings.companyId != nil { form.append(("new_token", "true")) }

        let basic = settings.tokenServiceUser.flatMap { user in settings.tokenServicePassword.map { (user, $0) } }
        return try await TokenServiceRequest.post(
            form, to: settings.tokenServiceURL, basic: basic, httpClient: httpClient, timeout: timeout,
            secrets: [assertion, encoded, settings.tokenServicePassword ?? ""])
    }
}

/// `application/x-www-form-urlencoded`: everything but unreserved characters percent-encoded.
enum FormEncoding {
    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { $0.0.percentEncoded() + "=" + $0.1.percentEncoded() }.joined(separator: "&")
    }
}

/// Reading the token service's JSON answers.
package enum TokenResponse {
    /// The longest token lifetime believed; longer ones are capped (a typo in the back end
    /// should not keep a token for a year).
    static let maximumLifetime = 24 * 3600

    package static func parse(_ bytes: [UInt8]) throws(TokenExchangeError) -> AccessToken {
        let object: [String: JSON]
        switch StrictJSON.object(bytes) {
        case .success(let parsed): object = parsed
        case .failure(let error): throw .invalidResponse("the answer is not a JSON object (\(error.message))")
        }
        guard case .string(let value)? = object["access_token"], !value.isEmpty else {
            throw .invalidResponse("the answer has no access_token")
        }
        guard value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidResponse("the access_token has characters a header cannot carry")
        }
        var type = "Bearer"
        switch object["token_type"] {
        case nil, .null?: break
        case .string(let text)?: type = text
        case _?: throw .invalidResponse("the token_type is not a string")
        }
        guard type.caseInsensitiveCompare("Bearer") == .orderedSame else {
            throw .invalidResponse("the token_type is \(sanitized(type)), not Bearer")
        }
        let lifetime: Int?
        switch object["expires_in"] {
        case let number? where number.doubleValue != nil: lifetime = number.doubleValue.flatMap { Int(exactly: $0.rounded(.down)) }
        case .string(let text)?: lifetime = Int(text)
        default: lifetime = nil
        }
        guard let lifetime, lifetime > 0 else {
            throw .invalidResponse("expires_in is missing or not a positive number")
        }
        return AccessToken(value: value, type: "Bearer", lifetimeSeconds: min(lifetime, maximumLifetime))
    }

    /// The back end's reason from an error body (SuccessFactors' `errorMessage`, OAuth's
    /// `error_description`/`error`), cut short and cleaned; withheld whole when it holds
    /// anything of `avoiding` (the assertion, the user's token, the client's secret or Basic
    /// credentials, in every form Midtier sent them).
    package static func reason(fromErrorBody bytes: [UInt8], avoiding secrets: [String]) -> String {
        var reason = "no reason given"
        if case .success(let object) = StrictJSON.object(bytes) {
            for key in ["errorMessage", "error_description", "message", "error"] {
                if case .string(let text)? = object[key], !text.isEmpty { reason = text; break }
                if let nested = object[key], case .string(let text)? = nested["value"] ?? nested["message"] { reason = text; break }
            }
        }
        // By bytes (String's `contains` would let a secret followed by a combining mark pass),
        // and ignoring ASCII letter case for the percent-encoded forms (`%2f` as well as `%2F`).
        let lowered = Array(reason.utf8).map(asciiLowercased)
        for secret in secrets where !secret.isEmpty {
            let bytes = Array(secret.utf8)
            let percentEncoded = bytes.contains(UInt8(ascii: "%"))
            if contains(percentEncoded ? lowered : Array(reason.utf8), percentEncoded ? bytes.map(asciiLowercased) : bytes) {
                return "reason withheld (it echoed a credential Midtier sent)"
            }
        }
        return sanitized(reason)
    }

    private static func asciiLowercased(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<start + needle.count].elementsEqual(needle) { return true }
        }
        return false
    }

    /// Printable ASCII only, at most 300 characters, and no long token-like runs.
    static func sanitized(_ text: String) -> String {
        var cleaned = String(
            String.UnicodeScalarView(text.unicodeScalars.prefix(300).map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? $0 : " " }))
        let words = cleaned.split(separator: " ", omittingEmptySubsequences: false)
        if words.contains(where: { $0.count > 64 }) {
            cleaned = words.map { $0.count > 64 ? "<redacted>" : String($0) }.joined(separator: " ")
        }
        return cleaned
    }
}
