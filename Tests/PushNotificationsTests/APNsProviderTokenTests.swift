import Crypto
import Foundation
import Synchronization
import Testing

@testable import PushNotifications

/// The APNs provider token (docs/push.md, "Tokens of the push services"): Apple refuses one
/// issued more than an hour ago and one renewed more often than every 20 minutes, so one token
/// serves every request for 50 minutes, is made once however many requests ask for it at the
/// same moment, and is made anew once when APNs calls it expired — however many answers say so.
/// Each token is checked as APNs checks it: ES256 over the header and claims with the key's
/// public half, `kid`, `iss` and a whole-second `iat`.
@Suite(.timeLimit(.minutes(1))) struct APNsProviderTokenTests {
    static let key = P256.Signing.PrivateKey()
    static let team = "TEAM123456"
    static let keyID = "KEY1234567"
    /// A wall-clock moment for the tokens' `iat`.
    static let issued = Date(timeIntervalSince1970: 1_800_000_000)

    func provider() async throws -> APNsProviderToken {
        try await APNsProviderToken(privateKeyPEM: Self.key.pemRepresentation, teamID: Self.team, keyID: Self.keyID)
    }

    /// The token's header and claims, after its signature was verified with the public key.
    func verified(_ token: String) throws -> (header: [String: Any], claims: [String: Any]) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        func decoded(_ part: String) throws -> Data {
            var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            text += String(repeating: "=", count: (4 - text.count % 4) % 4)
            return try #require(Data(base64Encoded: text))
        }
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try decoded(parts[2]))
        #expect(Self.key.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
        let header = try #require(try JSONSerialization.jsonObject(with: try decoded(parts[0])) as? [String: Any])
        let claims = try #require(try JSONSerialization.jsonObject(with: try decoded(parts[1])) as? [String: Any])
        return (header, claims)
    }

    @Test func oneTokenServesFiftyMinutesThenANewOneIsMade() async throws {
        let provider = try await provider()
        let start = ContinuousClock.now
        let first = try await provider.value(at: start, issuedAt: Self.issued)
        let (header, claims) = try verified(first)
        #expect(header["alg"] as? String == "ES256" && header["kid"] as? String == Self.keyID)
        #expect(claims["iss"] as? String == Self.team && claims["iat"] as? Int == 1_800_000_000)
        let later = try await provider.value(at: start + .seconds(50 * 60 - 1), issuedAt: Self.issued + 50 * 60 - 1)
        #expect(later == first)
        // Still well within Apple's hour, and not sooner than its 20 minutes.
        let renewed = try await provider.value(at: start + .seconds(50 * 60), issuedAt: Self.issued + 50 * 60)
        #expect(renewed != first)
        #expect(try verified(renewed).claims["iat"] as? Int == 1_800_000_000 + 50 * 60)
    }

    @Test func theIssueTimeIsWholeSeconds() async throws {
        let provider = try await provider()
        let token = try await provider.value(at: .now, issuedAt: Self.issued + 0.75)
        #expect(try verified(token).claims["iat"] as? Int == 1_800_000_000)
    }

    /// A burst of requests (the worker sends up to 64 at once per route) when there is no token
    /// yet, or when the one in use has had its 50 minutes, makes one token, not one each.
    @Test func manyRequestsAtOnceGetOneToken() async throws {
        let provider = try await provider()
        let start = ContinuousClock.now
        for at in [start, start + .seconds(50 * 60)] {
            let together = Latch(40)
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<40 {
                    group.addTask {
                        await together.arrive()
                        return try await provider.value(at: at, issuedAt: Self.issued + (at - start).seconds)
                    }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(tokens.count == 1)
        }
    }

    /// Many requests in flight with a token APNs now calls expired: one new token for all of
    /// them, and an answer about the old token arriving after the new one is made keeps it.
    @Test func expiredAnswersRenewTheTokenOnce() async throws {
        let provider = try await provider()
        let start = ContinuousClock.now
        let old = try await provider.value(at: start, issuedAt: Self.issued)
        let together = Latch(40)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    await together.arrive()
                    await provider.expired(old)
                    return try await provider.value(at: start + .seconds(1), issuedAt: Self.issued + 1)
                }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1 && !tokens.contains(old))
        let new = try #require(tokens.first)
        await provider.expired(old)
        #expect(try await provider.value(at: start + .seconds(2), issuedAt: Self.issued + 2) == new)
    }
}

extension Duration {
    /// Whole seconds, as a `TimeInterval`.
    fileprivate var seconds: TimeInterval { TimeInterval(components.seconds) }
}

/// Lets `parties` tasks go on together: each waits in `arrive()` until the last has arrived
/// (so that they ask for a token at the same moment, not one after another as they start).
final class Latch: Sendable {
    private let parties: Int
    private let state = Mutex<(arrived: Int, waiting: [CheckedContinuation<Void, Never>])>((0, []))

    init(_ parties: Int) {
        self.parties = parties
    }

    func arrive() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let released = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.arrived += 1
                state.waiting.append(continuation)
                guard state.arrived == parties else { return [] }
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiting in released { waiting.resume() }
        }
    }
}
