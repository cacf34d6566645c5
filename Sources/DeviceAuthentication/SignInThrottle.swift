import Dispatch
import Foundation
import MidtierCore
import Synchronization

/// Failed sign-ins, throttled per client address and per user name (docs/identity.md).
///
/// An address may fail `freeFailuresPerAddress` times and a user name `freeFailuresPerUser`
/// times; every further failure closes it for twice as long
/// as the one before (1 s, 2 s, 4 s, … up to `maximumBackoffSeconds`). While a key is closed,
/// a sign-in that would need a password hash verified is refused at once with the seconds to
/// wait, and costs no bcrypt. A key left alone for `forgetSeconds` is forgotten. Credentials
/// verified before (remembered by the authenticators) are never throttled: the check is made
/// only before a verification.
///
/// An address is what one client holds: an IPv4 address (an IPv4-mapped IPv6 address counts
/// as its IPv4 address), or the /64 of an IPv6 address, since one IPv6 client is handed a
/// whole /64. A success for a name opens that name and takes back from its address only the
/// failures of that name from there: an attacker who holds one valid account cannot reset
/// the address's count of the names they guess by signing in with it.
///
/// Bounded: at most `capacity` records per kind; past that, the oldest half goes. Addresses,
/// user names and (address, name) pairs are kept apart, so spraying made-up user names never
/// pushes out an address.
package final class SignInThrottle: Sendable {
    private struct Record {
        var failures = 0
        var closedUntil: UInt64 = 0
        var lastFailure: UInt64 = 0
    }

    /// The failures of one name from one client, which its success takes back.
    private struct Pair: Hashable {
        let client: ClientKey
        let user: ExactString?
    }

    private struct State {
        var addresses: [ClientKey: Record] = [:]
        var users: [ExactString: Record] = [:]
        var pairs: [Pair: Record] = [:]
    }

    package let freeFailuresPerAddress: Int
    package let freeFailuresPerUser: Int
    package let maximumBackoffSeconds: Int
    let forgetNanoseconds: UInt64
    private let capacity: Int
    private let state = Mutex(State())
    private let now: @Sendable () -> UInt64

    package init(
        freeFailuresPerAddress: Int = 20, freeFailuresPerUser: Int = 5, maximumBackoffSeconds: Int = 60, forgetSeconds: Int = 900,
        capacity: Int = 100_000,
        now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        self.freeFailuresPerAddress = max(0, freeFailuresPerAddress)
        self.freeFailuresPerUser = max(0, freeFailuresPerUser)
        self.maximumBackoffSeconds = max(1, maximumBackoffSeconds)
        self.forgetNanoseconds = UInt64(max(1, forgetSeconds)) * 1_000_000_000
        self.capacity = max(2, capacity)
        self.now = now
    }

    /// Seconds to wait before `user` may try again from `address`, or nil when both are open.
    package func retryAfter(address: String?, user: String?) -> Int? {
        let now = self.now()
        let client = address.map(ClientKey.init)
        return state.withLock { state in
            var wait: UInt64 = 0
            if let client, let record = state.addresses[client], record.closedUntil > now {
                wait = max(wait, record.closedUntil - now)
            }
            if let user, let record = state.users[ExactString(user)], record.closedUntil > now {
                wait = max(wait, record.closedUntil - now)
            }
            return wait == 0 ? nil : Int((wait + 999_999_999) / 1_000_000_000)
        }
    }

    package func recordFailure(address: String?, user: String?) {
        let now = self.now()
        let client = address.map(ClientKey.init)
        state.withLock { state in
            if let client {
                fail(&state.addresses, client, free: freeFailuresPerAddress, now: now)
                fail(&state.pairs, Pair(client: client, user: user.map(ExactString.init)), free: Int.max, now: now)
            }
            if let user { fail(&state.users, ExactString(user), free: freeFailuresPerUser, now: now) }
        }
    }

    /// `user` signed in from `address`: the name opens, and the address forgets the failures
    /// of that name (a user's own typos), not those of other names.
    package func recordSuccess(address: String?, user: String?) {
        let now = self.now()
        let client = address.map(ClientKey.init)
        state.withLock { state in
            if let client, let pair = state.pairs.removeValue(forKey: Pair(client: client, user: user.map(ExactString.init))),
                var record = state.addresses[client]
            {
                if now - pair.lastFailure <= forgetNanoseconds { record.failures -= min(pair.failures, record.failures) }
                if record.failures <= freeFailuresPerAddress { record.closedUntil = 0 }
                state.addresses[client] = record.failures == 0 ? nil : record
            }
            if let user { state.users[ExactString(user)] = nil }
        }
    }

    private func fail<Key: Hashable>(_ records: inout [Key: Record], _ key: Key, free freeFailures: Int, now: UInt64) {
        var record = records[key] ?? Record()
        if record.failures > 0, now - record.lastFailure > forgetNanoseconds { record = Record() }
        record.failures += 1
        record.lastFailure = now
        let over = record.failures - freeFailures
        if over > 0 {
            let seconds = min(UInt64(maximumBackoffSeconds), UInt64(1) << UInt64(min(over - 1, 30)))
            record.closedUntil = now + seconds * 1_000_000_000
        }
        records[key] = record
        if records.count > capacity {
            let forget = forgetNanoseconds
            records = records.filter { now - $0.value.lastFailure <= forget }
            if records.count > capacity {
                let keep = records.sorted { $0.value.lastFailure > $1.value.lastFailure }.prefix(capacity / 2)
                records = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
            }
        }
    }
}

/// The client an address belongs to, for counting: an IPv4 address, or the /64 of an IPv6
/// address (an IPv4-mapped one is its IPv4 address). Text that is no address is counted as
/// it is, by its bytes.
struct ClientKey: Hashable, Sendable {
    private let bytes: [UInt8]

    init(_ address: String) {
        switch AddressRange.bytes(of: address) {
        case let parsed? where parsed.count == 16: bytes = [6] + parsed.prefix(8)
        case let parsed?: bytes = [4] + parsed
        case nil: bytes = [0] + Array(address.utf8)
        }
    }
}

/// A bounded queue and a budget in front of password-hash verification (docs/identity.md): at
/// most `concurrent` run at once and at most `waiting` wait, and the work of at most
/// `perSecond` checks of bcrypt cost 12 may start per second, all clients together (a token
/// bucket holding at most `burst`; a check of cost 11 takes half as much, one of cost 13
/// twice). Past either a caller is turned away at once (503 with `Retry-After`) instead of
/// joining a queue that makes every sign-in slower, or taking every core: one attacker with
/// many addresses, each under the failed sign-in throttle, can still not keep all of them busy
/// with bcrypt.
package final class VerificationLimiter: Sendable {
    private struct State {
        var running = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Work that may start now, in thousandths of a cost-12 check (the bucket).
        var budget: UInt64
        var refilled: UInt64
    }

    package let concurrent: Int
    package let waiting: Int
    package let perSecond: Int
    package let burst: Int
    private let state: Mutex<State>
    private let now: @Sendable () -> UInt64

    /// By default as many at once as the machine has cores, and per core and second the work
    /// of 2 checks of cost 12 (about half of each core), in bursts of up to 8.
    package init(
        concurrent: Int = ProcessInfo.processInfo.activeProcessorCount, waiting: Int = 32,
        perSecond: Int = 2 * ProcessInfo.processInfo.activeProcessorCount,
        burst: Int = 8 * ProcessInfo.processInfo.activeProcessorCount,
        now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        self.concurrent = max(1, concurrent)
        self.waiting = max(0, waiting)
        self.perSecond = max(1, perSecond)
        self.burst = max(1, burst)
        self.now = now
        self.state = Mutex(State(budget: UInt64(max(1, burst)) * 1000, refilled: now()))
    }

    private enum Entry { case go, wait, full }

    /// What a verification run through the limiter came to: the secret matched or not, or the
    /// throttle closed while it waited (seconds to wait).
    package enum Attempt: Sendable {
        case matched(Bool)
        case throttled(Int)
    }

    /// The bcrypt cost the budget counts in: a check of this cost takes one unit.
    package static let referenceCost = 12

    /// Runs `body`, a bcrypt check of `cost` (nil: `referenceCost`), when a place is free; nil
    /// (without running it) when the queue is full or the budget spent.
    package func run<T: Sendable>(cost: Int? = nil, _ body: @Sendable () async -> T) async -> T? {
        let now = self.now()
        let capacity = UInt64(burst) * 1000
        // bcrypt's work doubles with each step of cost; never more than the bucket holds.
        let shift = (cost ?? Self.referenceCost) - Self.referenceCost
        let work = shift >= 0 ? min(capacity, UInt64(1000) << UInt64(min(shift, 20))) : max(1, UInt64(1000) >> UInt64(min(-shift, 20)))
        let entry: Entry = state.withLock { state in
            // The bucket fills by `perSecond` units a second up to `burst`, in thousandths: a
            // millisecond brings `perSecond` of them.
            let milliseconds = min(now > state.refilled ? (now - state.refilled) / 1_000_000 : 0, capacity)
            state.budget = min(capacity, state.budget + milliseconds * UInt64(perSecond))
            state.refilled = state.budget == capacity ? max(now, state.refilled) : state.refilled + milliseconds * 1_000_000
            guard state.running < concurrent || state.waiters.count < waiting, state.budget >= work else { return .full }
            state.budget -= work
            if state.running < concurrent { state.running += 1; return .go }
            return .wait
        }
        switch entry {
        case .full:
            return nil
        case .wait:
            await withCheckedContinuation { continuation in
                let admitted: Bool = state.withLock { state in
                    if state.running < concurrent { state.running += 1; return true }
                    state.waiters.append(continuation)
                    return false
                }
                if admitted { continuation.resume() }
            }
        case .go:
            break
        }
        defer { release() }
        return await body()
    }

    private func release() {
        let next: CheckedContinuation<Void, Never>? = state.withLock { state in
            if state.waiters.isEmpty {
                state.running -= 1
                return nil
            }
            // The place passes to the first waiter: `running` stays.
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
