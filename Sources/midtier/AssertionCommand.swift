import ArgumentParser
import AsyncHTTPClient
import ConfigurationFiles
import DeviceAuthentication
import Foundation
import MidtierCore
import MidtierServer
import SAMLSigning
import TokenExchange

struct Assertion: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the signed assertion Midtier would send for a user, or verify one."
    )

    @Option(help: "The OAuth2SAMLBearerAssertion destination.")
    var destination: String

    @Option(help: "The Midtier user id (mapped through the destination's userIdSource).")
    var user: String

    @Option(help: "Verify this assertion (XML, or base64 of it) instead of printing a new one.")
    var verify: String?

    @Option(help: "The configuration directory.")
    var config = "config"

    func run() async throws {
        let configuration = try configurationOrExit(config)
        guard let destinationConfiguration = configuration.destinations[destination] else {
            printError("midtier assertion: no destination named \(destination)")
            throw ExitCode.failure
        }
        guard case .samlBearer(let settings) = destinationConfiguration.authentication else {
            printError("midtier assertion: destination \(destination) does not use OAuth2SAMLBearerAssertion")
            throw ExitCode.failure
        }
        let nameID: String
        let attributes = configuration.users[user].map { $0.id.utf8.elementsEqual(user.utf8) ? $0.attributes : [:] } ?? [:]
        if let source = destinationConfiguration.userIdSource {
            // The user whose id has exactly these bytes (docs/identity.md).
            guard let account = configuration.users[user], account.id.utf8.elementsEqual(user.utf8),
                let value = account.attributes[source]
            else {
                printError("midtier assertion: user \(user) has no attribute \(source) in users.json")
                throw ExitCode.failure
            }
            nameID = value
        } else {
            nameID = user
        }

        if let verify {
            try verifyAssertion(file: verify, settings: settings, nameID: nameID)
            return
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let assertion: Result<String, SigningError>
        do {
            let exchange = try SAMLBearerExchange(
                settings: settings, httpClient: client, timeoutMilliseconds: destinationConfiguration.timeoutMilliseconds)
            assertion = .success(try exchange.signedAssertion(nameID: nameID, attributes: attributes))
        } catch {
            assertion = .failure(error)
        }
        try? await client.shutdown()
        switch assertion {
        case .success(let xml):
            print(xml)
        case .failure(let error):
            printError("midtier assertion: \(error.message)")
            throw ExitCode.failure
        }
    }

    private func verifyAssertion(file: String, settings: SAMLBearerSettings, nameID: String) throws {
        guard let contents = FileManager.default.contents(atPath: file) else {
            printError("midtier assertion: cannot read \(file)")
            throw ExitCode.failure
        }
        var xml = Array(contents)
        let text = String(decoding: contents, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if !text.hasPrefix("<"),
            let decoded = Data(
                base64Encoded: text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/").padding(
                    toLength: (text.count + 3) / 4 * 4, withPad: "=", startingAt: 0))
        {
            xml = Array(decoded)
        }
        do throws(SigningError) {
            let verifier = AssertionVerifier(trustedCertificate: try SigningCertificate(pem: settings.signingCertificatePEM))
            let claims = try verifier.verify(xml)
            try AssertionExpectations(
                clientID: settings.clientKey, audience: settings.audience, recipient: settings.assertionRecipient,
                issuer: settings.assertionIssuer, expectsAPIKey: settings.companyId != nil
            )
            .check(claims, now: Date())
            guard claims.nameID == nameID else { throw SigningError(.invalidSignature, "the assertion names \(claims.nameID), not \(nameID)") }
            print(
                "OK: signature verifies with the registered certificate; NameID \(claims.nameID); valid until \(claims.notOnOrAfter.map { "\($0)" } ?? "?")"
            )
        } catch {
            print("INVALID: \(error.message)")
            throw ExitCode.failure
        }
    }
}

struct HashSecret: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash-secret",
        abstract:
            "Read a password or admin token on standard input; print the bcrypt hash the config files take (with --api-key: a push sender's apiKeyHash)."
    )

    @Option(help: "bcrypt cost (work factor), 10 to 15.")
    var cost: UInt8 = 12

    @Flag(help: "The secret is a push sender's API key: print its apiKeyHash (sha256:…) for push-senders.json.")
    var apiKey = false

    func validate() throws {
        guard (10...15).contains(cost) else { throw ValidationError("--cost must be between 10 and 15") }
    }

    func run() async throws {
        guard var secret = readLine(strippingNewline: true) else {
            printError("midtier hash-secret: nothing on standard input")
            throw ExitCode.failure
        }
        if secret.hasSuffix("\r") { secret.removeLast() }
        if apiKey {
            do {
                try APIKeys.check(secret)
            } catch {
                printError("midtier hash-secret: \(error)")
                throw ExitCode.failure
            }
            print(APIKeys.hashText(secret))
            return
        }
        do {
            try SecretHashing.check(secret)
        } catch {
            printError("midtier hash-secret: \(error)")
            throw ExitCode.failure
        }
        print(SecretHashing.hash(secret, cost: cost))
    }
}
