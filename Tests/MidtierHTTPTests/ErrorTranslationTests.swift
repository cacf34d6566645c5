import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import MidtierCore
import MidtierHTTP
import MidtierStore
import Testing

/// The one translation of errors on Midtier's own routes (docs/architecture.md): whatever a
/// route throws, the answer is an OData error body with the code its status has everywhere,
/// and nothing of a store's or an unexpected error's detail.
@Suite(.timeLimit(.minutes(10))) struct ErrorTranslationTests {
    struct Unexpected: Error, CustomStringConvertible { var description: String { "secret-detail-of-an-unexpected-error" } }

    static func application() -> some ApplicationProtocol {
        let router = Router(context: BasicRequestContext.self)
        router.middlewares.add(ODataErrorMiddleware(logger: Logger(label: "test")))
        router.get("/refused") { _, _ -> Response in throw Refusal.forbidden("not yours", messageCode: "TRAFFIC_REG_LOCKED") }
        router.get("/store") { _, _ -> Response in throw StoreError("PostgreSQL read failed: secret-detail-of-the-store") }
        router.get("/unexpected") { _, _ -> Response in throw Unexpected() }
        router.get("/http") { _, _ -> Response in throw HTTPError(.methodNotAllowed) }
        return Application(router: router)
    }

    static func error(_ body: ByteBuffer) -> (code: String?, message: String?) {
        let object = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any]
        let error = object?["error"] as? [String: Any]
        return (error?["code"] as? String, (error?["message"] as? [String: Any])?["value"] as? String)
    }

    @Test func everyErrorBecomesAnODataErrorBody() async throws {
        try await Self.application().test(.router) { client in
            try await client.execute(uri: "/refused", method: .get) { response in
                #expect(response.status == .forbidden)
                #expect(response.headers[HTTPField.Name("x-message-code")!] == "TRAFFIC_REG_LOCKED")
                #expect(Self.error(response.body).code == "TRAFFIC_REG_LOCKED")
            }
            try await client.execute(uri: "/store", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(Self.error(response.body).code == "SERVICE_UNAVAILABLE")
                #expect(!String(buffer: response.body).contains("secret-detail"), "the store's detail stays in the log")
            }
            try await client.execute(uri: "/unexpected", method: .get) { response in
                #expect(response.status == .internalServerError)
                #expect(Self.error(response.body).code == "INTERNAL_ERROR")
                #expect(!String(buffer: response.body).contains("secret-detail"))
            }
            try await client.execute(uri: "/http", method: .get) { response in
                #expect(response.status == .methodNotAllowed)
                #expect(Self.error(response.body).code == "METHOD_NOT_ALLOWED", "405 has one code everywhere")
            }
            try await client.execute(uri: "/nowhere", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(Self.error(response.body).code == "NOT_FOUND")
            }
        }
    }
}
