import Foundation
import MidtierCore
import MidtierTestSupport
import Testing

@testable import MidtierStore

/// The PostgreSQL store's deadline (docs/operations.md, "Store deadlines"): it bounds the wait
/// for a connection and each statement, and a write's answer is what the store did — never a
/// failure for a write that was made, nor a success for one that was not (outside attack F3:
/// a write past the deadline answered 503 and was committed all the same).
@Suite(.timeLimit(.minutes(5))) struct PostgresDeadlineTests {
    static let block = UserBlock(user: .local("deadline"), kind: .all, reason: "test", since: 1_000, by: "test")

    /// A write that has its connection and whose statements each end in time runs to its end
    /// and answers what it did, however long it takes in all.
    @Test func aWriteThatStartedAnswersWhatItDidPastTheDeadline() async throws {
        try await withTestStore(.postgres) { test in
            _ = try await test.open(cached: false)
            // A write with a deadline of 1 s (as the back-end session saves have) on a store whose
            // operations have 10 s: a server silent for 1 + 10 s would have its connection closed.
            let store = try await PostgresStore(try #require(test.postgres), operationTimeout: .seconds(10), logger: TestStore.logger)
            defer { store.close() }
            let gate = Gate()
            let writing = Task {
                try await store.write(within: .seconds(1)) { connection, logger in
                    try await connection.run(RegistrationRules.setBlock(Self.block), logger: logger)
                    await gate.wait()
                    return 42
                }
            }
            // Past the deadline, with the transaction open.
            try await Task.sleep(for: .seconds(2))
            gate.open()
            #expect(try await writing.value == 42, "the write was made, and says so")
            #expect(try await store.block(of: .local("deadline"))?.kind == .all)
        }
    }

    /// Each write's transaction carries its bounds itself (set in the transaction, so that
    /// PgBouncer in transaction mode passes them; as a startup parameter, PgBouncer refused the
    /// connection): each statement at most the deadline, idle at most as long as a silent
    /// server is waited for — so an instance frozen inside a write holds the write lock, and
    /// with it every instance's writes, for 10 s, not until TCP gives up (outside attack).
    @Test func aWritesTransactionCarriesItsStatementAndIdleBounds() async throws {
        try await withTestStore(.postgres) { test in
            _ = try await test.open(cached: false)
            let store = try await PostgresStore(try #require(test.postgres), operationTimeout: .seconds(5), logger: TestStore.logger)
            defer { store.close() }
            let settings = try await store.write(lock: nil) { connection, logger in
                try await connection.rows(
                    "SELECT current_setting('statement_timeout') AS s, current_setting('idle_in_transaction_session_timeout') AS i",
                    logger: logger
                ) { row in [try row.text("s"), try row.text("i")] }.first
            }
            #expect(settings == ["5s", "10s"])
            let outside = try await store.read { connection, logger in
                try await connection.rows("SELECT current_setting('statement_timeout') AS s", logger: logger) { try $0.text("s") }.first
            }
            #expect(outside == "0", "set for the transaction only: nothing stays on a connection PgBouncer hands to others")
        }
    }

    /// A write that waits past the deadline (here for the write lock another transaction holds)
    /// fails and is not made, even once the lock comes free.
    @Test func aWriteThatWaitsPastTheDeadlineFailsAndIsNotMade() async throws {
        try await withTestStore(.postgres) { test in
            _ = try await test.open(cached: false)
            let location = try #require(test.postgres)
            let holder = try await PostgresStore(location, operationTimeout: .seconds(600), logger: TestStore.logger)
            defer { holder.close() }
            let store = try await PostgresStore(location, operationTimeout: .seconds(1), logger: TestStore.logger)
            defer { store.close() }
            let holding = Gate()
            let release = Gate()
            let held = Task {
                try await holder.write { _, _ in
                    holding.open()
                    await release.wait()
                }
            }
            await holding.wait()
            await #expect(throws: StoreError.self) {
                try await store.setBlock(Self.block, audit: AuditEntry(at: 1_000, actor: "test", action: "block", target: "deadline"))
            }
            release.open()
            try await held.value
            #expect(try await store.block(of: .local("deadline")) == nil, "what answered a failure was not written")
        }
    }
}
