import ArgumentParser
import ConfigurationFiles
import Foundation
import MidtierCore
import MidtierServer
import PrincipalPropagation

/// `midtier user-certificate`: the certificate a `PrincipalPropagation` destination would
/// present for a `users.json` user (docs/forwarding.md) — a sample for the back end's
/// certificate rules (`CERTRULE`). Prints the certificate (PEM), never its key.
struct UserCertificate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user-certificate",
        abstract: "Print the certificate a PrincipalPropagation destination would present for a user (PEM, without its key)."
    )

    @Option(help: "The PrincipalPropagation destination.")
    var destination: String

    @Option(help: "The users.json user id.")
    var user: String

    @Flag(help: "Print the SSL_CLIENT_CERT header value (base64 DER on one line) instead of PEM.")
    var header = false

    @Option(help: "The configuration directory.")
    var config = "config"

    func run() async throws {
        let configuration = try configurationOrExit(config)
        guard let found = configuration.destinations[destination] else {
            printError("midtier user-certificate: no destination named \(destination)")
            throw ExitCode.failure
        }
        guard case .principalPropagation(let settings) = found.authentication else {
            printError("midtier user-certificate: destination \(destination) does not use PrincipalPropagation")
            throw ExitCode.failure
        }
        // The user whose id has exactly these bytes (docs/identity.md).
        guard let account = configuration.users[user], account.id.utf8.elementsEqual(user.utf8) else {
            printError("midtier user-certificate: no user \(user) in users.json")
            throw ExitCode.failure
        }
        do {
            let subject = try settings.subjectPattern.fill(userID: account.id, attributes: account.attributes, userIdSource: found.userIdSource)
            let issued = try UserCertificateAuthority(settings).issue(subject: subject)
            print(header ? issued.headerValue : issued.pem, terminator: header ? "\n" : "")
        } catch let error as SubjectPatternError {
            printError("midtier user-certificate: user \(user): \(error.message)")
            throw ExitCode.failure
        } catch let error as UserCertificateError {
            printError("midtier user-certificate: \(error.message)")
            throw ExitCode.failure
        }
    }
}
