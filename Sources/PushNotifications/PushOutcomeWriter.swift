package import Logging
package import MidtierCore
package import MidtierStore

/// Writes the delivery worker's outcomes to the store, many in one transaction: an outcome
/// that comes while a write is under way goes in the next one, and each `record` returns once
/// its outcome is committed (docs/push.md, "Delivery"). One transaction per delivery was most of
/// a delivery's store cost on SQLite's single writer.
package final class PushOutcomeWriter: Sendable {
    /// The most outcomes in one transaction.
    static let mostPerWrite = 256

    private let calls: CoalescedCalls<FinishedPushDelivery, Void>

    package init(store: any PushStore, owner: String, clock: WallClock, logger: Logger) {
        calls = CoalescedCalls(mostPerRun: Self.mostPerWrite) { batch in
            do {
                _ = try await store.finishPushDeliveries(batch, owner: owner, now: clock.now())
            } catch {
                logger.warning(
                    "push delivery outcomes were not written; their deliveries are tried again when their leases run out",
                    metadata: ["count": "\(batch.count)", "error": "\(error)"])
            }
            return { _ in }
        }
    }

    /// Records `finished`; returns once it is written (or its write failed: its lease then
    /// runs out and it is tried again, so it may go twice). The write runs in a task of its own,
    /// so cancellation (a shutdown that did not wait) does not stop the write of a delivery
    /// already sent.
    package func record(_ finished: FinishedPushDelivery) async {
        await calls.call(finished)
    }
}
