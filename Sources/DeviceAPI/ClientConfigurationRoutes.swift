import DeviceProxy
import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP

/// What an app's clients are told about it (docs/device-api.md, "Discovery and settings"):
/// - `GET /config/v1/{appId}` (no authentication): the discovery document the SAP SDKs read
///   to onboard — how to sign in, and where Midtier is;
/// - `GET /config-api.svc/ApplicationConfigurations/getApplicationConfiguration(AppConfigID='…',EmailAddress='…')`
///   (no authentication): the same document, where SAP's Discovery Service serves it;
/// - `GET /mobileservices/settingsExchange/v1/{appId}` (authenticated): the client policy.
struct ClientConfigurationRoutes: Sendable {
    let runtime: RuntimeHolder

    func add(to router: Router<MidtierRequestContext>) {
        router.get("/config/v1/{appId}") { _, context throws(Refusal) -> Response in
            let runtime = runtime.current
            let app = try Self.app(context, runtime)
            return Self.json(app.discoveryDocument(publicURL: runtime.configuration.server.publicURL))
        }
        router.get("/config-api.svc/ApplicationConfigurations/{call}") { _, context throws(Refusal) -> Response in
            let runtime = runtime.current
            let segment = context.parameters.get("call") ?? ""
            let call = try DiscoveryServiceCall.parse(segment.removingPercentEncoding ?? segment)
            guard let app = call.app(in: runtime.configuration.apps) else { throw .notFound("unknown application \(call.appConfigID)") }
            return Self.json(app.discoveryDocument(publicURL: runtime.configuration.server.publicURL))
        }
        router.get("/mobileservices/settingsExchange/v1/{appId}") { request, context throws(Refusal) -> Response in
            let runtime = runtime.current
            let app = try Self.app(context, runtime)
            _ = try await runtime.authenticate(request, app: app, client: context.clientIP)
            return Self.json(Self.settings(app))
        }
    }

    static func app(_ context: MidtierRequestContext, _ runtime: Runtime) throws(Refusal) -> AppConfiguration {
        let id = context.parameters.get("appId") ?? ""
        guard let app = runtime.configuration.apps[id] else { throw .notFound("unknown application \(id)") }
        return app
    }

    static func settings(_ app: AppConfiguration) -> [String: Any] {
        let policy = app.blockWipingPolicy
        return ["mobileservices": ["settingsExchange": [
            "passwordPolicy": app.passwordPolicy.mapValues(\.settingsExchangeValue),
            "blockWipingPolicy": ["blockWipeEnabled": policy.blockWipeEnabled,
                                  "blockDisconnectedPeriod": policy.blockDisconnectedPeriod,
                                  "wipeDisconnectedPeriod": policy.wipeDisconnectedPeriod],
            "logSettings": app.logSettings.mapValues(\.settingsExchangeValue),
            "usagePolicy": app.usagePolicy.mapValues(\.settingsExchangeValue),
            "featureVectorPolicies": app.featureVectorPolicies.mapValues(\.settingsExchangeValue),
        ]]]
    }

    /// `object` as JSON; a single value (a string, `null`: one setting of the Storage service) too.
    static func json(_ object: Any, status: HTTPResponse.Status = .ok) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])) ?? Data("{}".utf8)
        var headers = HTTPFields()
        headers[.contentType] = "application/json;charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension JSONValue {
    /// A client policy value as SAP Mobile Services sends it in the settings exchange:
    /// booleans and numbers as strings (`"true"`, `"8"`), which is what the SAP SDK's policy
    /// readers take (its passcode policy reader takes string values only); lists stay lists.
    /// docs/configuration.md, "Client policy".
    var settingsExchangeValue: Any {
        switch self {
        case .bool(let value): value ? "true" : "false"
        case .number: "\(foundationValue)"
        case .null, .string, .array, .object: foundationValue
        }
    }
}
