import COpenSSL
import Crypto
package import Foundation
package import MidtierCore
import SwiftASN1
import X509

/// The operator's CA for principal propagation (`caCertificate`, `caKey`): issues each
/// signed-in user a short-lived certificate whose subject the destination's `subjectPattern`
/// makes, as SAP Cloud Connector does (docs/forwarding.md, "`PrincipalPropagation`").
///
/// Each certificate has its own new P-256 key. The CA's key may be RSA (2048 bits or more) or
/// ECDSA (P-256, P-384, P-521), in PKCS#1, SEC1 or PKCS#8 PEM, encrypted with `caKeyPassphrase`.
package struct UserCertificateAuthority: Sendable {
    let certificate: Certificate
    let key: Certificate.PrivateKey
    let validity: TimeInterval

    /// How far `notBefore` lies in the past, for back ends whose clock is a little behind.
    package static let clockSkewAllowance: TimeInterval = 60

    package init(_ settings: PrincipalPropagationSettings) throws(UserCertificateError) {
        let certificate: Certificate
        do {
            certificate = try Certificate(pemEncoded: String(decoding: settings.caCertificatePEM, as: UTF8.self))
        } catch {
            throw UserCertificateError("the caCertificate does not load: \(error)")
        }
        let key = try Self.loadKey(settings.caKeyPEM, passphrase: settings.caKeyPassphrase)
        guard key.publicKey == certificate.publicKey else {
            throw UserCertificateError("the caKey does not belong to the caCertificate")
        }
        if let constraints = try? certificate.extensions.basicConstraints, case .notCertificateAuthority = constraints {
            throw UserCertificateError("the caCertificate is not a CA certificate (its basic constraints say CA:FALSE)")
        }
        self.certificate = certificate
        self.key = key
        self.validity = TimeInterval(settings.validityMinutes * 60)
    }

    /// A certificate for `subject` (already filled in), valid from a minute ago for the
    /// destination's validity.
    package func issue(
        subject: [(type: SubjectPattern.AttributeType, value: String)], now: Date = Date()
    ) throws(UserCertificateError) -> UserCertificate {
        do {
            let userKey = P256.Signing.PrivateKey()
            // A pattern is written as LDAP strings are (RFC 4514: most specific first); the
            // certificate holds the names the other way round, most significant first.
            let name = try DistinguishedName(subject.reversed().map { try Self.attribute($0.type, $0.value) })
            let notBefore = now.addingTimeInterval(-Self.clockSkewAllowance)
            let notAfter = now.addingTimeInterval(validity)
            let issued = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: Certificate.PublicKey(userKey.publicKey),
                notValidBefore: notBefore,
                notValidAfter: notAfter,
                issuer: certificate.subject,
                subject: name,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                    try ExtendedKeyUsage([.clientAuth])
                    AuthorityKeyIdentifier(keyIdentifier: try? certificate.extensions.subjectKeyIdentifier?.keyIdentifier)
                },
                issuerPrivateKey: key
            )
            var serializer = DER.Serializer()
            try serializer.serialize(issued)
            return UserCertificate(
                certificateDER: serializer.serializedBytes, keyDER: Array(userKey.derRepresentation),
                caCertificateDER: try Self.der(certificate), notAfter: notAfter,
                subject: String(describing: name))
        } catch let error as UserCertificateError {
            throw error
        } catch {
            throw UserCertificateError("the certificate could not be made: \(error)")
        }
    }

    static func attribute(_ type: SubjectPattern.AttributeType, _ value: String) throws -> RelativeDistinguishedName.Attribute {
        typealias Types = ASN1ObjectIdentifier.RDNAttributeType
        switch type {
        case .commonName: return .init(type: Types.commonName, utf8String: value)
        case .email: return try .init(type: Types.emailAddress, ia5String: value)
        case .locality: return .init(type: Types.localityName, utf8String: value)
        case .organization: return .init(type: Types.organizationName, utf8String: value)
        case .organizationalUnit: return .init(type: Types.organizationalUnitName, utf8String: value)
        case .state: return .init(type: Types.stateOrProvinceName, utf8String: value)
        case .country: return try .init(type: Types.countryName, printableString: value)
        case .domainComponent: return try .init(type: Types.domainComponent, ia5String: value)
        case .userID: return .init(type: [0, 9, 2342, 19_200_300, 100, 1, 1], utf8String: value)
        }
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    /// The CA key, through OpenSSL (which opens every PEM form, encrypted ones too) into
    /// unencrypted PKCS#8 for swift-certificates.
    static func loadKey(_ pem: [UInt8], passphrase: String?) throws(UserCertificateError) -> Certificate.PrivateKey {
        ERR_clear_error()
        let bio = pem.withUnsafeBytes { BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }
        guard let bio else { throw UserCertificateError("the caKey could not be read") }
        defer { BIO_free(bio) }
        let loaded = (passphrase ?? "").withCString { PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0)) }
        guard let loaded else {
            throw UserCertificateError(
                "the caKey does not load (\(passphrase == nil ? "no caKeyPassphrase given" : "wrong caKeyPassphrase or format"))")
        }
        defer { EVP_PKEY_free(loaded) }
        if EVP_PKEY_get_base_id(loaded) == EVP_PKEY_RSA, EVP_PKEY_get_bits(loaded) < 2048 {
            throw UserCertificateError("the caKey is an RSA key shorter than 2048 bits")
        }
        guard let out = BIO_new(BIO_s_mem()) else { throw UserCertificateError("the caKey could not be read") }
        defer { BIO_free(out) }
        guard PEM_write_bio_PKCS8PrivateKey(out, loaded, nil, nil, 0, nil, nil) == 1 else {
            throw UserCertificateError("the caKey could not be converted")
        }
        var data: UnsafeMutablePointer<CChar>?
        let length = midtier_bio_get_mem_data(out, &data)
        guard let data, length > 0 else { throw UserCertificateError("the caKey could not be converted") }
        let text = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
        do {
            return try Certificate.PrivateKey(pemEncoded: text)
        } catch {
            throw UserCertificateError("the caKey is of a kind Midtier cannot sign with (RSA or ECDSA P-256/384/521): \(error)")
        }
    }
}

/// One user's certificate and key, DER. The key never leaves Midtier (it is used only in the
/// TLS handshake of `mutualTLS`) and never reaches a log: `description` hides it.
package struct UserCertificate: Sendable, CustomStringConvertible {
    package let certificateDER: [UInt8]
    /// PKCS#8 DER of the certificate's P-256 key.
    package let keyDER: [UInt8]
    /// The issuing CA's certificate, sent with the user's in TLS.
    package let caCertificateDER: [UInt8]
    package let notAfter: Date
    /// The subject, as text (RFC 4514), for logs and `midtier user-certificate`.
    package let subject: String

    package init(certificateDER: [UInt8], keyDER: [UInt8], caCertificateDER: [UInt8], notAfter: Date, subject: String) {
        self.certificateDER = certificateDER
        self.keyDER = keyDER
        self.caCertificateDER = caCertificateDER
        self.notAfter = notAfter
        self.subject = subject
    }

    /// The `SSL_CLIENT_CERT` header value: the certificate's DER, base64 on one line, as SAP's
    /// ICM reads it (docs/forwarding.md).
    package var headerValue: String { Data(certificateDER).base64EncodedString() }

    /// PEM, for `midtier user-certificate`.
    package var pem: String {
        let lines = Data(certificateDER).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE-----\n" + lines + "\n-----END CERTIFICATE-----\n"
    }

    package var description: String { "UserCertificate(subject: \(subject), notAfter: \(notAfter), key: <redacted>)" }
}

/// Why a CA did not load or a certificate could not be made; never carries key material.
package struct UserCertificateError: Error, Sendable, Equatable, CustomStringConvertible {
    package let message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}
