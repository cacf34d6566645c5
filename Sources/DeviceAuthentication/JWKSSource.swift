import AsyncHTTPClient
import Dispatch
import Foundation
import MidtierCore
import NIOCore
import NIOHTTP1
import Synchronization

/// How loud a JWKS event is; ``JWTAuthenticator``'s owner maps it onto its logger.
package enum JWKSLogLevel: Sendable {
    case info, warning, error
}

/// Where an app's verification keys come from, and when they are read again
/// (docs/configuration.md, "JWT authentication").
///
/// - A file is read once, when the runtime is built (configuration load or reload). A file that
///   does not load is logged then, and every token of the app is refused until it is fixed.
/// - A URL is fetched on first use and kept; it is fetched again when the keys are older than
///   `refreshSeconds` (5 minutes), and when a token names a `kid` the set does not have — but
///   such unknown-`kid` fetches happen at most once per `unknownKidIntervalSeconds` (30 s), so
///   tokens with made-up `kid`s cannot turn Midtier into a JWKS-fetching amplifier. A failed
///   fetch is not retried sooner than that either; keys fetched earlier stay in use meanwhile.
///   Concurrent callers share one fetch.
final class JWKSSource: Sendable {
    enum Origin: Sendable {
        /// A file's bytes as read when the runtime was built, or why it could not be read.
        case file(path: String, bytes: Result<[UInt8], JWKSProblem>)
        case url(String)
    }

    private struct State {
        var current: JWKSKeySet?
        /// Uptime (ns) of the load that produced `current`.
        var loadedAt: UInt64?
        /// Uptime (ns) of the last load attempt, successful or not.
        var attemptedAt: UInt64?
        /// Uptime (ns) of the last fetch caused by an unknown `kid`.
        var unknownKidFetchAt: UInt64?
        var inFlight: Task<JWKSKeySet?, Never>?
        var loads = 0
    }

    let origin: Origin
    private let httpClient: HTTPClient?
    private let refreshNanoseconds: UInt64
    private let unknownKidNanoseconds: UInt64
    private let uptime: @Sendable () -> UInt64
    private let log: @Sendable (JWKSLogLevel, String) -> Void
    private let state = Mutex(State())

    static let maximumDocumentBytes = 1 << 20
    static let fetchTimeoutSeconds: Int64 = 10

    init(
        origin: Origin, httpClient: HTTPClient?, refreshSeconds: Int = 300, unknownKidIntervalSeconds: Int = 30,
        uptime: @escaping @Sendable () -> UInt64, log: @escaping @Sendable (JWKSLogLevel, String) -> Void
    ) {
        self.origin = origin
        self.httpClient = httpClient
        self.refreshNanoseconds = UInt64(max(0, refreshSeconds)) * 1_000_000_000
        self.unknownKidNanoseconds = UInt64(max(0, unknownKidIntervalSeconds)) * 1_000_000_000
        self.uptime = uptime
        self.log = log
        if case .file(let path, let bytes) = origin {
            // Report a broken file now, at configuration load, not at the first device.
            switch bytes {
            case .failure(let problem):
                log(.error, "jwks file \(path): \(problem.description); tokens of this app are refused until it is fixed")
            case .success(let bytes):
                do {
                    let (usable, skipped) = try JWKSKeySet.candidates(in: bytes)
                    if usable.isEmpty {
                        log(
                            .error,
                            "jwks file \(path): no usable RS256 or ES256 signing key (\(skipped.joined(separator: "; "))); tokens of this app are refused until it is fixed"
                        )
                    } else if !skipped.isEmpty {
                        log(.warning, "jwks file \(path): keys left out: \(skipped.joined(separator: "; "))")
                    }
                } catch {
                    log(.error, "jwks file \(path): \(error.description); tokens of this app are refused until it is fixed")
                }
            }
        }
    }

    /// How many times the keys were loaded (fetched, for a URL), successfully or not.
    var loads: Int { state.withLock { $0.loads } }

    /// The keys to verify with: the current set, loaded or refreshed first when needed.
    /// nil when no keys are available.
    func keys() async -> JWKSKeySet? {
        await obtain(unknownKid: false)
    }

    /// The keys after a token named a `kid` the current set lacks: fetched again (URL only) if
    /// no unknown-`kid` fetch happened within the last 30 s, else the current set.
    func keysAfterUnknownKid() async -> JWKSKeySet? {
        await obtain(unknownKid: true)
    }

    private enum Step {
        case ready(JWKSKeySet?)
        case wait(Task<JWKSKeySet?, Never>)
    }

    private func obtain(unknownKid: Bool) async -> JWKSKeySet? {
        let now = uptime()
        let isURL: Bool
        if case .url = origin { isURL = true } else { isURL = false }
        let step: Step = state.withLock { state in
            if let running = state.inFlight { return .wait(running) }
            let hasFresh = state.current != nil && state.loadedAt.map { Self.elapsed(now, since: $0) < refreshNanoseconds } == true
            if !isURL {
                // A file is loaded once; it changes only with a reload, which builds a new source.
                if state.attemptedAt != nil { return .ready(state.current) }
            } else if unknownKid && state.current != nil {
                if let last = state.unknownKidFetchAt, Self.elapsed(now, since: last) < unknownKidNanoseconds {
                    return .ready(state.current)
                }
                state.unknownKidFetchAt = now
            } else {
                if hasFresh { return .ready(state.current) }
                if let attempted = state.attemptedAt, Self.elapsed(now, since: attempted) < unknownKidNanoseconds {
                    // The last attempt failed (or is stale) only moments ago: do not hammer the IdP.
                    return .ready(state.current)
                }
            }
            state.attemptedAt = now
            state.loads += 1
            let task = Task { [self] in await load() }
            state.inFlight = task
            return .wait(task)
        }
        switch step {
        case .ready(let keys): return keys
        case .wait(let task): return await task.value
        }
    }

    private func load() async -> JWKSKeySet? {
        let result: Result<JWKSKeySet, JWKSProblem>
        let what: String
        switch origin {
        case .file(let path, let bytes):
            what = "jwks file \(path)"
            switch bytes {
            case .success(let bytes):
                do { result = .success(try await JWKSKeySet.parse(bytes)) } catch { result = .failure(error) }
            case .failure(let problem):
                result = .failure(problem)
            }
        case .url(let url):
            what = "jwks url \(Self.redacted(url))"
            result = await fetch(url)
        }
        let loadedAt = uptime()
        let (keys, hadKeys): (JWKSKeySet?, Bool) = state.withLock { state in
            state.inFlight = nil
            let hadKeys = state.current != nil
            if case .success(let keys) = result {
                state.current = keys
                state.loadedAt = loadedAt
            }
            return (state.current, hadKeys)
        }
        switch result {
        case .success(let loaded):
            let kids = loaded.keys.map { $0.kid ?? "(no kid)" }.joined(separator: ", ")
            let skipped = loaded.skipped.isEmpty ? "" : "; left out: " + loaded.skipped.joined(separator: "; ")
            log(.info, "\(what): loaded \(loaded.keys.count) key(s): \(kids)\(skipped)")
        case .failure(let problem):
            let keeping = hadKeys ? "keeping the keys loaded before" : "no keys: tokens of this app are refused"
            log(.error, "\(what): \(problem.description); \(keeping)")
        }
        return keys
    }

    private func fetch(_ url: String) async -> Result<JWKSKeySet, JWKSProblem> {
        guard let httpClient else { return .failure(JWKSProblem("no HTTP client to fetch it with")) }
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/jwk-set+json, application/json")
        let bytes: [UInt8]
        do {
            let response = try await httpClient.execute(request, timeout: .seconds(Self.fetchTimeoutSeconds))
            guard response.status == .ok else {
                return .failure(JWKSProblem("the identity provider answered HTTP \(response.status.code)"))
            }
            let buffer = try await response.body.collect(upTo: Self.maximumDocumentBytes)
            bytes = Array(buffer.readableBytesView)
        } catch let error as NIOTooManyBytesError {
            _ = error
            return .failure(JWKSProblem("the JWKS is larger than \(Self.maximumDocumentBytes) bytes"))
        } catch {
            return .failure(JWKSProblem("cannot be fetched: \(error)"))
        }
        do {
            return .success(try await JWKSKeySet.parse(bytes))
        } catch {
            return .failure(error)
        }
    }

    /// `url` without its query and fragment, for logs (a query may carry a key).
    static func redacted(_ url: String) -> String {
        String(url.prefix { $0 != "?" && $0 != "#" })
    }

    static func elapsed(_ now: UInt64, since earlier: UInt64) -> UInt64 {
        now >= earlier ? now - earlier : 0
    }
}
