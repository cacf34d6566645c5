// A destination: where calls go and with which credentials (docs/forwarding.md).

/// The `Authentication` property of a destination.
public enum DestinationAuthentication: Sendable {
    case noAuthentication
    /// A technical user; the password is already resolved from its secret.
    case basic(user: String, password: String)
    case samlBearer(SAMLBearerSettings)
}

/// How the SAML assertion is encoded in the token request.
public enum AssertionEncoding: String, Sendable {
    case base64
    case base64url
}

/// Everything needed to build, sign and exchange an assertion for one destination.
public struct SAMLBearerSettings: Sendable {
    /// `tokenServiceURL`.
    public var tokenServiceURL: String
    /// `clientKey` (the SuccessFactors API key).
    public var clientKey: String
    /// `companyId`.
    public var companyId: String
    /// `audience`, default `www.successfactors.com`.
    public var audience: String
    /// `assertionIssuer`, default `clientKey`.
    public var assertionIssuer: String
    /// `assertionRecipient`, default `tokenServiceURL` without its query.
    public var assertionRecipient: String
    /// `nameIdFormat`, default `urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified`.
    public var nameIdFormat: String
    /// `authnContextClassRef`, default `urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession`.
    public var authnContextClassRef: String
    /// `samlAssertionEncoding`, default base64.
    public var assertionEncoding: AssertionEncoding
    /// `signingKey`: PEM file contents (private key, possibly encrypted).
    public var signingKeyPEM: [UInt8]
    /// The passphrase of an encrypted `signingKey` (`signingKeyPassphrase`), resolved.
    public var signingKeyPassphrase: String?
    /// `signingCertificate`: PEM file contents.
    public var signingCertificatePEM: [UInt8]

    public init(
        tokenServiceURL: String,
        clientKey: String,
        companyId: String,
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
public struct DestinationConfiguration: Sendable {
    /// `Name`.
    public var name: String
    /// `URL`: scheme, host, optional port and base path, without a trailing slash.
    public var url: String
    public var authentication: DestinationAuthentication
    /// `userIdSource`: the user attribute (or JWT claim) whose value is the NameID; nil means
    /// the user id itself.
    public var userIdSource: String?
    /// `timeout` in milliseconds, default 30000.
    public var timeoutMilliseconds: Int
    /// `URL.headers.<name>`: headers added to every forwarded request.
    public var extraHeaders: [(name: String, value: String)]
    /// `URL.queries.<name>`: query parameters added to every forwarded request.
    public var extraQueries: [(name: String, value: String)]
    /// `metadataPatches` (docs/forwarding.md, "`$metadata` patches").
    public var metadataPatches: [MetadataPatch]
    /// `trustedCertificates`: PEM file contents; for an https `URL`, the back end's certificate
    /// must chain to one of these instead of the system's roots (a company CA).
    public var trustedCertificatesPEM: [UInt8]?

    public init(
        name: String,
        url: String,
        authentication: DestinationAuthentication,
        userIdSource: String? = nil,
        timeoutMilliseconds: Int = 30000,
        extraHeaders: [(name: String, value: String)] = [],
        extraQueries: [(name: String, value: String)] = [],
        metadataPatches: [MetadataPatch] = [],
        trustedCertificatesPEM: [UInt8]? = nil
    ) {
        self.trustedCertificatesPEM = trustedCertificatesPEM
        self.name = name
        self.url = url
        self.authentication = authentication
        self.userIdSource = userIdSource
        self.timeoutMilliseconds = timeoutMilliseconds
        self.extraHeaders = extraHeaders
        self.extraQueries = extraQueries
        self.metadataPatches = metadataPatches
    }
}

/// One `metadataPatches` entry: set facets (attributes) on one property of one entity type,
/// `EntityType[@Name=entityType]/Property[@Name=property]`.
public struct MetadataPatch: Sendable, Equatable {
    public var entityType: String
    public var property: String
    public var set: [String: String]
    public init(entityType: String, property: String, set: [String: String]) {
        self.entityType = entityType
        self.property = property
        self.set = set
    }
}
