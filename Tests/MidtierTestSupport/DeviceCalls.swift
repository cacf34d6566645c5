import Foundation
package import MidtierCore
package import NIOHTTP1

extension TestEnvironment {
    /// `body` with a Midtier on a fresh store of `kind` (SQLite, or a throwaway PostgreSQL
    /// database); `adjust` may change the configuration first.
    package static func withMidtier(
        _ kind: StoreKind, adjust: @escaping @Sendable (inout MidtierConfiguration) -> Void = { _ in },
        _ body: (TestEnvironment) async throws -> Void
    ) async throws {
        try await withTestStore(kind) { test in
            try await TestEnvironment.with(
                adjust: { configuration, _, _ in
                    if let postgres = test.postgres { configuration.server.store = .postgres(postgres) }
                    adjust(&configuration)
                }, body)
        }
    }
}

/// The device calls the server tests make (docs/device-api.md), shared by the test targets of
/// the modules they reach.
package enum DeviceCalls {
    /// The registration service's Connections of the demo app.
    package static let connections = "/odata/applications/v1/demo/Connections"

    /// Onboards a device of `user` with `body` (JSON) on the demo app.
    package static func onboard(_ env: TestEnvironment, _ user: TestUser, body: String) async throws -> TestEnvironment.Reply {
        try await env.call(.POST, connections, headers: [("Authorization", user.basic), ("Content-Type", "application/json")], body: body)
    }

    /// The OData error's `code` of an answer.
    package static func errorCode(_ reply: TestEnvironment.Reply) -> String? { (reply.json["error"] as? [String: Any])?["code"] as? String }

    /// The sandbox's payroll query for alice's SuccessFactors user, through destination `sf`.
    package static let seedQuery =
        "/sf/odata/v2/EmployeePayrollRunResults?%24filter=userId%20eq%20%27100001%27"
        + "&%24expand=employeePayrollRunResultsItems,userIdNav/empInfo/paymentInformationNav/toPaymentInformationDetailV3/bankNav"
        + "&%24top=5&%24orderby=payDate%20desc"

    /// The `d.results` of an OData v2 JSON answer.
    package static func results(_ reply: TestEnvironment.Reply) -> [[String: Any]] {
        ((reply.json["d"] as? [String: Any])?["results"] as? [[String: Any]]) ?? []
    }

    /// The challenge of a jwt app's refusal.
    package static let bearerChallenge = #"Bearer realm="midtier""#

    /// An app `idp` whose users sign in with the test identity provider's tokens.
    package static func idpApp(_ jwks: JWTAuthentication.KeySource, userClaim: String = "sub") -> AppConfiguration {
        AppConfiguration(
            id: "idp",
            authentication: .jwt(
                JWTAuthentication(
                    issuer: TestTokens.issuer, audience: TestTokens.audience,
                    jwks: jwks, userClaim: userClaim)),
            destinations: ["sf", "echo"])
    }

    /// Onboards a device on app `idp` with a bearer token.
    package static func register(_ env: TestEnvironment, token: String) async throws -> TestEnvironment.Reply {
        try await env.call(
            .POST, "/odata/applications/v1/idp/Connections",
            headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
            body: #"{"DeviceType":"iOS","DeviceModel":"iPhone15,2"}"#)
    }
}
