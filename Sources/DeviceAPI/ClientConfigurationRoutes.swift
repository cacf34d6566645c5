import Callers
import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP
import MidtierJSON

/// What an app's clients are told about it (docs/device-api.md, "Discovery and settings"):
/// - `GET /config/v1/{appId}` (no authentication): the discovery document the SAP SDKs read
///   to onboard — how to sign in, and where Midtier is;
/// - `GET /config-api.svc/ApplicationConfigurations/getApplicationConfiguration(AppConfigID='…',EmailAddress='…')`
///   (no authentication): the same document, where SAP's Discovery Service serves it;
/// - `GET /mobileservices/settingsExchange/v1/{appId}` (authenticated): the client policy.
struct ClientConfigurationRoutes: Sendable {
    let signIn: CurrentSignIn

    func add(to router: Router<MidtierRequestContext>) {
        router.get("/config/v1/{appId}") { _, context throws(Refusal) -> Response in
            let signIn = signIn.current
            let app = try Self.app(context, signIn)
            return .json(app.discoveryDocument(publicURL: signIn.configuration.server.publicURL))
        }
        router.get("/config-api.svc/ApplicationConfigurations/{call}") { _, context throws(Refusal) -> Response in
            let signIn = signIn.current
            let segment = context.parameters.get("call") ?? ""
            let call = try DiscoveryServiceCall.parse(segment.removingPercentEncoding ?? segment)
            guard let app = call.app(in: signIn.configuration.apps) else { throw .notFound("unknown application \(call.appConfigID)") }
            return .json(app.discoveryDocument(publicURL: signIn.configuration.server.publicURL))
        }
        router.get("/mobileservices/settingsExchange/v1/{appId}") { request, context throws(Refusal) -> Response in
            let signIn = signIn.current
            let app = try Self.app(context, signIn)
            _ = try await signIn.authenticate(request, app: app, client: context.clientIP)
            return .json(Self.settings(app))
        }
    }

    static func app(_ context: MidtierRequestContext, _ signIn: CallerSignIn) throws(Refusal) -> AppConfiguration {
        let id = context.parameters.get("appId") ?? ""
        guard let app = signIn.configuration.apps[id] else { throw .notFound("unknown application \(id)") }
        return app
    }

    /// The settings exchange's document (docs/configuration.md, "Client policy"), members sorted.
    static func settings(_ app: AppConfiguration) -> JSON {
        let policy = app.blockWipingPolicy
        let settingsExchange: JSON = [
            "blockWipingPolicy": [
                "blockDisconnectedPeriod": .number(policy.blockDisconnectedPeriod),
                "blockWipeEnabled": .bool(policy.blockWipeEnabled),
                "wipeDisconnectedPeriod": .number(policy.wipeDisconnectedPeriod),
            ],
            "featureVectorPolicies": .sortedObject(app.featureVectorPolicies.mapValues(\.settingsExchangeValue)),
            "logSettings": .sortedObject(app.logSettings.mapValues(\.settingsExchangeValue)),
            "passwordPolicy": .sortedObject(app.passwordPolicy.mapValues(\.settingsExchangeValue)),
            "usagePolicy": .sortedObject(app.usagePolicy.mapValues(\.settingsExchangeValue)),
        ]
        return ["mobileservices": ["settingsExchange": settingsExchange]]
    }
}

extension JSON {
    /// A client policy value as SAP Mobile Services sends it in the settings exchange:
    /// booleans and numbers as strings (`"true"`, `"8"`), which is what the SAP SDK's policy
    /// readers take (its passcode policy reader takes string values only); lists stay lists.
    /// docs/configuration.md, "Client policy".
    var settingsExchangeValue: JSON {
        switch self {
        case .bool(let value): .string(value ? "true" : "false")
        case .number(let text): .string(text)
        case .null, .string, .array, .object: self
        }
    }
}
