import Synchronization
import Testing

@testable import PushNotifications

/// The delivery worker's wake-up: a nudge ends a wait, a nudge given while nobody waits is kept
/// (one), and a wait that a nudge ended leaves nothing behind — otherwise the next wait would
/// end at once and the worker would spin. A wait that never ends fails within the time limit
/// (without it, a broken wake-up would hold the run for the hour the waits ask for).
@Suite(.timeLimit(.minutes(1))) struct PushWakeUpTests {
    @Test func aNudgeGivenBeforeTheWaitIsKept() async {
        let wakeUp = PushWakeUp()
        wakeUp.nudge()
        // Would take an hour without the kept nudge.
        await wakeUp.wait(upTo: .seconds(3600))
    }

    @Test func aNudgeEndsAWaitInProgress() async {
        let wakeUp = PushWakeUp()
        async let waited: Void = wakeUp.wait(upTo: .seconds(3600))
        // Nudge until the waiter is woken (a nudge before it waits is kept, so one is enough;
        // more do no harm to this test).
        wakeUp.nudge()
        await waited
    }

    /// After waits that nudges ended, a wait with nothing to wake it lasts its full timeout:
    /// counted as loops of a worker-like waiter over a fixed span, a busy loop would make
    /// thousands; a correct one a handful.
    @Test func aWaitEndedByANudgeLeavesNoNudgeBehind() async throws {
        let wakeUp = PushWakeUp()
        for _ in 0..<50 {
            wakeUp.nudge()
            await wakeUp.wait(upTo: .milliseconds(1))
        }
        // Let the cancelled timers of those waits run out, had they survived.
        try await Task.sleep(for: .milliseconds(50))
        let loops = Mutex(0)
        let waiter = Task {
            while !Task.isCancelled {
                await wakeUp.wait(upTo: .seconds(3600))
                loops.withLock { $0 += 1 }
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(loops.withLock { $0 } == 0, "a wait ended at once although nothing nudged")
        waiter.cancel()
        wakeUp.nudge()
        _ = await waiter.value
    }
}
