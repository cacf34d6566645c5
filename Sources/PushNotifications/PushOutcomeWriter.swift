package import Logging
package import MidtierCore
package import MidtierStore
import Synchronization

/// Writes the delivery worker's outcomes to the store, many in one transaction: an outcome
/// that comes while a write is under way goes in the next one, and each `record` returns once
/// its outcome is committed (docs/push.md, "Delivery"). One transaction per delivery was most of
/// a delivery's store cost on SQLite's single writer.
package final class PushOutcomeWriter: Sendable {
    /// The most outcomes in one transaction.
    static let mostPerWrite = 256

    private struct Waiting {
        var finished: FinishedPushDelivery
        var written: CheckedContinuation<Void, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var writing = false
    }

    private let state = Mutex(State())
    private let store: any PushStore
    private let owner: String
    private let clock: WallClock
    private let logger: Logger

    package init(store: any PushStore, owner: String, clock: WallClock, logger: Logger) {
        self.store = store
        self.owner = owner
        self.clock = clock
        self.logger = logger
    }

    /// Records `finished`; returns once it is written (or its write failed: its lease then
    /// runs out and it is tried again, so it may go twice). The write runs in a task of its own,
    /// so cancellation (a shutdown that did not wait) does not stop the write of a delivery
    /// already sent.
    package func record(_ finished: FinishedPushDelivery) async {
        await withCheckedContinuation { (written: CheckedContinuation<Void, Never>) in
            let start = state.withLock { state in
                state.waiting.append(Waiting(finished: finished, written: written))
                defer { state.writing = true }
                return !state.writing
            }
            if start { Task { await writeWhileWaiting() } }
        }
    }

    /// Writes what waits, a transaction at a time, until nothing does.
    private func writeWhileWaiting() async {
        while true {
            let batch = state.withLock { state -> [Waiting] in
                let batch = Array(state.waiting.prefix(Self.mostPerWrite))
                state.waiting.removeFirst(batch.count)
                if batch.isEmpty { state.writing = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            do {
                _ = try await store.finishPushDeliveries(batch.map(\.finished), owner: owner, now: clock.now())
            } catch {
                logger.warning(
                    "push delivery outcomes were not written; their deliveries are tried again when their leases run out",
                    metadata: ["count": "\(batch.count)", "error": "\(error)"])
            }
            for waiting in batch { waiting.written.resume() }
        }
    }
}
