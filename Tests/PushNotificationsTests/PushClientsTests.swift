import Crypto
import Logging
import MidtierCore
import PushNotifications
import Testing

/// Each app's push clients (docs/push.md): one per app, told apart by the app id's bytes.
@Suite struct PushClientsTests {
    static func app(_ id: String, team: String) -> AppConfiguration {
        var app = AppConfiguration(id: id)
        app.push.apns = APNsSettings(
            teamID: team, keyID: "KEY1234567", privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation, topic: "com.example.app",
            environment: .sandbox)
        return app
    }

    /// `café` written two ways are two apps with two APNs keys, each with its own client made
    /// once. Keyed by `String` (which compares them equal), each app's call replaced the other's
    /// client: a new client, and a new provider token, for every delivery — which Apple
    /// refuses (`TooManyProviderTokenUpdates`).
    @Test func appIdsDifferingOnlyInUnicodeFormGetTheirOwnClients() async throws {
        let clients = PushClients(logger: Logger(label: "test"))
        let composed = Self.app("caf\u{E9}", team: "TEAMAAAAAA")
        let decomposed = Self.app("cafe\u{301}", team: "TEAMBBBBBB")
        #expect(composed.id == decomposed.id, "Swift's String == says they are the same")
        let first = await clients.apnsClient(for: composed)
        let second = await clients.apnsClient(for: decomposed)
        let again = await clients.apnsClient(for: composed)
        #expect(first != nil && second != nil)
        #expect(first !== second, "each app its own client")
        #expect(first === again, "an app's client is made once")
        await clients.shutdown()
    }
}
