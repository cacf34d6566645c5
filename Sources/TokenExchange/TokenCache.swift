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
/// - At most `capacity` keys, give or take the exchanges in flight: a new key in a full cache
///   lets go of an expired token or one not used lately, a bounded look each time (a CLOCK
///   cache, ``PerUserClockCache``), never of an entry whose exchange callers wait for.
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
    }

    private struct State {
        /// The entries, with each user's keys (a block drops a user's tokens without looking at
        /// everyone's); full, an insertion lets go of an entry not used lately, never of one
        /// whose exchange callers wait for.
        var entries: PerUserClockCache<TokenCacheKey, Entry>
        /// The last generation handed out; never reset, not even by `removeAll`.
        var epoch: UInt64 = 0

        mutating func nextGeneration() -> UInt64 {
            epoch += 1
            return epoch
        }

        /// The entry for `key`, marked used; a new one when there is none.
        mutating func entry(for key: TokenCacheKey) -> Entry {
            if let entry = entries.value(for: key) { return entry }
            return Entry(generation: nextGeneration())
        }

        /// Keeps `entry` for `key`. A new key in a full cache makes room (docs/operations.md,
        /// "Memory"): the first entry the clock hand reaches that is expired, or not used since
        /// it last passed, goes; an entry with an exchange in flight never goes (its callers
        /// wait for it), so the cache may hold a few more than its capacity while exchanges run.
        mutating func set(_ key: TokenCacheKey, _ entry: Entry, now: UInt64) {
            entries.set(entry, for: key) { entry in
                if entry.exchange != nil { return .never }
                if entry.token == nil || now >= entry.usableUntil { return .now }
                return .ifUnused
            }
        }
    }

    private let state: Mutex<State>
    private let now: @Sendable () -> UInt64
    /// The other per-user credential caches (users' certificates), dropped with the tokens.
    private let companions: [any PerUserCache]

    /// - Parameters:
    ///   - capacity: the most keys kept (more only while every entry the clock hand looks at
    ///     has an exchange in flight).
    ///   - now: monotonic clock in nanoseconds (injectable for tests).
    ///   - companions: caches whose entries of a user go whenever that user's tokens go.
    package init(
        capacity: Int = 200_000, now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds },
        companions: [any PerUserCache] = []
    ) {
        state = Mutex(State(entries: PerUserClockCache(capacity: capacity)))
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
            defer { state.set(key, entry, now: now) }
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
        switch step {
        case .use(let token): return (token, outcome)
        case .wait(let task): return (try await task.value, outcome)
        }
    }

    /// After the back end rejected `token`: drop it (unless already replaced) and exchange a new
    /// one with `new_token=true`. Concurrent callers share that one exchange.
    package func renew(for key: TokenCacheKey, rejected token: AccessToken, exchange: @escaping Exchange) async throws -> AccessToken {
        enum Step { case use(AccessToken), wait(Task<AccessToken, any Error>) }
        let now = self.now()
        let step: Step = state.withLock { state in
            var entry = state.entry(for: key)
            defer { state.set(key, entry, now: now) }
            if let current = entry.token, current != token, now < entry.usableUntil {
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
        let removed = state.withLock { $0.entries.remove(user: user) }
        return companions.reduce(removed) { $0 + $1.remove(user: user) }
    }

    /// Drops every token (configuration reload), and the companion caches' entries.
    package func removeAll() {
        state.withLock { $0.entries.removeAll() }
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
            guard let entry = state.entries.peek(key), entry.generation == generation else { return }
            let next = state.nextGeneration()
            // Not a use of its own: the call that started the exchange counted already.
            state.entries.update(key) { entry in
                entry.token = token
                entry.usableUntil = now + lifetime - margin
                entry.refreshAfter = now + (lifetime - margin) * 3 / 4
                entry.exchange = nil
                entry.generation = next
            }
        }
    }

    private func clearExchange(for key: TokenCacheKey, generation: UInt64) {
        state.withLock { state in
            guard let entry = state.entries.peek(key), entry.generation == generation else { return }
            if entry.token == nil {
                state.entries.remove(key)
            } else {
                state.entries.update(key) { $0.exchange = nil }
            }
        }
    }
}
