import ArgumentParser
import DeviceAuthentication
import Foundation
import MidtierCore
import SAMLSigning
import TokenExchange

/// Measurements for `Benchmarks/run.sh` that need the inside of the process. Hidden from help.
struct BenchInternal: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-internal",
        abstract: "Measurements used by Benchmarks/run.sh.",
        shouldDisplay: false,
        subcommands: [Assertions.self, TokenCacheMemory.self, MakeUsers.self]
    )

    /// Assertions built and signed per second on one core (one task, sequentially).
    struct Assertions: AsyncParsableCommand {
        @Option var key: String
        @Option var certificate: String
        @Option var seconds: Double = 5

        func run() async throws {
            guard let keyPEM = FileManager.default.contents(atPath: key), let certificatePEM = FileManager.default.contents(atPath: certificate) else {
                throw ValidationError("cannot read \(key) or \(certificate)")
            }
            let signer = try AssertionSigner(keyPEM: Array(keyPEM), passphrase: nil, certificatePEM: Array(certificatePEM))
            let clock = ContinuousClock()
            let start = clock.now
            var count = 0
            while clock.now - start < .seconds(seconds) {
                let assertion = SAMLAssertion(issueInstant: Date(), issuer: "bench-key", nameID: "user\(count)",
                                              recipient: "https://api.example.com/oauth/token", apiKey: "bench-key")
                _ = try signer.sign(assertion)
                count += 1
            }
            let elapsed = clock.now - start
            let perSecond = Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            print(String(format: "%.1f", perSecond))
        }
    }

    /// Resident memory (KiB) before and after caching `tokens` users' tokens.
    struct TokenCacheMemory: AsyncParsableCommand {
        @Option var tokens: Int = 100_000
        @Option(name: .customLong("token-length")) var tokenLength: Int = 256

        func run() async throws {
            let before = residentKiB()
            let cache = TokenCache(capacity: tokens + 1)
            let filler = String(repeating: "x", count: max(0, tokenLength - 12))
            for index in 0..<tokens {
                let value = String(format: "%012d", index) + filler
                _ = try await cache.token(for: TokenCacheKey(destination: "sf", user: .local("user-\(index)"), nameID: "user-\(index)")) { _, _ in
                    AccessToken(value: value, lifetimeSeconds: 3600)
                }
            }
            let after = residentKiB()
            print("\(before) \(after) \(cache.count)")
        }
    }

    /// A users.json with `count` users (bcrypt at `cost`, for load tests only).
    struct MakeUsers: AsyncParsableCommand {
        @Option var count: Int = 1000
        @Option var cost: UInt8 = 4
        @Option var password: String = "bench-password"

        func run() async throws {
            let hash = SecretHashing.hash(password, cost: cost)
            let users = (0..<count).map { index in
                ["id": "user\(index)", "passwordHash": hash, "attributes": ["sfUserId": "\(100001 + index % 3)"]] as [String: Any]
            }
            let data = try JSONSerialization.data(withJSONObject: ["users": users], options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        }
    }
}

/// VmRSS of this process in KiB.
func residentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}
