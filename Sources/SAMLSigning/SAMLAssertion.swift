import Foundation

/// XML namespaces and algorithm identifiers used by SAML bearer assertions.
public enum SAMLNames {
    public static let assertion = "urn:oasis:names:tc:SAML:2.0:assertion"
    public static let xmldsig = "http://www.w3.org/2000/09/xmldsig#"
    public static let exclusiveC14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
    public static let envelopedSignature = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
    public static let rsaSHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
    public static let sha256 = "http://www.w3.org/2001/04/xmlenc#sha256"
    public static let bearer = "urn:oasis:names:tc:SAML:2.0:cm:bearer"
}

/// The content of one SAML 2.0 bearer assertion for the OAuth2 SAML bearer grant (docs/forwarding.md, `OAuth2SAMLBearerAssertion`).
public struct SAMLAssertion: Sendable, Equatable {
    /// `ID`: fresh per assertion, starts with `_`.
    public var id: String
    public var issueInstant: Date
    /// `Issuer` (default: the client key).
    public var issuer: String
    /// `Subject/NameID`: the user as the back end knows them.
    public var nameID: String
    public var nameIDFormat: String
    /// `SubjectConfirmationData@Recipient`: the token service URL.
    public var recipient: String
    /// `Conditions/AudienceRestriction/Audience`.
    public var audience: String
    /// `Conditions@NotBefore`.
    public var notBefore: Date
    /// `Conditions@NotOnOrAfter` and `SubjectConfirmationData@NotOnOrAfter`.
    public var notOnOrAfter: Date
    public var authnContextClassRef: String
    /// `AuthnStatement@SessionIndex`.
    public var sessionIndex: String
    /// The `api_key` attribute (the client key).
    public var apiKey: String

    /// How long an assertion is valid (10 minutes; docs/forwarding.md).
    public static let lifetime: TimeInterval = 600
    /// How far `NotBefore` lies before `IssueInstant`, for clocks that run a little behind.
    public static let clockSkewAllowance: TimeInterval = 60

    public init(
        id: String = SAMLAssertion.freshID(),
        issueInstant: Date,
        issuer: String,
        nameID: String,
        nameIDFormat: String = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified",
        recipient: String,
        audience: String = "www.successfactors.com",
        notBefore: Date? = nil,
        notOnOrAfter: Date? = nil,
        authnContextClassRef: String = "urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession",
        sessionIndex: String = SAMLAssertion.freshID(),
        apiKey: String
    ) {
        self.id = id
        self.issueInstant = issueInstant
        self.issuer = issuer
        self.nameID = nameID
        self.nameIDFormat = nameIDFormat
        self.recipient = recipient
        self.audience = audience
        self.notBefore = notBefore ?? issueInstant.addingTimeInterval(-Self.clockSkewAllowance)
        self.notOnOrAfter = notOnOrAfter ?? issueInstant.addingTimeInterval(Self.lifetime)
        self.authnContextClassRef = authnContextClassRef
        self.sessionIndex = sessionIndex
        self.apiKey = apiKey
    }

    /// `_` followed by 32 random hex digits: a valid `xs:ID`, unguessable, unique.
    public static func freshID() -> String {
        let hex = Array("0123456789abcdef".utf8)
        var characters: [UInt8] = [0x5F]
        for byte in OpenSSL.randomBytes(16) {
            characters.append(hex[Int(byte >> 4)])
            characters.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// The unsigned assertion as XML. `signature` (already serialized) goes right after `Issuer`.
    func xml(signature: String = "") throws(SigningError) -> String {
        let ns = SAMLNames.self
        return try """
        <saml2:Assertion xmlns:saml2="\(ns.assertion)" ID="\(escaped(id))" IssueInstant="\(XMLTime.format(issueInstant))" Version="2.0">\
        <saml2:Issuer>\(escaped(issuer))</saml2:Issuer>\(signature)\
        <saml2:Subject><saml2:NameID Format="\(escaped(nameIDFormat))">\(escaped(nameID))</saml2:NameID>\
        <saml2:SubjectConfirmation Method="\(ns.bearer)">\
        <saml2:SubjectConfirmationData NotOnOrAfter="\(XMLTime.format(notOnOrAfter))" Recipient="\(escaped(recipient))"/>\
        </saml2:SubjectConfirmation></saml2:Subject>\
        <saml2:Conditions NotBefore="\(XMLTime.format(notBefore))" NotOnOrAfter="\(XMLTime.format(notOnOrAfter))">\
        <saml2:AudienceRestriction><saml2:Audience>\(escaped(audience))</saml2:Audience></saml2:AudienceRestriction>\
        </saml2:Conditions>\
        <saml2:AuthnStatement AuthnInstant="\(XMLTime.format(issueInstant))" SessionIndex="\(escaped(sessionIndex))">\
        <saml2:AuthnContext><saml2:AuthnContextClassRef>\(escaped(authnContextClassRef))</saml2:AuthnContextClassRef></saml2:AuthnContext>\
        </saml2:AuthnStatement>\
        <saml2:AttributeStatement><saml2:Attribute Name="api_key"><saml2:AttributeValue>\(escaped(apiKey))</saml2:AttributeValue></saml2:Attribute></saml2:AttributeStatement>\
        </saml2:Assertion>
        """
    }
}

/// Escapes text for an XML attribute value or element content; refuses characters XML 1.0
/// cannot carry at all (control characters other than tab, CR, LF).
func escaped(_ value: String) throws(SigningError) -> String {
    guard let text = XMLText.escaped(value, unrepresentable: .refuse) else {
        let bad = value.unicodeScalars.first { !XMLText.isRepresentable($0) }?.value ?? 0
        throw SigningError(.invalidXML, "a value contains a character XML cannot carry (U+\(String(bad, radix: 16, uppercase: true)))")
    }
    return text
}
