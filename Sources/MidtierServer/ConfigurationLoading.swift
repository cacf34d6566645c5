package import ConfigurationFiles
import Forwarding
import Foundation
package import MidtierCore
import PrincipalPropagation
import SAMLSigning

/// Loads a configuration directory, with the signing material checked by the SAML module.
package func loadConfiguration(_ directory: String) throws(ConfigurationErrors) -> MidtierConfiguration {
    try ConfigurationLoader(
        directory: directory, validateSigningMaterial: validateSigningMaterial,
        validateDestination: validateDestinationMaterial
    ).load()
}

/// nil when the key loads (with its passphrase) and belongs to the certificate.
@Sendable func validateSigningMaterial(_ settings: SAMLBearerSettings) -> (key: String, message: String)? {
    let certificate: SigningCertificate
    do {
        certificate = try SigningCertificate(pem: settings.signingCertificatePEM)
    } catch {
        return ("signingCertificate", error.message)
    }
    do {
        let key = try SigningKey(pem: settings.signingKeyPEM, passphrase: settings.signingKeyPassphrase)
        guard key.matches(certificate) else { return ("signingKey", "the key does not belong to signingCertificate") }
    } catch {
        return ("signingKey", error.message)
    }
    return nil
}

/// nil when a destination's `KeyStoreLocation` opens (with its password) and its
/// principal-propagation CA loads and can issue a certificate.
@Sendable func validateDestinationMaterial(_ destination: DestinationConfiguration) -> (key: String, message: String)? {
    if let identity = destination.clientIdentity, let problem = UpstreamDestination.problem(with: identity) {
        return ("KeyStoreLocation", problem)
    }
    if case .principalPropagation(let settings) = destination.authentication {
        do {
            let authority = try UserCertificateAuthority(settings)
            _ = try authority.issue(subject: [(.commonName, "check-config")])
        } catch {
            return ("caKey", error.message)
        }
        // The pattern with a plain value in every variable must make a certificate: a fixed
        // part that no certificate can carry (a non-ASCII EMAIL) is found here, not per call.
        do {
            let subject = try settings.subjectPattern.fill { _ in "sample" }
            _ = try UserCertificateAuthority(settings).issue(subject: subject)
        } catch let error as SubjectPatternError {
            return ("subjectPattern", error.message)
        } catch let error as UserCertificateError {
            return ("subjectPattern", "no certificate can have this subject: \(error.message)")
        } catch {
            return ("subjectPattern", "\(error)")
        }
    }
    return nil
}

/// Writes to standard error.
package func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
