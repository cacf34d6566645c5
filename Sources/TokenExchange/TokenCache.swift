import Dispatch
package import MidtierCore
import Synchronization

/// The in-memory cache of back-end access tokens (docs/identity.md, "Back-end tokens"). Never
/// written to disk or logs.
///
/// - A token is used until `expires_in` minus a safety margin, and refreshed in the background
///   once it enters its last quarter of life, so callers rarely wait.
/// - At most one exchange per key is in flight; concurrent callers wait for that one. The
///   exchange runs in its own task, so a caller that goes away does not cancel it for others.
/// - A failed exchange caches nothing; every waiter sees the failure.
/// - `remove(user:)` drops a user's tokens (block, admin purge); `invalidate` drops one token
///   the back end rejected, unless a newer one has already replaced it.
/// - At most `capacity` keys: past that, expired entries and then the least recently used go.
package final class TokenCache: PerUserCache {
    /// Exchanges a token for a key. `forceNew` asks the service for a new token (`new_token=true`).
    package typealias Exchange = @Sendable (_ key: TokenCacheKey, _ forceNew: Bool) async throws -> AccessToken

    /// What happened on a lookup, for metrics.
    package enum Outcome: Sendable { case hit, miss, waitedForExchange }

    private struct Entry {
        var token: AccessToken?
        /// Monotonic nanoseconds after which `token` is no longer used.
        var usableUntil: UInt64 = 0
        /// Monotonic nanoseconds after which a background refresh starts.
        var refreshAfter: UInt64 = 0
        var exchange: Task<AccessToken, any Error>?
        /// Taken from the cache's epoch, which only grows: bumped on every stored token and on
        /// invalidation, and fresh for every new entry, so a late exchange result of an older
        /// round — even one started before the entry was removed and made again (block,
        /// purge, reload) — never matches and is never stored.
        var generation: UInt64
        var lastUsed: UInt64 = 0
    }

    private struct State {
        /// Written only through `set` and `delete`, which keep `keysOfUser` with it.
        private(set) var entries: [TokenCacheKey: Entry] = [:]
        /// Each user's keys in `entries`, so that a block drops a user's tokens without
        /// looking at everyone's (a look at all 200 000 took 11.5 ms under the lock every
        /// call takes; docs/benchmarks.md, "Several instances on PostgreSQL").
        private var keysOfUser: [UserIdentity: Set<TokenCacheKey>] = [:]
        /// The last generation handed out; never reset, not even by `removeAll`.
        var epoch: UInt64 = 0

        mutating func nextGeneration() -> UInt64 {
            epoch += 1
            return epoch
        }

        mutating func entry(for key: TokenCacheKey) -> Entry {
            if let entry = entries[key] { return entry }
            return Entry(generation: nextGeneration())
        }

        mutating func set(_ key: TokenCacheKey, _ entry: Entry) {
            if entries.updateValue(entry, forKey: key) == nil { keysOfUser[key.user, default: []].insert(key) }
        }

        mutating func delete(_ key: TokenCacheKey) {
            guard entries.removeValue(forKey: key) != nil else { return }
            keysOfUser[key.user]?.remove(key)
            if keysOfUser[key.user]?.isEmpty == true { keysOfUser[key.user] = nil }
        }

        /// Drops every entry of `user`; returns how many went.
        mutating func delete(user: UserIdentity) -> Int {
            guard let keys = keysOfUser.removeValue(forKey: user) else { return 0 }
            for key in keys { entries[key] = nil }
            return keys.count
        }

        mutating func deleteAll() {
            entries.removeAll()
            keysOfUser.removeAll()
        }
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let now: @Sendable () -> UInt64
    /// The other per-user credential caches (users' certificates), dropped with the tokens.
    private let companions: [any PerUserCache]

    /// - Parameters:
    ///   - capacity: the most keys kept.
    ///   - now: monotonic clock in nanoseconds (injectable for tests).
    ///   - companions: caches whose entries of a user go whenever that user's tokens go.
    package init(
        capacity: Int = 200_000, now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds },
        companions: [any PerUserCache] = []
    ) {
        self.capacity = max(1, capacity)
        self.now = now
        self.companions = companions
    }

    package var count: Int { state.withLock { $0.entries.count } }

    /// Exchanges started and not yet finished, for the tests' leak checks (`@testable`): 0 once
    /// every call has ended, unless a background refresh is running.
    var exchangesInFlight: Int { state.withLock { $0.entries.values.count { $0.exchange != nil } } }

    /// The current token for `key`, exchanging one when there is none usable.
    package func token(for key: TokenCacheKey, exchange: @escaping Exchange) async throws -> (AccessToken, Outcome) {
        let now = self.now()
        enum Step { case use(AccessToken), wait(Task<AccessToken, any Error>) }
        let (step, outcome): (Step, Outcome) = state.withLock { state in
            var entry = state.entry(for: key)
            entry.lastUsed = now
            defer { state.set(key, entry) }
            if let token = entry.token, now < entry.usableUntil {
                if now >= entry.refreshAfter, entry.exchange == nil {
                    entry.exchange = startExchange(key: key, forceNew: false, generation: entry.generation, exchange: exchange)
                }
                return (.use(token), .hit)
            }
            if let running = entry.exchange { return (.wait(running), .waitedForExchange) }
            let task = startExchange(key: key, forceNew: false, generation: entry.generation, exchange: exchange)
            entry.exchange = task
            return (.wait(task), .miss)
        }
        if state.withLock({ $0.entries.count }) > capacity { evict() }
        switch step {
        case .use(let token): return (token, outcome)
        case .wait(let task): return (try await task.value, outcome)
        }
    }

    /// After the back end rejected `token`: drop it (unless already replaced) and exchange a new
    /// one with `new_token=true`. Concurrent callers share that one exchange.
    package func renew(for key: TokenCacheKey, rejected token: AccessToken, exchange: @escaping Exchange) async throws -> AccessToken {
        enum Step { case use(AccessToken), wait(Task<AccessToken, any Error>) }
        let step: Step = state.withLock { state in
            var entry = state.entry(for: key)
            defer { state.set(key, entry) }
            if let current = entry.token, current != token, now() < entry.usableUntil {
                return .use(current)
            }
            if let running = entry.exchange { return .wait(running) }
            entry.token = nil
            entry.generation = state.nextGeneration()
            let task = startExchange(key: key, forceNew: true, generation: entry.generation, exchange: exchange)
            entry.exchange = task
            return .wait(task)
        }
        switch step {
        case .use(let token): return token
        case .wait(let task): return try await task.value
        }
    }

    /// Drops every token of `user` (all destinations), and any exchange result still to come;
    /// and the user's entries in the companion caches.
    @discardableResult
    package func remove(user: UserIdentity) -> Int {
        let removed = state.withLock { $0.delete(user: user) }
        return companions.reduce(removed) { $0 + $1.remove(user: user) }
    }

    /// Drops every token (configuration reload), and the companion caches' entries.
    package func removeAll() {
        state.withLock { $0.deleteAll() }
        for companion in companions { companion.removeAll() }
    }

    private func startExchange(key: TokenCacheKey, forceNew: Bool, generation: UInt64, exchange: @escaping Exchange) -> Task<AccessToken, any Error> {
        Task { [self] in
            do {
                let token = try await exchange(key, forceNew)
                store(token, for: key, generation: generation)
                return token
            } catch {
                clearExchange(for: key, generation: generation)
                throw error
            }
        }
    }

    private func store(_ token: AccessToken, for key: TokenCacheKey, generation: UInt64) {
        let now = self.now()
        let lifetime = UInt64(max(0, token.lifetimeSeconds)) * 1_000_000_000
        // Safety margin: a tenth of the lifetime, at most 60 s, so a token is not sent in its
        // last seconds and rejected in flight.
        let margin = min(lifetime / 10, 60 * 1_000_000_000)
        state.withLock { state in
            // The entry is gone when the user was blocked or purged meanwhile: keep it gone.
            guard var entry = state.entries[key], entry.generation == generation else { return }
            entry.token = token
            entry.usableUntil = now + lifetime - margin
            entry.refreshAfter = now + (lifetime - margin) * 3 / 4
            entry.exchange = nil
            entry.generation = state.nextGeneration()
            state.set(key, entry)
        }
    }

    private func clearExchange(for key: TokenCacheKey, generation: UInt64) {
        state.withLock { state in
            guard var entry = state.entries[key], entry.generation == generation else { return }
            entry.exchange = nil
            if entry.token == nil {
                state.delete(key)
            } else {
                state.set(key, entry)
            }
        }
    }

    /// Brings the cache back under capacity: expired entries first, then the least recently
    /// used tenth, so eviction work is amortized over many insertions.
    private func evict() {
        let now = self.now()
        state.withLock { state in
            guard state.entries.count > capacity else { return }
            for (key, entry) in state.entries where entry.exchange == nil && (entry.token == nil || now >= entry.usableUntil) {
                state.delete(key)
            }
            guard state.entries.count > capacity else { return }
            let excess = state.entries.count - capacity + capacity / 10
            let oldest = state.entries.filter { $0.value.exchange == nil }.sorted { $0.value.lastUsed < $1.value.lastUsed }.prefix(excess)
            for (key, _) in oldest { state.delete(key) }
        }
    }
}
