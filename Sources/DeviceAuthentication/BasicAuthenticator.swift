import COpenSSL
import Dispatch
import Foundation
import HummingbirdBcrypt
import MidtierConfiguration
import NIOPosix
import Synchronization

/// A user whose credentials were verified.
public struct AuthenticatedUser: Sendable, Equatable {
    public let id: String
    /// From `users.json` (basic) or the token's claims (jwt); `userIdSource` reads these.
    public let attributes: [String: String]

    public init(id: String, attributes: [String: String] = [:]) {
        self.id = id
        self.attributes = attributes
    }
}

/// Why a device was not authenticated. The messages are safe for a 401 body.
public enum AuthenticationFailure: Error, Sendable, Equatable, CustomStringConvertible {
    case missingCredentials
    case malformedCredentials(String)
    case invalidCredentials

    public var description: String {
        switch self {
        case .missingCredentials: "no credentials were sent"
        case .malformedCredentials(let detail): "the Authorization header is malformed: \(detail)"
        case .invalidCredentials: "the user name or password is wrong"
        }
    }
}

/// HTTP Basic authentication against `users.json` (SPEC §3).
///
/// bcrypt is slow on purpose, so a verified credential is remembered for `cacheSeconds`,
/// keyed by an HMAC of user and password under a key that exists only in this process's
/// memory: the password itself is never kept. Concurrent first requests with the same
/// credential share one bcrypt verification. bcrypt runs on NIO's blocking thread pool, never
/// on an event loop. Failures are not remembered.
public final class BasicAuthenticator: Sendable {
    private struct CachedCredential {
        let user: AuthenticatedUser
        let expiresAt: UInt64
    }

    private struct State {
        var verified: [CredentialDigest: CachedCredential] = [:]
        var inFlight: [CredentialDigest: Task<AuthenticatedUser?, Never>] = [:]
    }

    private let users: [String: LocalUser]
    private let cacheNanoseconds: UInt64
    private let capacity: Int
    private let digester = KeyedDigester()
    private let state = Mutex(State())
    private let now: @Sendable () -> UInt64

    /// A bcrypt hash of a random string, verified against for unknown users so that the answer
    /// takes as long as for a known user with a wrong password.
    private static let decoyHash = Bcrypt.hash(UUID().uuidString, cost: 10)

    public init(users: [String: LocalUser], cacheSeconds: Int, capacity: Int = 100_000,
                now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.users = users
        self.cacheNanoseconds = UInt64(max(0, cacheSeconds)) * 1_000_000_000
        self.capacity = capacity
        self.now = now
    }

    /// Verifies an `Authorization: Basic …` header value.
    public func authenticate(authorization: String?) async -> Result<AuthenticatedUser, AuthenticationFailure> {
        guard let authorization, !authorization.isEmpty else { return .failure(.missingCredentials) }
        let (user, password): (String, String)
        switch Self.decodeBasic(authorization) {
        case .success(let credentials): (user, password) = credentials
        case .failure(let failure): return .failure(failure)
        }
        let digest = credentialDigest(user: user, password: password)
        let now = self.now()
        enum Step { case remembered(AuthenticatedUser), wait(Task<AuthenticatedUser?, Never>) }
        let step: Step = state.withLock { state in
            if let cached = state.verified[digest], now < cached.expiresAt, cached.user.id == user {
                return .remembered(cached.user)
            }
            if let running = state.inFlight[digest] { return .wait(running) }
            let task = Task { [self] in await verify(user: user, password: password, digest: digest) }
            state.inFlight[digest] = task
            return .wait(task)
        }
        switch step {
        case .remembered(let user):
            return .success(user)
        case .wait(let task):
            guard let verified = await task.value else { return .failure(.invalidCredentials) }
            return .success(verified)
        }
    }

    private func verify(user: String, password: String, digest: CredentialDigest) async -> AuthenticatedUser? {
        let account = users[user]
        let hash = account?.passwordHash ?? Self.decoyHash
        let matches = (try? await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }) ?? false
        let verified = (matches && account != nil) ? AuthenticatedUser(id: user, attributes: account!.attributes) : nil
        let expiresAt = now() + cacheNanoseconds
        state.withLock { state in
            state.inFlight[digest] = nil
            guard let verified, cacheNanoseconds > 0 else { return }
            if state.verified.count >= capacity {
                let now = self.now()
                state.verified = state.verified.filter { now < $0.value.expiresAt }
                if state.verified.count >= capacity { state.verified.removeAll() }
            }
            state.verified[digest] = CachedCredential(user: verified, expiresAt: expiresAt)
        }
        return verified
    }

    /// `Basic base64(user:password)` → (user, password).
    static func decodeBasic(_ header: String) -> Result<(String, String), AuthenticationFailure> {
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic" else {
            return .failure(.malformedCredentials("expected the Basic scheme"))
        }
        guard parts[1].utf8.count <= 4096, let data = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces)),
              let decoded = String(data: data, encoding: .utf8) else {
            return .failure(.malformedCredentials("the credentials are not base64 of UTF-8 text"))
        }
        guard let colon = decoded.firstIndex(of: ":") else {
            return .failure(.malformedCredentials("the credentials have no ':' between user and password"))
        }
        let user = String(decoded[..<colon])
        guard !user.isEmpty else { return .failure(.malformedCredentials("the user name is empty")) }
        return .success((user, String(decoded[decoded.index(after: colon)...])))
    }

    private func credentialDigest(user: String, password: String) -> CredentialDigest {
        digester.digest([user, password])
    }
}

/// HMAC-SHA256 under a random key that exists only in this process's memory: a cache key for
/// a secret that reveals nothing about it, even to someone reading the process's memory
/// dump without the key.
public struct KeyedDigester: Sendable {
    private let key: [UInt8]

    public init() {
        var key = [UInt8](repeating: 0, count: 32)
        precondition(key.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, 32) } == 1, "no entropy for a digest key")
        self.key = key
    }

    /// HMAC over the length-prefixed fields, so that no two field lists share an input.
    public func digest(_ fields: [String]) -> CredentialDigest {
        var message: [UInt8] = []
        for field in fields {
            let bytes = Array(field.utf8)
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { message.append(contentsOf: $0) }
            message.append(contentsOf: bytes)
        }
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = key.withUnsafeBufferPointer { key in
            message.withUnsafeBufferPointer { data in
                output.withUnsafeMutableBufferPointer { out in
                    HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), data.baseAddress, data.count, out.baseAddress, &length)
                }
            }
        }
        return CredentialDigest(output)
    }
}

/// 32 bytes of HMAC output as four words: cheap to hash and compare.
public struct CredentialDigest: Hashable, Sendable {
    let a: UInt64, b: UInt64, c: UInt64, d: UInt64
    init(_ bytes: [UInt8]) {
        func word(_ offset: Int) -> UInt64 { bytes[offset..<offset + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        a = word(0); b = word(8); c = word(16); d = word(24)
    }
}

/// Makes the bcrypt hashes the configuration files take (`midtier hash-secret`).
public enum SecretHashing {
    public static func hash(_ secret: String, cost: UInt8 = 12) -> String { Bcrypt.hash(secret, cost: cost) }
    public static func verify(_ secret: String, hash: String) -> Bool { Bcrypt.verify(secret, hash: hash) }
}
