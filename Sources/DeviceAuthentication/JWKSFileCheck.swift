/// What `midtier check-config` says of a JWKS file (docs/configuration.md, "JWT
/// authentication"): nil when it holds at least one key a token can be checked with, else what
/// is wrong — the same judgement the server makes when it loads the file, where such a file
/// refuses every token of the app.
package enum JWKSFileCheck {
    package static func problem(in bytes: [UInt8]) -> String? {
        do {
            let (usable, skipped) = try JWKSKeySet.candidates(in: bytes)
            guard usable.isEmpty else { return nil }
            return "no usable RS256 or ES256 signing key" + (skipped.isEmpty ? "" : " (\(skipped.joined(separator: "; ")))")
        } catch {
            return error.description
        }
    }
}
