import DeviceAuthentication
import Foundation
import MidtierCore

/// `jwt`: an `Authorization` header value with a bearer token, read as a JWT app's sign-in
/// reads it: the claimed issuer before anything is verified (which authenticator to ask), then
/// the whole verification (shape, header, key choice, signature, claims) by a JWTAuthenticator
/// whose JWKS is a file with the test key (FuzzKeys.jwks; no network). The input is the token;
/// a first line `Bearer …`/`bearer …` is taken as the whole header value instead.
enum JWTTarget {
    static let authenticator: JWTAuthenticator = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("midtier-fuzz-jwks-\(getpid()).json").path
        _ = FileManager.default.createFile(atPath: path, contents: Data(FuzzKeys.jwks.utf8))
        let settings = JWTAuthentication(issuer: "https://idp.fuzz.example", audience: "midtier-fuzz", jwks: .file(path: path))
        // No token cache: every input is verified (cacheSeconds 0), at a fixed time.
        let authenticator = JWTAuthenticator(
            settings: settings, httpClient: nil, cacheSeconds: 0, capacity: 16,
            now: { 1_800_000_000 })
        try? FileManager.default.removeItem(atPath: path)
        return authenticator
    }()

    static func run(_ bytes: [UInt8]) async {
        let text = String(decoding: bytes, as: UTF8.self)
        let header = text.lowercased().hasPrefix("bearer") ? text : "Bearer " + text
        _ = JWTAuthenticator.claimedIssuer(authorization: header)
        _ = await authenticator.authenticate(authorization: header)
    }
}
