package import AsyncHTTPClient
package import Logging
package import MidtierCore
import NIOCore
import NIOSSL

/// The APNs and FCM clients of each app, made when first needed and made anew when the app's
/// push settings change (a reload). A client is made once however many deliveries ask for it
/// at the same moment: each client has its own provider or access token, and a burst that made
/// one client each would send as many tokens (Apple refuses tokens renewed that often). HTTP
/// clients are shared: one that trusts the system's roots, and one more for each `caFile`.
package actor PushClients {
    /// Each app's client, or the task making it (nil when its key does not load). Keyed and
    /// compared by exact bytes, as the configuration tells apps and files apart: two app ids
    /// that differ only in their Unicode form never share a client, nor its credentials.
    private var apns: [ExactString: (fingerprint: ExactString, client: Task<APNsClient?, Never>)] = [:]
    private var fcm: [ExactString: (fingerprint: ExactString, client: Task<FCMClient?, Never>)] = [:]
    private var httpClients: [ExactString: HTTPClient] = [:]
    private let logger: Logger

    package init(logger: Logger) {
        self.logger = logger
    }

    /// The APNs client of `app`; nil when it has no APNs settings or its key does not load (said
    /// once in the log, and tried again when the settings change).
    package func apnsClient(for app: AppConfiguration) async -> APNsClient? {
        guard let settings = app.push.apns else { return nil }
        let fingerprint = ExactString(
            [settings.teamID, settings.keyID, settings.privateKeyPEM, settings.topic, settings.endpoint, settings.caFile ?? ""]
                .joined(separator: "\u{0}"))
        if let known = apns[ExactString(app.id)], known.fingerprint == fingerprint { return await known.client.value }
        let (httpClient, logger, app) = (httpClient(caFile: settings.caFile), logger, app.id)
        let making = Task { () -> APNsClient? in
            do {
                return try await APNsClient(settings: settings, httpClient: httpClient)
            } catch {
                logger.error("the app's APNs key does not load; its notifications fail", metadata: ["app": "\(app)"])
                return nil
            }
        }
        apns[ExactString(app)] = (fingerprint, making)
        return await making.value
    }

    /// The FCM client of `app`; nil when it has no FCM settings or its key does not load (said
    /// once in the log, and tried again when the settings change).
    package func fcmClient(for app: AppConfiguration) async -> FCMClient? {
        guard let settings = app.push.fcm else { return nil }
        let fingerprint = ExactString(
            [
                settings.projectID, settings.clientEmail, settings.privateKeyPEM, settings.tokenURI, settings.endpoint, settings.caFile ?? "",
            ]
            .joined(separator: "\u{0}"))
        if let known = fcm[ExactString(app.id)], known.fingerprint == fingerprint { return await known.client.value }
        let (httpClient, logger, app) = (httpClient(caFile: settings.caFile), logger, app.id)
        let making = Task { () -> FCMClient? in
            do {
                return try await FCMClient(settings: settings, httpClient: httpClient)
            } catch {
                logger.error("the app's FCM service account key does not load; its notifications fail", metadata: ["app": "\(app)"])
                return nil
            }
        }
        fcm[ExactString(app)] = (fingerprint, making)
        return await making.value
    }

    private func httpClient(caFile: String?) -> HTTPClient {
        let key = ExactString(caFile ?? "")
        if let client = httpClients[key] { return client }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.additionalTrustRoots = [.file(caFile)] }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(10))
        configuration.tracing.tracer = nil
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        httpClients[key] = client
        return client
    }

    /// Shuts the HTTP clients down (at the server's end).
    package func shutdown() async {
        let clients = Array(httpClients.values)
        httpClients = [:]
        apns = [:]
        fcm = [:]
        for client in clients { try? await client.shutdown() }
    }
}
