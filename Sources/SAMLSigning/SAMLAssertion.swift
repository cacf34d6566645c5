package import Foundation

/// XML namespaces and algorithm identifiers used by SAML bearer assertions.
package enum SAMLNames {
    package static let assertion = "urn:oasis:names:tc:SAML:2.0:assertion"
    package static let xmldsig = "http://www.w3.org/2000/09/xmldsig#"
    package static let exclusiveC14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
    package static let envelopedSignature = "http://www.w3.org/2000/09/xmldsig#enveloped-signature"
    package static let rsaSHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
    package static let sha256 = "http://www.w3.org/2001/04/xmlenc#sha256"
    package static let bearer = "urn:oasis:names:tc:SAML:2.0:cm:bearer"
}

/// The content of one SAML 2.0 bearer assertion for the OAuth2 SAML bearer grant
/// (docs/forwarding.md, `OAuth2SAMLBearerAssertion`).
package struct SAMLAssertion: Sendable, Equatable {
    /// `ID`: fresh per assertion, starts with `_`.
    package var id: String
    package var issueInstant: Date
    /// `Issuer` (default: the client key).
    package var issuer: String
    /// `Subject/NameID`: the user as the back end knows them.
    package var nameID: String
    package var nameIDFormat: String
    /// `SubjectConfirmationData@Recipient`: the token service URL.
    package var recipient: String
    /// `Conditions/AudienceRestriction/Audience`.
    package var audience: String
    /// `Conditions@NotBefore`.
    package var notBefore: Date
    /// `Conditions@NotOnOrAfter` and `SubjectConfirmationData@NotOnOrAfter`.
    package var notOnOrAfter: Date
    package var authnContextClassRef: String
    /// `AuthnStatement@SessionIndex`.
    package var sessionIndex: String
    /// The `api_key` attribute (the client key), which SuccessFactors wants; nil for other
    /// token services.
    package var apiKey: String?
    /// `NameID@NameQualifier` (`nameQualifier`), the user's security domain; nil for none.
    package var nameQualifier: String?
    /// Further attributes (`assertionAttributes`: the user's attributes), after `api_key`.
    package var attributes: [SAMLAttribute]

    /// How long an assertion is valid (10 minutes; docs/forwarding.md).
    package static let lifetime: TimeInterval = 600
    /// How far `NotBefore` lies before `IssueInstant`, for clocks that run a little behind.
    package static let clockSkewAllowance: TimeInterval = 60

    package init(
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
        apiKey: String?,
        nameQualifier: String? = nil,
        attributes: [SAMLAttribute] = []
    ) {
        self.nameQualifier = nameQualifier
        self.attributes = attributes
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
    package static func freshID() -> String {
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
        var statement = ""
        let all = (apiKey.map { [SAMLAttribute(name: "api_key", value: $0)] } ?? []) + attributes
        if !all.isEmpty {
            statement = "<saml2:AttributeStatement>"
            for attribute in all {
                statement += try
                    "<saml2:Attribute Name=\"\(escaped(attribute.name))\"><saml2:AttributeValue>\(escaped(attribute.value))</saml2:AttributeValue></saml2:Attribute>"
            }
            statement += "</saml2:AttributeStatement>"
        }
        var qualifier = ""
        if let nameQualifier { qualifier = " NameQualifier=\"\(try escaped(nameQualifier))\"" }
        return try """
        <saml2:Assertion xmlns:saml2="\(ns.assertion)" ID="\(escaped(id))" IssueInstant="\(XMLTime.format(issueInstant))" Version="2.0">\
        <saml2:Issuer>\(escaped(issuer))</saml2:Issuer>\(signature)\
        <saml2:Subject><saml2:NameID Format="\(escaped(nameIDFormat))"\(qualifier)>\(escaped(nameID))</saml2:NameID>\
        <saml2:SubjectConfirmation Method="\(ns.bearer)">\
        <saml2:SubjectConfirmationData NotOnOrAfter="\(XMLTime.format(notOnOrAfter))" Recipient="\(escaped(recipient))"/>\
        </saml2:SubjectConfirmation></saml2:Subject>\
        <saml2:Conditions NotBefore="\(XMLTime.format(notBefore))" NotOnOrAfter="\(XMLTime.format(notOnOrAfter))">\
        <saml2:AudienceRestriction><saml2:Audience>\(escaped(audience))</saml2:Audience></saml2:AudienceRestriction>\
        </saml2:Conditions>\
        <saml2:AuthnStatement AuthnInstant="\(XMLTime.format(issueInstant))" SessionIndex="\(escaped(sessionIndex))">\
        <saml2:AuthnContext><saml2:AuthnContextClassRef>\(escaped(authnContextClassRef))</saml2:AuthnContextClassRef></saml2:AuthnContext>\
        </saml2:AuthnStatement>\
        \(statement)</saml2:Assertion>
        """
    }
}

/// One `saml2:Attribute` with one value.
package struct SAMLAttribute: Sendable, Equatable {
    package var name: String
    package var value: String
    package init(name: String, value: String) {
        self.name = name
        self.value = value
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
