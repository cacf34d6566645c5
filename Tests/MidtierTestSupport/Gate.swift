import Synchronization

/// Holds whoever waits until a test opens it (or the waiting task is cancelled, which opens it):
/// a step of the code under test made to wait at a chosen moment.
package final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    package init() {}

    /// Lets every waiter, and every later one, through.
    package func open() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once the gate is open.
    package func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resume = state.withLock { state in
                    if state.open { return true }
                    state.waiting.append(continuation)
                    return false
                }
                if resume { continuation.resume() }
            }
        } onCancel: {
            open()
        }
    }
}
