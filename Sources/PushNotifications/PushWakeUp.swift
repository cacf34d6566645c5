import Synchronization

/// Wakes the delivery worker when a notification was accepted here, so that it goes out at
/// once rather than at the next poll. A nudge while the worker is busy is kept (one), so none
/// is lost between two waits.
package final class PushWakeUp: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    package init() {}

    package func nudge() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at the next nudge, or after `timeout` at the latest.
    package func wait(upTo timeout: Duration) async {
        let timer = Task { [weak self] in
            // Only a sleep that ran its course wakes the waiter: the timer of a wait that a
            // nudge ended is cancelled, and must not leave a nudge behind (which would end the
            // next wait at once, and so on: a busy loop).
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            self?.nudge()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.pending {
                    state.pending = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
        timer.cancel()
    }
}
