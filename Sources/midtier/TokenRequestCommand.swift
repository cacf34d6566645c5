import ArgumentParser
import AsyncHTTPClient
import Foundation
import MidtierCore
import MidtierServer
import TokenExchange

/// `midtier token-request`: the token request an `OAuth2*` destination sends
/// (docs/forwarding.md), with every secret and the user's token replaced by a name.
struct TokenRequest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token-request",
        abstract: "Print the token request an OAuth2 destination sends (secrets and the user's token shown as names)."
    )

    @Option(help: "The OAuth2ClientCredentials, OAuth2JWTBearer, OAuth2UserTokenExchange or OAuth2TokenExchange destination.")
    var destination: String

    @Option(help: "The configuration directory.")
    var config = "config"

    func run() async throws {
        let configuration = try configurationOrExit(config)
        guard let found = configuration.destinations[destination] else {
            printError("midtier token-request: no destination named \(destination)")
            throw ExitCode.failure
        }
        guard case .oauth2(let settings) = found.authentication else {
            printError("midtier token-request: destination \(destination) is not an OAuth2 destination")
            throw ExitCode.failure
        }
        let placeholder = "<the user's identity-provider token>"
        let exchange = OAuth2Exchange(settings: settings, httpClient: HTTPClient.shared, timeoutMilliseconds: found.timeoutMilliseconds)
        let (form, basic) = exchange.request(userToken: settings.grant == .clientCredentials ? nil : placeholder)
        print("POST \(settings.tokenServiceURL)")
        print("Content-Type: application/x-www-form-urlencoded")
        if let basic {
            let password = basic.password == settings.clientSecret ? "<clientSecret>" : "<tokenServicePassword>"
            print("Authorization: Basic base64(\(basic.user):\(password))")
        }
        print("")
        for (name, value) in form {
            let shown = name == "client_secret" ? "<clientSecret>" : value
            print("\(name)=\(shown)")
        }
    }
}
