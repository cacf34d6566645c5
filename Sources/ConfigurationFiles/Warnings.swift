package import MidtierCore

/// Something in a configuration that loads but probably does not do what its owner wants:
/// printed by `midtier check-config` and logged by `midtier serve`, never a reason to refuse
/// (docs/configuration.md).
package struct ConfigWarning: Sendable, Equatable, CustomStringConvertible {
    package var file: String
    package var key: String
    package var message: String

    /// `file: key: warning: what`, as `check-config` prints it.
    package var description: String { "\(file): \(key): warning: \(message)" }
}

extension ConfigurationLoader {
    /// The warnings for a configuration this loader loaded.
    package func warnings(for configuration: MidtierConfiguration) -> [ConfigWarning] {
        var warnings: [ConfigWarning] = []
        // A PostgreSQL store is there to be shared by several instances; without keys the
        // back end's sessions (SAP Gateway's CSRF session among them) stay in each instance.
        if case .postgres = configuration.server.store, configuration.server.backendSessionKeys.isEmpty {
            warnings.append(
                ConfigWarning(
                    file: joinPath(directory, "midtier.json"), key: "backendSessionKeys",
                    message: "not set while the store is PostgreSQL: back-end sessions (SAP Gateway's CSRF session among them) "
                        + "stay in each instance's memory, so behind a load balancer without sticky sessions a CSRF token "
                        + "fetched through one instance is refused (403) on a write through another; set backendSessionKeys "
                        + "on every instance (docs/configuration.md#backendsessionkeys). One instance alone is not affected"))
        }
        // A sender allowed an app without push gets every send to it refused.
        for (index, sender) in configuration.pushSenders.enumerated() {
            for (appIndex, app) in sender.apps.enumerated() where configuration.apps[app]?.push.isEnabled == false {
                warnings.append(
                    ConfigWarning(
                        file: joinPath(directory, "push-senders.json"), key: "senders[\(index)].apps[\(appIndex)]",
                        message: "app \"\(app)\" has no push section (apns or fcm), so sender \"\(sender.name)\"'s "
                            + "notifications to it are refused (docs/configuration.md#push)"))
            }
        }
        // A sender's tokens and a JWT app's from one issuer and audience are not told apart:
        // a device user's token whose client claim names the sender's client would send as
        // it, and the sender's tokens would sign in to the app (found by the outside attack
        // of issue 36).
        for (index, sender) in configuration.pushSenders.enumerated() {
            guard let oauth = sender.oauth else { continue }
            for (id, app) in configuration.apps.sorted(by: { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }) {
                guard case .jwt(let jwt) = app.authentication, UserIdentity.sameBytes(jwt.issuer, oauth.token.issuer),
                    UserIdentity.sameBytes(jwt.audience, oauth.token.audience)
                else { continue }
                warnings.append(
                    ConfigWarning(
                        file: joinPath(directory, "push-senders.json"), key: "senders[\(index)].oauth.audience",
                        message: "is also app \"\(id)\"'s audience at the same issuer: the identity provider's tokens for the "
                            + "app's users and for sender \"\(sender.name)\" cannot be told apart; give the sender's client an "
                            + "audience of its own (docs/push.md, \"Sending\")"))
            }
        }
        return warnings
    }
}
