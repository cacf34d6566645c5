import MidtierTestSupport
import Synchronization
import Testing

@testable import PushNotifications

/// Calls run together (the delivery worker's outcome writes and registration reads;
/// docs/push.md, "Delivery"): the calls that come during a run go in the next ones, at most
/// `mostPerRun` each, and no call is answered by a run that started before it.
@Suite(.timeLimit(.minutes(5))) struct CoalescedCallsTests {
    final class Counter: Sendable {
        private let value = Mutex(0)
        var current: Int { value.withLock { $0 } }
        func next() -> Int {
            value.withLock { value in
                value += 1
                return value
            }
        }
    }

    @Test func callsDuringARunGoInTheNextRunsAndNoneGetsAnOlderRun() async throws {
        let runsStarted = Counter()
        let firstRun = Gate()
        let calls = CoalescedCalls<Int, Int>(mostPerRun: 256) { _ in
            let run = runsStarted.next()
            if run == 1 { await firstRun.wait() }
            return { _ in run }
        }
        let first = Task { await calls.call(0) }
        while runsStarted.current == 0 { await Task.yield() }
        let later = (1...300).map { input in
            Task { () -> (startedBefore: Int, run: Int) in
                let startedBefore = runsStarted.current
                return (startedBefore, await calls.call(input))
            }
        }
        while calls.waiting < 300 { try await Task.sleep(for: .milliseconds(5)) }
        firstRun.open()
        #expect(await first.value == 1)
        var runs: [Int: Int] = [:]
        for task in later {
            let (startedBefore, run) = await task.value
            #expect(run > startedBefore, "answered by a run that started after the call")
            runs[run, default: 0] += 1
        }
        #expect(runs == [2: 256, 3: 44], "the 300 calls that came during the first run go in two runs")
        #expect(await calls.call(301) == 4)
    }
}
