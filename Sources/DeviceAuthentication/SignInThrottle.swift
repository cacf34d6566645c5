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
/// wait, and costs no bcrypt. A success opens both keys again; a key left alone for
/// `forgetSeconds` is forgotten. Credentials verified before (remembered by the
/// authenticators) are never throttled: the check is made only before a verification.
///
/// Bounded: at most `capacity` records per kind; past that, the oldest half goes. Addresses and
/// user names are kept apart, so spraying made-up user names never pushes out an address.
package final class SignInThrottle: Sendable {
    private struct Record {
        var failures = 0
        var closedUntil: UInt64 = 0
        var lastFailure: UInt64 = 0
    }

    private struct State {
        var addresses: [ExactString: Record] = [:]
        var users: [ExactString: Record] = [:]
    }

    package let freeFailuresPerAddress: Int
    package let freeFailuresPerUser: Int
    package let maximumBackoffSeconds: Int
    let forgetNanoseconds: UInt64
    private let capacity: Int
    private let state = Mutex(State())
    private let now: @Sendable () -> UInt64

    package init(freeFailuresPerAddress: Int = 20, freeFailuresPerUser: Int = 5, maximumBackoffSeconds: Int = 60, forgetSeconds: Int = 900, capacity: Int = 100_000,
                now: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
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
        return state.withLock { state in
            var wait: UInt64 = 0
            if let address, let record = state.addresses[ExactString(address)], record.closedUntil > now {
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
        state.withLock { state in
            if let address { fail(&state.addresses, ExactString(address), free: freeFailuresPerAddress, now: now) }
            if let user { fail(&state.users, ExactString(user), free: freeFailuresPerUser, now: now) }
        }
    }

    package func recordSuccess(address: String?, user: String?) {
        state.withLock { state in
            if let address { state.addresses[ExactString(address)] = nil }
            if let user { state.users[ExactString(user)] = nil }
        }
    }

    private func fail(_ records: inout [ExactString: Record], _ key: ExactString, free freeFailures: Int, now: UInt64) {
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

/// A bounded queue in front of password-hash verification: at most `concurrent` run at once and
/// at most `waiting` wait; past that a caller is turned away at once (503 with `Retry-After`)
/// instead of joining a queue that makes every sign-in slower.
package final class VerificationLimiter: Sendable {
    private struct State {
        var running = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    package let concurrent: Int
    package let waiting: Int
    private let state = Mutex(State())

    package init(concurrent: Int = ProcessInfo.processInfo.activeProcessorCount, waiting: Int = 32) {
        self.concurrent = max(1, concurrent)
        self.waiting = max(0, waiting)
    }

    private enum Entry { case go, wait, full }

    /// What a verification run through the limiter came to: the secret matched or not, or the
    /// throttle closed while it waited (seconds to wait).
    package enum Attempt: Sendable {
        case matched(Bool)
        case throttled(Int)
    }

    /// Runs `body` when a place is free; nil (without running it) when the queue is full.
    package func run<T: Sendable>(_ body: @Sendable () async -> T) async -> T? {
        let entry: Entry = state.withLock { state in
            if state.running < concurrent { state.running += 1; return .go }
            return state.waiters.count < waiting ? .wait : .full
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
