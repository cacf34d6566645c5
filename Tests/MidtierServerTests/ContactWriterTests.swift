import Logging
import MidtierCore
import MidtierServer
import MidtierStore
import MidtierTestSupport
import Registrations
import ServiceLifecycle
import Testing

/// The last contacts at shutdown (docs/operations.md, "Last contact"): a write under way when
/// SIGTERM comes is not cancelled, and what was noted is written before the store closes.
@Suite(.timeLimit(.minutes(5))) struct ContactWriterTests {
    @Test func aShutdownDuringAContactWriteLetsItFinish() async throws {
        try await withTestStore(.sqlite) { test in
            let base = try await test.open(cached: false)
            let made = Registration(id: "r1", appId: "demo", user: .local("alice"), createdAt: 1_000)
            #expect(try await base.insert(made, maximumPerUser: nil, audit: nil) == .inserted)

            let gate = Gate()
            let (entered, enteredWrite) = AsyncStream<Void>.makeStream()
            let store = CountingStore(base) {
                enteredWrite.yield()
                await gate.wait()
            }
            let contacts = ContactRecorder(store: store)
            contacts.record(id: "r1", at: 5_000)
            let writer = ContactWriter(contacts: contacts, interval: .milliseconds(10), logger: Logger(label: "test"))
            let group = ServiceGroup(services: [writer], logger: Logger(label: "test"))
            async let running: Void = group.run()

            var writes = entered.makeAsyncIterator()
            _ = await writes.next()
            // SIGTERM while the write waits in the store; the write is let go only after the
            // shutdown had its time to cancel it (it used to be cancelled, and throw).
            await group.triggerGracefulShutdown()
            try await Task.sleep(for: .milliseconds(300))
            contacts.record(id: "r1", at: 6_000)
            gate.open()
            try await running

            #expect(store.contactWritesSeenCancelled == 0, "no contact write ran in a cancelled task")
            #expect(try await base.currentRegistration(id: "r1")?.lastContactAt == 6_000, "the last flush wrote what was noted last")
            #expect(contacts.waiting == 0)
        }
    }
}
