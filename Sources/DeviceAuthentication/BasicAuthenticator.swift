import COpenSSL
import Dispatch
import Foundation
import HummingbirdBcrypt
package import MidtierCore
import NIOPosix
import RequestTracing
import Synchronization

/// A user whose credentials were verified.
package struct AuthenticatedUser: Sendable, Equatable {
    /// Realm and id (docs/identity.md): for `users.json`, the id exactly as configured.
    package let identity: UserIdentity
    /// From `users.json` (basic) or the token's claims (jwt); `userIdSource` reads these.
    package let attributes: [String: String]
    /// When the credential stops being valid (a token's `exp`, seconds since 1970); nil for a
    /// password.
    package let expiresAt: Double?

    package init(identity: UserIdentity, attributes: [String: String] = [:], expiresAt: Double? = nil) {
        self.identity = identity
        self.attributes = attributes
        self.expiresAt = expiresAt
    }

    /// The id within the realm.
    package var id: String { identity.id }
}

/// Why a device was not authenticated. The messages are safe for a 401 body.
package enum AuthenticationFailure: Error, Sendable, Equatable, CustomStringConvertible {
    case missingCredentials
    case malformedCredentials(String)
    case invalidCredentials
    /// Too many failed sign-ins from this address or for this user name (429).
    case throttled(retryAfterSeconds: Int)
    /// Every place in the verification queue is taken (503).
    case busy(retryAfterSeconds: Int)
    /// The back end that checks a `backend` app's sign-ins could not answer (503).
    case checkerUnavailable

    package var description: String {
        switch self {
        case .missingCredentials: "no credentials were sent"
        case .malformedCredentials(let detail): "the Authorization header is malformed: \(detail)"
        case .invalidCredentials: "the user name or password is wrong"
        case .throttled(let seconds): "too many failed sign-ins; try again in \(seconds) s"
        case .busy(let seconds): "too many sign-ins are being checked; try again in \(seconds) s"
        case .checkerUnavailable: "the back end that checks sign-ins could not be asked; try again later"
        }
    }
}

/// HTTP Basic authentication against `users.json` (docs/identity.md).
///
/// User names are matched by their exact UTF-8 bytes, and the user returned carries the id as
/// configured. Credentials with control characters (NUL among them: bcrypt would stop reading
/// there) are refused, and so are passwords longer than bcrypt's 72 bytes (`hash-secret` never
/// made a hash of one, so only a truncated prefix could match).
///
/// bcrypt is slow on purpose, so a verified credential is remembered for `cacheSeconds`,
/// keyed by an HMAC of user and password under a key that exists only in this process's
/// memory: the password itself is never kept. Concurrent first requests with the same
/// credential share one bcrypt verification. bcrypt runs on NIO's blocking thread pool, never
/// on an event loop, behind a bounded queue with a budget of checks per second for all
/// clients together (``VerificationLimiter``) and the failed sign-in throttle (``SignInThrottle``);
/// neither touches a credential that is already remembered. A `Basic` header that verified is
/// remembered by its exact bytes too (its HMAC, under the same key), until the credential it
/// carries expires, so that a device's next calls skip decoding it.
/// Failures are not remembered.
package final class BasicAuthenticator: Sendable {
    private struct CachedCredential {
        let user: AuthenticatedUser
        let expiresAt: UInt64
    }

    private enum Verification: Sendable {
        case verified(AuthenticatedUser, expiresAt: UInt64)
        case wrong
        case busy
        case throttled(Int)
        case unavailable
    }

    /// What a back end said to a `backend` app's credentials.
    package enum RemoteOutcome: Sendable, Equatable {
        case accepted
        case refused
        /// It could not be asked or answered something else than yes or no (the reason is
        /// for the log; it never carries the password).
        case unavailable(String)
    }

    /// Asks a back end whether a user name and password are right.
    package typealias RemoteCheck = @Sendable (_ user: String, _ password: String) async -> RemoteOutcome

    /// A `backend` app's checker: its realm, how its user names are compared, and the check.
    package struct Remote: Sendable {
        package let realm: String
        /// SAP ABAP logon names ignore letter case and are kept upper-case: `alice` and `ALICE`
        /// are one user, and one Midtier identity. Only ASCII letters are folded, and a name
        /// with any other than printable ASCII is refused: SAP's logon names are ASCII, and
        /// Unicode's folding would make other names one (`straße` and `STRASSE`).
        package let upperCaseUserNames: Bool
        package let check: RemoteCheck
        package init(realm: String, upperCaseUserNames: Bool = true, check: @escaping RemoteCheck) {
            self.realm = realm
            self.upperCaseUserNames = upperCaseUserNames
            self.check = check
        }
    }

    private struct State {
        var verified: [CredentialDigest: CachedCredential] = [:]
        /// Verified `Authorization` values, by the HMAC of their exact bytes.
        var verifiedHeaders: [CredentialDigest: CachedCredential] = [:]
        var inFlight: [CredentialDigest: Task<Verification, Never>] = [:]
    }

    /// bcrypt reads at most this many bytes of a password.
    package static let maximumPasswordBytes = 72

    private let users: [ExactString: LocalUser]
    /// For a `backend` app: the back end checks, not `users`.
    private let remote: Remote?
    let decoyCost: Int
    private let cacheNanoseconds: UInt64
    private let capacity: Int
    private let digester = KeyedDigester()
    private let state = Mutex(State())
    private let now: @Sendable () -> UInt64
    private let throttle: SignInThrottle
    private let limiter: VerificationLimiter

    package init(
        users: [String: LocalUser], cacheSeconds: Int, capacity: Int = 100_000,
        throttle: SignInThrottle = SignInThrottle(), limiter: VerificationLimiter = VerificationLimiter(),
        now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        var exact: [ExactString: LocalUser] = [:]
        for user in users.values { exact[ExactString(user.id)] = user }
        self.users = exact
        self.remote = nil
        self.decoyCost = users.values.compactMap { Decoy.cost(of: $0.passwordHash) }.max() ?? Decoy.defaultCost
        self.cacheNanoseconds = UInt64(max(0, cacheSeconds)) * 1_000_000_000
        self.capacity = capacity
        self.throttle = throttle
        self.limiter = limiter
        self.now = now
    }

    /// A `backend` app's authenticator: the same memory of verified credentials, throttle and
    /// single check per credential, with the back end answering instead of bcrypt.
    package init(
        remote: Remote, cacheSeconds: Int, capacity: Int = 100_000, throttle: SignInThrottle = SignInThrottle(),
        now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        self.users = [:]
        self.remote = remote
        self.decoyCost = Decoy.defaultCost
        self.cacheNanoseconds = UInt64(max(0, cacheSeconds)) * 1_000_000_000
        self.capacity = capacity
        self.throttle = throttle
        self.limiter = VerificationLimiter()
        self.now = now
    }

    /// The configured user with exactly this id (by bytes), if any.
    package func user(exactly id: String) -> LocalUser? { users[ExactString(id)] }

    /// Verifies an `Authorization: Basic …` header value from `client` (an address, for the
    /// failed sign-in throttle).
    package func authenticate(authorization: String?, client: String? = nil) async -> Result<AuthenticatedUser, AuthenticationFailure> {
        guard let authorization, !authorization.isEmpty else { return .failure(.missingCredentials) }
        let header = cacheNanoseconds > 0 ? digester.digest([Self.headerField, authorization]) : nil
        if let header {
            let now = self.now()
            if let cached = state.withLock({ $0.verifiedHeaders[header] }), now < cached.expiresAt {
                RequestTrace.currentSpan.set("midtier.credential", "remembered")
                return .success(cached.user)
            }
        }
        switch Self.decodeBasic(authorization) {
        case .success(let (user, password)):
            let (result, expiresAt) = await authenticate(user: user, password: password, client: client)
            if let header, let expiresAt, case .success(let user) = result {
                state.withLock { state in
                    Self.remember(
                        CachedCredential(user: user, expiresAt: expiresAt), under: header, in: &state.verifiedHeaders,
                        capacity: capacity, now: now())
                }
            }
            return result
        case .failure(let failure):
            return .failure(failure)
        }
    }

    /// The first field of a header's digest (a user's digest has the user name there).
    private static let headerField = "Authorization"

    /// Verifies a user name and password given some other way than a Basic header (the
    /// self-service page's form), with the same rules: control characters refused, the
    /// throttle and the queue in front of bcrypt, verified credentials remembered.
    package func authenticate(user: String, password: String, client: String?) async -> Result<AuthenticatedUser, AuthenticationFailure> {
        await authenticate(user: user, password: password, client: client).result
    }

    /// ``authenticate(user:password:client:)`` and, for a success, until when the verified
    /// credential is remembered (nil: not remembered).
    private func authenticate(
        user: String, password: String,
        client: String?
    ) async -> (result: Result<AuthenticatedUser, AuthenticationFailure>, expiresAt: UInt64?) {
        guard !user.isEmpty else { return (.failure(.malformedCredentials("the user name is empty")), nil) }
        // The one check of stored text (docs/identity.md, "Stored text"): C0, DEL and C1.
        guard !StoredText.hasControlCharacters(user), !StoredText.hasControlCharacters(password) else {
            return (.failure(.malformedCredentials("the user name or password contains control characters")), nil)
        }
        if remote?.upperCaseUserNames == true, !user.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            return (.failure(.malformedCredentials("the back end's user names are printable ASCII without spaces")), nil)
        }
        let digest = credentialDigest(user: user, password: password)
        let expectedID = Self.throttleName(user, remote: remote)
        let now = self.now()
        enum Step { case remembered(CachedCredential), wait(Task<Verification, Never>), refuse(AuthenticationFailure) }
        let step: Step = state.withLock { state in
            if let cached = state.verified[digest], now < cached.expiresAt, cached.user.id.utf8.elementsEqual(expectedID.utf8) {
                return .remembered(cached)
            }
            if let running = state.inFlight[digest] { return .wait(running) }
            // Throttled per user as the realm names them: every spelling of a SAP user is one.
            if let seconds = throttle.retryAfter(address: client, user: expectedID) { return .refuse(.throttled(retryAfterSeconds: seconds)) }
            let task = Task { [self] in await verify(user: user, password: password, digest: digest, client: client) }
            state.inFlight[digest] = task
            return .wait(task)
        }
        // The trace says which answered: memory, or bcrypt (docs/operations.md, "Traces").
        RequestTrace.currentSpan.set("midtier.credential", { if case .remembered = step { "remembered" } else { "verified" } }())
        switch step {
        case .remembered(let cached):
            return (.success(cached.user), cached.expiresAt)
        case .refuse(let failure):
            return (.failure(failure), nil)
        case .wait(let task):
            switch await task.value {
            case .verified(let user, let expiresAt): return (.success(user), cacheNanoseconds > 0 ? expiresAt : nil)
            case .wrong: return (.failure(.invalidCredentials), nil)
            case .busy: return (.failure(.busy(retryAfterSeconds: 1)), nil)
            case .throttled(let seconds): return (.failure(.throttled(retryAfterSeconds: seconds)), nil)
            case .unavailable: return (.failure(.checkerUnavailable), nil)
            }
        }
    }

    /// The name failures are counted under: the user as the realm names them.
    private static func throttleName(_ user: String, remote: Remote?) -> String {
        remote?.upperCaseUserNames == true ? asciiUppercased(user) : user
    }

    /// `user` with ASCII letters upper-cased, nothing else changed.
    static func asciiUppercased(_ user: String) -> String {
        String(decoding: user.utf8.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }, as: UTF8.self)
    }

    /// A `backend` app's check: the back end answers; the user is the name as the realm keeps
    /// it (upper-case for SAP).
    private func verifyRemotely(_ remote: Remote, user: String, password: String, client: String?) async -> Verification {
        let expiresAt = now() + cacheNanoseconds
        if let seconds = throttle.retryAfter(address: client, user: Self.throttleName(user, remote: remote)) { return .throttled(seconds) }
        switch await remote.check(user, password) {
        case .accepted:
            let id = Self.throttleName(user, remote: remote)
            return .verified(AuthenticatedUser(identity: UserIdentity(realm: remote.realm, id: id)), expiresAt: expiresAt)
        case .refused:
            return .wrong
        case .unavailable:
            return .unavailable
        }
    }

    private func verify(user: String, password: String, digest: CredentialDigest, client: String?) async -> Verification {
        let expiresAt = now() + cacheNanoseconds
        let account = users[ExactString(user)]
        let outcome: Verification
        if let remote {
            outcome = await verifyRemotely(remote, user: user, password: password, client: client)
        } else if password.utf8.count > Self.maximumPasswordBytes {
            outcome = .wrong
        } else {
            let hash = account?.passwordHash
            let decoyCost = self.decoyCost
            let throttle = self.throttle
            // Charged at the highest configured cost, known name or not (the answer must not tell).
            let attempt = await limiter.run(cost: decoyCost) { () async -> VerificationLimiter.Attempt in
                // Checked again once admitted: a sign-in that waited while its address or
                // name closed costs no bcrypt.
                if let seconds = throttle.retryAfter(address: client, user: user) { return .throttled(seconds) }
                return .matched(
                    (try? await NIOThreadPool.singleton.runIfActive {
                        Bcrypt.verify(password, hash: hash ?? Decoy.hash(cost: decoyCost))
                    }) ?? false)
            }
            switch (attempt, account) {
            case (nil, _): outcome = .busy
            case (.throttled(let seconds)?, _): outcome = .throttled(seconds)
            case (.matched(true)?, let account?):
                outcome = .verified(AuthenticatedUser(identity: .local(account.id), attributes: account.attributes), expiresAt: expiresAt)
            default: outcome = .wrong
            }
        }
        switch outcome {
        case .verified: throttle.recordSuccess(address: client, user: Self.throttleName(user, remote: remote))
        case .wrong: throttle.recordFailure(address: client, user: Self.throttleName(user, remote: remote))
        case .busy, .throttled, .unavailable: break
        }
        state.withLock { state in
            state.inFlight[digest] = nil
            guard case .verified(let verified, let expiresAt) = outcome, cacheNanoseconds > 0 else { return }
            Self.remember(CachedCredential(user: verified, expiresAt: expiresAt), under: digest, in: &state.verified, capacity: capacity, now: now())
        }
        return outcome
    }

    /// Keeps `credential`; when `capacity` is reached, the expired ones go first, then all.
    private static func remember(
        _ credential: CachedCredential, under digest: CredentialDigest,
        in remembered: inout [CredentialDigest: CachedCredential], capacity: Int, now: UInt64
    ) {
        if remembered[digest] == nil, remembered.count >= capacity {
            remembered = remembered.filter { now < $0.value.expiresAt }
            if remembered.count >= capacity { remembered.removeAll() }
        }
        remembered[digest] = credential
    }

    /// `Basic base64(user:password)` → (user, password).
    static func decodeBasic(_ header: String) -> Result<(String, String), AuthenticationFailure> {
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic" else {
            return .failure(.malformedCredentials("expected the Basic scheme"))
        }
        let isSpace: (UInt8?) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        let encoded =
            isSpace(parts[1].utf8.first) || isSpace(parts[1].utf8.last)
            ? String(parts[1]).trimmingCharacters(in: .whitespaces) : String(parts[1])
        guard parts[1].utf8.count <= 4096, let data = Data(base64Encoded: encoded),
            let decoded = String(data: data, encoding: .utf8)
        else {
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

/// The hash verified against for an unknown user, so that the answer takes as long as for a
/// known user with a wrong password: of the same cost as the configured hashes.
enum Decoy {
    static let defaultCost = 12
    private static let hashes = Mutex<[Int: String]>([:])

    /// The cost of a `$2b$12$…` hash.
    static func cost(of hash: String) -> Int? {
        let parts = hash.split(separator: "$", omittingEmptySubsequences: true)
        guard parts.count >= 2, let cost = Int(parts[1]), (4...31).contains(cost) else { return nil }
        return cost
    }

    /// A hash of a random string at `cost`, made once per cost (on the blocking pool).
    static func hash(cost: Int) -> String {
        if let known = hashes.withLock({ $0[cost] }) { return known }
        let made = Bcrypt.hash(UUID().uuidString, cost: UInt8(cost))
        return hashes.withLock { hashes in
            if let known = hashes[cost] { return known }
            hashes[cost] = made
            return made
        }
    }
}

/// HMAC-SHA256 under a random key that exists only in this process's memory: a cache key for
/// a secret that reveals nothing about it, even to someone reading the process's memory
/// dump without the key.
///
/// Keyed contexts are kept for reuse: each digest takes one (or makes one), starts it again
/// under the same key (`EVP_MAC_init` without a key), and puts it back. The one-shot `HMAC()`
/// looked the algorithm up by name and allocated its contexts on every call, about 3 % of a
/// proxied call's CPU (docs/benchmarks.md).
package final class KeyedDigester: Sendable {
    /// Keyed `EVP_MAC_CTX`s not in use (each used by one caller at a time).
    private let spare = Mutex<[UnsafeSendableContext]>([])
    private let key: [UInt8]

    /// An `EVP_MAC_CTX` handed between threads through `spare`, never used by two at once.
    private struct UnsafeSendableContext: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    package convenience init() {
        var key = [UInt8](repeating: 0, count: 32)
        precondition(key.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, 32) } == 1, "no entropy for a digest key")
        self.init(key: key)
    }

    /// A digester under a given key (tests; everything else uses a random key).
    package init(key: [UInt8]) {
        self.key = key
        spare.withLock { $0.reserveCapacity(16) }
    }

    deinit {
        spare.withLock { contexts in
            for context in contexts { EVP_MAC_CTX_free(context.pointer) }
        }
    }

    /// HMAC over the length-prefixed fields, so that no two field lists share an input. The
    /// fields go into the MAC one after the other and the output stays on the stack: no copy of
    /// a credential is made on the way.
    package func digest(_ fields: [String]) -> CredentialDigest {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { output in
            let done = withContext { context in
                guard EVP_MAC_init(context, nil, 0, nil) == 1 else { return false }
                for field in fields {
                    var length = UInt32(field.utf8.count).bigEndian
                    guard withUnsafeBytes(of: &length, { EVP_MAC_update(context, $0.baseAddress, 4) }) == 1 else { return false }
                    var field = field
                    guard field.isEmpty || field.withUTF8({ EVP_MAC_update(context, $0.baseAddress, $0.count) }) == 1 else { return false }
                }
                var written = 0
                return EVP_MAC_final(context, output.baseAddress, &written, output.count) == 1 && written == 32
            }
            if !done {
                var message: [UInt8] = []
                for field in fields {
                    withUnsafeBytes(of: UInt32(field.utf8.count).bigEndian) { message.append(contentsOf: $0) }
                    message.append(contentsOf: field.utf8)
                }
                _ = output.initialize(from: oneShot(message))
            }
            return CredentialDigest(UnsafeBufferPointer(output))
        }
    }

    /// HMAC-SHA256 of `message` under this digester's key.
    package func mac(_ message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        let done = withContext { context in
            var length = 0
            return message.withUnsafeBufferPointer { data in
                output.withUnsafeMutableBufferPointer { out in
                    EVP_MAC_init(context, nil, 0, nil) == 1 && EVP_MAC_update(context, data.baseAddress, data.count) == 1
                        && EVP_MAC_final(context, out.baseAddress, &length, out.count) == 1 && length == 32
                }
            }
        }
        return done ? output : oneShot(message)
    }

    /// Runs `body` with a keyed context taken from the spares (or made), and puts it back
    /// after a success; false when OpenSSL could not make or use one.
    private func withContext(_ body: (OpaquePointer) -> Bool) -> Bool {
        guard
            let context = spare.withLock({ $0.popLast() })
                ?? key.withUnsafeBufferPointer({ key in midtier_hmac_sha256_new(key.baseAddress, key.count).map(UnsafeSendableContext.init) })
        else { return false }
        let done = body(context.pointer)
        let kept =
            done
            && spare.withLock { spare in
                guard spare.count < 64 else { return false }
                spare.append(context)
                return true
            }
        if !kept { EVP_MAC_CTX_free(context.pointer) }
        return done
    }

    /// OpenSSL could not make or use a context: the one-shot call.
    private func oneShot(_ message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = key.withUnsafeBufferPointer { key in
            message.withUnsafeBufferPointer { data in
                output.withUnsafeMutableBufferPointer { out in
                    HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), data.baseAddress, data.count, out.baseAddress, &length)
                }
            }
        }
        return output
    }
}

/// 32 bytes of HMAC output as four words: cheap to hash and compare.
package struct CredentialDigest: Hashable, Sendable {
    let a: UInt64, b: UInt64, c: UInt64, d: UInt64
    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        func word(_ offset: Int) -> UInt64 { bytes[offset..<offset + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        a = word(0); b = word(8); c = word(16); d = word(24)
    }
}

/// Makes the bcrypt hashes the configuration files take (`midtier hash-secret`).
package enum SecretHashing {
    /// Why a secret cannot be hashed.
    package enum Problem: Error, CustomStringConvertible {
        case tooLong(bytes: Int)
        case controlCharacters
        case empty
        package var description: String {
            switch self {
            case .tooLong(let bytes):
                "the secret is \(bytes) bytes long; bcrypt reads at most \(BasicAuthenticator.maximumPasswordBytes) bytes, so choose one of at most \(BasicAuthenticator.maximumPasswordBytes) bytes"
            case .controlCharacters: "the secret contains control characters (such as NUL or a tab), which sign-ins refuse"
            case .empty: "the secret is empty"
            }
        }
    }

    /// Checks that `secret` can be hashed without losing any of it, and that a sign-in could
    /// send it.
    package static func check(_ secret: String) throws(Problem) {
        guard !secret.isEmpty else { throw .empty }
        guard secret.utf8.count <= BasicAuthenticator.maximumPasswordBytes else { throw .tooLong(bytes: secret.utf8.count) }
        guard !secret.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { throw .controlCharacters }
    }

    package static func hash(_ secret: String, cost: UInt8 = 12) -> String { Bcrypt.hash(secret, cost: cost) }
    package static func verify(_ secret: String, hash: String) -> Bool { Bcrypt.verify(secret, hash: hash) }
}
