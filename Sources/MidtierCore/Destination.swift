// A destination: where calls go and with which credentials (docs/forwarding.md).

/// The `Authentication` property of a destination.
package enum DestinationAuthentication: Sendable {
    case noAuthentication
    /// A technical user; the password is already resolved from its secret.
    case basic(user: String, password: String)
    case samlBearer(SAMLBearerSettings)
    /// `PrincipalPropagation`: a short-lived X.509 certificate for the signed-in user, made by
    /// Midtier as SAP Cloud Connector does (docs/forwarding.md).
    case principalPropagation(PrincipalPropagationSettings)
    /// `ClientCertificateAuthentication`: mutual TLS with the destination's `KeyStoreLocation`.
    case clientCertificate
    /// `UserBasicAuthentication` (Midtier's own): the caller's own Basic credentials, for a
    /// user of a `backend` app whose checking destination is on the same system.
    case userBasic
    /// `OAuth2ClientCredentials` (a technical token), `OAuth2JWTBearer`, `OAuth2UserTokenExchange`
    /// and `OAuth2TokenExchange` (the user's identity-provider token exchanged).
    case oauth2(OAuth2Settings)
}

/// The OAuth 2.0 grant of an `OAuth2*` destination.
package enum OAuth2Grant: Sendable, Equatable {
    /// `client_credentials`: one token for the destination (`OAuth2ClientCredentials`).
    case clientCredentials
    /// RFC 7523's JWT bearer grant with the user's token as the assertion (`OAuth2JWTBearer`,
    /// and `OAuth2UserTokenExchange`, which XSUAA serves with the same grant).
    case jwtBearer
    /// RFC 8693 token exchange with the user's token as the subject (`OAuth2TokenExchange`).
    case tokenExchange
}

/// An `OAuth2*` destination's token service and client (BTP's property names).
package struct OAuth2Settings: Sendable {
    /// The `Authentication` value as configured.
    package var type: String
    package var grant: OAuth2Grant
    package var tokenServiceURL: String
    package var clientId: String
    /// `clientSecret`, resolved; nil for a public client.
    package var clientSecret: String?
    /// `tokenServiceUser`, `tokenServicePassword`: Basic client authentication that wins.
    package var tokenServiceUser: String?
    package var tokenServicePassword: String?
    /// `tokenService.addClientCredentialsInBody`, default true.
    package var addClientCredentialsInBody: Bool
    package var scope: String?
    /// `tokenService.body.<name>`: further form parameters.
    package var extraBody: [(String, String)]

    package init(
        type: String, grant: OAuth2Grant, tokenServiceURL: String, clientId: String, clientSecret: String?,
        tokenServiceUser: String? = nil, tokenServicePassword: String? = nil, addClientCredentialsInBody: Bool = true,
        scope: String? = nil, extraBody: [(String, String)] = []
    ) {
        self.type = type
        self.grant = grant
        self.tokenServiceURL = tokenServiceURL
        self.clientId = clientId
        self.clientSecret = clientSecret
        self.tokenServiceUser = tokenServiceUser
        self.tokenServicePassword = tokenServicePassword
        self.addClientCredentialsInBody = addClientCredentialsInBody
        self.scope = scope
        self.extraBody = extraBody
    }
}

/// `KeyStoreLocation` and `KeyStorePassword`: the certificate (with its chain) and key Midtier
/// presents in TLS to a destination's back end.
package enum ClientIdentity: Sendable {
    /// A PEM file holding the certificate chain and the private key; `passphrase` opens an
    /// encrypted key.
    case pem([UInt8], passphrase: String?)
    /// A PKCS#12 file (`.p12`, `.pfx`) and its password.
    case pkcs12([UInt8], passphrase: String?)
}

/// How the user's certificate reaches the back end (`principalPropagationMode`).
package enum PrincipalPropagationMode: String, Sendable {
    /// As SAP Cloud Connector does: Midtier's own TLS client certificate (`KeyStoreLocation`),
    /// the user's certificate in the `SSL_CLIENT_CERT` header.
    case header
    /// Mutual TLS with the user's own certificate and key.
    case mutualTLS
}

/// A `PrincipalPropagation` destination's certificate settings (docs/forwarding.md).
package struct PrincipalPropagationSettings: Sendable {
    package var mode: PrincipalPropagationMode
    /// `subjectPattern`, default `CN=${name}`.
    package var subjectPattern: SubjectPattern
    /// `certificateValidityMinutes`, default 10.
    package var validityMinutes: Int
    /// `caCertificate`: PEM file contents.
    package var caCertificatePEM: [UInt8]
    /// `caKey`: PEM file contents (possibly encrypted).
    package var caKeyPEM: [UInt8]
    /// `caKeyPassphrase`, resolved.
    package var caKeyPassphrase: String?

    package init(
        mode: PrincipalPropagationMode, subjectPattern: SubjectPattern, validityMinutes: Int,
        caCertificatePEM: [UInt8], caKeyPEM: [UInt8], caKeyPassphrase: String?
    ) {
        self.mode = mode
        self.subjectPattern = subjectPattern
        self.validityMinutes = validityMinutes
        self.caCertificatePEM = caCertificatePEM
        self.caKeyPEM = caKeyPEM
        self.caKeyPassphrase = caKeyPassphrase
    }
}

/// How the SAML assertion is encoded in the token request.
package enum AssertionEncoding: String, Sendable {
    case base64
    case base64url
}

/// Everything needed to build, sign and exchange an assertion for one destination.
package struct SAMLBearerSettings: Sendable {
    /// `tokenServiceURL`.
    package var tokenServiceURL: String
    /// `clientKey`: the OAuth client (SuccessFactors' API key; the ABAP OAuth client), sent as
    /// `client_id`.
    package var clientKey: String
    /// `companyId`: SuccessFactors' company. When set, the request carries `company_id` and the
    /// assertion the `api_key` attribute, as SuccessFactors wants; other token services have none.
    package var companyId: String?
    /// `tokenServiceUser` and `tokenServicePassword`: HTTP Basic client authentication at the
    /// token service (the ABAP OAuth 2.0 server, S/4HANA Cloud).
    package var tokenServiceUser: String?
    package var tokenServicePassword: String?
    /// `scope`: the OAuth scopes asked for, space-separated; nil for none.
    package var scope: String?
    /// `nameQualifier`: `NameID@NameQualifier`.
    package var nameQualifier: String?
    /// `assertionAttributes` (Midtier's own key): the user attributes the assertion carries,
    /// each as a SAML attribute of its name.
    package var assertionAttributes: [String]
    /// `audience`, default `www.successfactors.com` (when `companyId` is set; else required).
    package var audience: String
    /// `assertionIssuer`, default `clientKey`.
    package var assertionIssuer: String
    /// `assertionRecipient`, default `tokenServiceURL` without its query.
    package var assertionRecipient: String
    /// `nameIdFormat`, default `urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified`.
    package var nameIdFormat: String
    /// `authnContextClassRef`, default `urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession`.
    package var authnContextClassRef: String
    /// `samlAssertionEncoding`, default base64.
    package var assertionEncoding: AssertionEncoding
    /// `signingKey`: PEM file contents (private key, possibly encrypted).
    package var signingKeyPEM: [UInt8]
    /// The passphrase of an encrypted `signingKey` (`signingKeyPassphrase`), resolved.
    package var signingKeyPassphrase: String?
    /// `signingCertificate`: PEM file contents.
    package var signingCertificatePEM: [UInt8]

    package init(
        tokenServiceURL: String,
        clientKey: String,
        companyId: String?,
        tokenServiceUser: String? = nil,
        tokenServicePassword: String? = nil,
        scope: String? = nil,
        nameQualifier: String? = nil,
        assertionAttributes: [String] = [],
        audience: String = "www.successfactors.com",
        assertionIssuer: String? = nil,
        assertionRecipient: String? = nil,
        nameIdFormat: String = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified",
        authnContextClassRef: String = "urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession",
        assertionEncoding: AssertionEncoding = .base64,
        signingKeyPEM: [UInt8],
        signingKeyPassphrase: String? = nil,
        signingCertificatePEM: [UInt8]
    ) {
        self.tokenServiceURL = tokenServiceURL
        self.clientKey = clientKey
        self.companyId = companyId
        self.tokenServiceUser = tokenServiceUser
        self.tokenServicePassword = tokenServicePassword
        self.scope = scope
        self.nameQualifier = nameQualifier
        self.assertionAttributes = assertionAttributes
        self.audience = audience
        self.assertionIssuer = assertionIssuer ?? clientKey
        self.assertionRecipient = assertionRecipient ?? String(tokenServiceURL.prefix { $0 != "?" })
        self.nameIdFormat = nameIdFormat
        self.authnContextClassRef = authnContextClassRef
        self.assertionEncoding = assertionEncoding
        self.signingKeyPEM = signingKeyPEM
        self.signingKeyPassphrase = signingKeyPassphrase
        self.signingCertificatePEM = signingCertificatePEM
    }
}

/// `config/destinations/<Name>.json`.
package struct DestinationConfiguration: Sendable {
    /// `Name`.
    package var name: String
    /// `URL`: scheme, host, optional port and base path, without a trailing slash.
    package var url: String
    package var authentication: DestinationAuthentication
    /// `userIdSource`: the user attribute (or JWT claim) whose value is the NameID; nil means
    /// the user id itself.
    package var userIdSource: String?
    /// `timeout` in milliseconds, default 30000.
    package var timeoutMilliseconds: Int
    /// `URL.headers.<name>`: headers added to every forwarded request.
    package var extraHeaders: [(name: String, value: String)]
    /// `URL.queries.<name>`: query parameters added to every forwarded request.
    package var extraQueries: [(name: String, value: String)]
    /// `metadataPatches` (docs/forwarding.md, "`$metadata` patches").
    package var metadataPatches: [MetadataPatch]
    /// `forwardDeviceCookies`: the names of the device's own cookies this back end is sent
    /// (exact bytes); none by default (docs/forwarding.md, "Answers: cookies and CSRF").
    package var forwardDeviceCookies: [String]
    /// `trustedCertificates`: PEM file contents; for an https `URL`, the back end's certificate
    /// must chain to one of these instead of the system's roots (a company CA).
    package var trustedCertificatesPEM: [UInt8]?
    /// `KeyStoreLocation`: the TLS client certificate Midtier presents to the back end
    /// (`ClientCertificateAuthentication`; the system certificate of `PrincipalPropagation`).
    package var clientIdentity: ClientIdentity?

    package init(
        name: String,
        url: String,
        authentication: DestinationAuthentication,
        userIdSource: String? = nil,
        timeoutMilliseconds: Int = 30000,
        extraHeaders: [(name: String, value: String)] = [],
        extraQueries: [(name: String, value: String)] = [],
        metadataPatches: [MetadataPatch] = [],
        trustedCertificatesPEM: [UInt8]? = nil,
        forwardDeviceCookies: [String] = [],
        clientIdentity: ClientIdentity? = nil
    ) {
        self.clientIdentity = clientIdentity
        self.trustedCertificatesPEM = trustedCertificatesPEM
        self.name = name
        self.url = url
        self.authentication = authentication
        self.userIdSource = userIdSource
        self.timeoutMilliseconds = timeoutMilliseconds
        self.extraHeaders = extraHeaders
        self.extraQueries = extraQueries
        self.metadataPatches = metadataPatches
        self.forwardDeviceCookies = forwardDeviceCookies
    }
}

extension DestinationConfiguration {
    /// Why a device's cookie of this name never reaches a back end, listed in
    /// `forwardDeviceCookies` or not; nil for any other name. Letter case is ignored (a back end
    /// may): SAP logon tickets and sessions would let a device act as whoever they belong to,
    /// and `X-SMP-APPCID` is Midtier's own.
    package static func neverForwardedCookie(_ name: String) -> String? {
        let lower = name.lowercased()
        if lower == "mysapsso2" { return "MYSAPSSO2 is a SAP logon ticket" }
        if lower.hasPrefix("sap_sessionid") { return "SAP_SESSIONID_* is a SAP session" }
        if lower == "sap-usercontext" { return "sap-usercontext names a SAP user context" }
        if lower == "x-smp-appcid" { return "X-SMP-APPCID is Midtier's own" }
        return nil
    }
}

/// One `metadataPatches` entry: set facets (attributes) on one property of one entity type,
/// `EntityType[@Name=entityType]/Property[@Name=property]`.
package struct MetadataPatch: Sendable, Equatable {
    package var entityType: String
    package var property: String
    package var set: [String: String]
    package init(entityType: String, property: String, set: [String: String]) {
        self.entityType = entityType
        self.property = property
        self.set = set
    }
}
