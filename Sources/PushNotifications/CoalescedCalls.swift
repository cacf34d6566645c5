import Synchronization

/// Runs the calls that come while one is under way together, as one call (docs/push.md,
/// "Delivery"): a call waits for the next run to start — never joins one already started, so
/// what it gets is at least as new as the call — and returns with its own part of that run's
/// answer. At most `mostPerRun` inputs go in one run; what is left waits for the next. The
/// runs go in a task of their own, one at a time, so a caller's cancellation (a shutdown that
/// did not wait) stops no run under way.
///
/// The delivery worker's store work goes this way: the outcomes (``PushOutcomeWriter``, one
/// transaction for many) and the registrations read again before a send (one read for many).
/// One at a time per worker, each holds at most one of the store's connections, whatever the
/// number of deliveries being sent.
package final class CoalescedCalls<Input: Sendable, Output: Sendable>: Sendable {
    /// One run over some inputs: what it answers gives each of them its output.
    package typealias Run = @Sendable ([Input]) async -> @Sendable (Input) -> Output

    private struct Waiting {
        var input: Input
        var answer: CheckedContinuation<Output, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var running = false
    }

    private let state = Mutex(State())
    private let mostPerRun: Int
    private let run: Run

    package init(mostPerRun: Int, run: @escaping Run) {
        self.mostPerRun = max(1, mostPerRun)
        self.run = run
    }

    /// How many calls wait for a run (for tests and diagnostics).
    package var waiting: Int { state.withLock { $0.waiting.count } }

    /// `input`'s output, from the next run.
    package func call(_ input: Input) async -> Output {
        await withCheckedContinuation { (answer: CheckedContinuation<Output, Never>) in
            let start = state.withLock { state in
                state.waiting.append(Waiting(input: input, answer: answer))
                defer { state.running = true }
                return !state.running
            }
            if start { Task { await runWhileWaiting() } }
        }
    }

    /// Runs what waits, a run at a time, until nothing does.
    private func runWhileWaiting() async {
        while true {
            let batch = state.withLock { state -> [Waiting] in
                let batch = Array(state.waiting.prefix(mostPerRun))
                state.waiting.removeFirst(batch.count)
                if batch.isEmpty { state.running = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            let output = await run(batch.map(\.input))
            for waiting in batch { waiting.answer.resume(returning: output(waiting.input)) }
        }
    }
}
