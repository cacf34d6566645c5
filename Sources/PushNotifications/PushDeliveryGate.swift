import Synchronization

/// The places of a delivery worker (`PushSlots`) behind a lock, with the deliveries that wait
/// for one suspended until it frees, and the worker woken (`PushWakeUp`) when there is room to
/// claim more. docs/push.md, "Delivery".
package final class PushDeliveryGate: Sendable {
    private struct State {
        var slots: PushSlots
        var waiters: [Int: CheckedContinuation<PushSlots.Admission, Never>] = [:]
    }
    private let state: Mutex<State>
    private let wakeUp: PushWakeUp

    package init(limits: PushSlots.Limits = PushSlots.Limits(), wakeUp: PushWakeUp) {
        state = Mutex(State(slots: PushSlots(limits: limits)))
        self.wakeUp = wakeUp
    }

    /// How many deliveries to claim now (`PushSlots.claimRoom(now:)`).
    package func claimRoom(now: Int64) -> Int { state.withLock { $0.slots.claimRoom(now: now) } }
    package var isStopping: Bool { state.withLock { $0.slots.stopping } }

    package func claimed(_ count: Int) {
        state.withLock { $0.slots.claimed(count) }
    }

    /// What became of a delivery at the gate.
    package enum Admission: Equatable, Sendable {
        /// It holds a place of its route and may be sent; `waited`: it waited for the place
        /// (what it was checked against may have changed meanwhile).
        case send(waited: Bool)
        /// Back to the store, not sent.
        case putBack(PushSlots.PutBack)
    }

    /// Where a checked delivery goes: `.send` (now, or once a place of its route frees) or
    /// `.putBack`.
    package func admit(_ route: PushRoute, claimedAt: Int64, now: Int64) async -> Admission {
        var waited = false
        let admission = await withCheckedContinuation { (continuation: CheckedContinuation<PushSlots.Admission, Never>) in
            let (decided, wake) = state.withLock { state -> (PushSlots.Admission?, Bool) in
                let (admission, wake) = state.slots.admit(route, claimedAt: claimedAt, now: now)
                guard case .wait(let ticket) = admission else { return (admission, wake) }
                state.waiters[ticket] = continuation
                return (nil, wake)
            }
            if wake { wakeUp.nudge() }
            if let decided { continuation.resume(returning: decided) } else { waited = true }
        }
        switch admission {
        case .send, .wait: return .send(waited: waited)  // a wait ends in `.send` or `.putBack`
        case .putBack(let why): return .putBack(why)
        }
    }

    /// A claimed delivery that goes to no route.
    package func settled() {
        if state.withLock({ $0.slots.settled() }) { wakeUp.nudge() }
    }

    /// A send on `route` ended: its place goes to the next waiting delivery.
    package func finished(_ route: PushRoute, now: Int64) {
        let (resumed, wake) = state.withLock { state in
            let (handed, wake) = state.slots.finished(route, now: now)
            return (handed.compactMap { entry in state.waiters.removeValue(forKey: entry.ticket).map { ($0, entry.admission) } }, wake)
        }
        for (continuation, admission) in resumed { continuation.resume(returning: admission) }
        if wake { wakeUp.nudge() }
    }

    /// No more claims: the waiting deliveries go back at once, as every one checked from now
    /// on; the worker's loop is woken to end.
    package func stop() {
        let resumed = state.withLock { state in
            state.slots.stop().compactMap { state.waiters.removeValue(forKey: $0) }
        }
        for continuation in resumed { continuation.resume(returning: .putBack(.stopping)) }
        wakeUp.nudge()
    }
}
