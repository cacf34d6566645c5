import Logging
import MidtierCore
import MidtierStore
import MidtierTestSupport
import PushNotifications
import Testing

/// The delivery worker's outcomes, written many in a transaction (docs/push.md, "Delivery"):
/// every outcome is written once, and `record` returns only once its own is in the store.
@Suite(.timeLimit(.minutes(5))) struct PushOutcomeWriterTests {
    @Test(arguments: StoreKind.allCases) func everyOutcomeIsInTheStoreWhenItsRecordReturns(_ kind: StoreKind) async throws {
        try await withTestStore(kind) { test in
            let push = try #require(try await test.open().pushStore)
            let count = 700  // more than one transaction takes (`mostPerWrite`)
            let ids = (0..<count).map { "r" + String(String($0 + 10_000).dropFirst()) }  // in the order of their bytes
            try await push.enqueue(
                PushNotificationRecord(id: "n1", app: "demo", sender: "workflow", payload: "{}", createdAt: 1_000), registrations: ids)
            #expect(try await push.claimPushDeliveries(owner: "W", now: 1_000, leaseUntil: 90_000, limit: count).count == count)

            let writer = PushOutcomeWriter(store: push, owner: "W", clock: WallClock { 2_000 }, logger: Logger(label: "test"))
            let seenPending = await withTaskGroup(of: Int.self) { group in
                for (index, id) in ids.enumerated() {
                    group.addTask {
                        await writer.record(FinishedPushDelivery(notification: "n1", registration: id, outcome: .delivered(.apns)))
                        // Every 50th looks for its own outcome right after its record returned.
                        guard index % 50 == 0 else { return 0 }
                        let own = try? await push.pushNotification(id: "n1", deliveriesAfter: index == 0 ? nil : ids[index - 1], limit: 1)
                        return own?.deliveries.first.map { $0.registration == id && $0.state == .delivered } == true ? 0 : 1
                    }
                }
                return await group.reduce(0, +)
            }
            #expect(seenPending == 0, "a record returned before its outcome was in the store")
            let summary = try #require(try await push.pushNotification(id: "n1", deliveriesAfter: nil, limit: 1))
            #expect(summary.counts.delivered == count)
            #expect(summary.counts.pending == 0)
        }
    }
}
