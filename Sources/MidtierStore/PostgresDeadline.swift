import PostgresNIO
import Synchronization

// The PostgreSQL store's deadlines (docs/operations.md, "Store deadlines"): an operation waits
// for a connection of the pool at most its deadline, and never runs if none came in time. Once
// it runs, the server bounds each statement (`statement_timeout`), and the operation's own
// outcome is the answer. A server that answers nothing at all (stopped, or its disk stalled)
// cannot enforce that: past the deadline and as long again (at least the operation timeout, the
// server's own bound), the connection is closed and the operation fails with ``ServerSilent``.

/// An operation got no connection within its deadline: it did not run.
struct DeadlineExceeded: Error {}

/// The server did not answer an operation that was running; its connection was closed. A write
/// may or may not have been made.
struct ServerSilent: Error, CustomStringConvertible {
    var waited: Duration
    var description: String {
        "the server did not answer within \(PostgresStore.milliseconds(waited) / 1000) s, and its connection was closed; "
            + "whether a write was made is not known"
    }
}

extension PostgresStore {
    /// Whether an operation got its connection, or its deadline came first: whichever moves
    /// it from `waiting` first; and whether a silent server's connection was closed.
    private final class Lease: Sendable {
        enum State {
            case waiting
            case held(PostgresConnection)
            case tooLate
            case closed
            /// The operation ended and gave its connection back: nobody may close it now.
            case released
        }
        private let state = Mutex(State.waiting)

        /// Takes `connection` for the operation, unless its deadline came first.
        func hold(_ connection: PostgresConnection) -> Bool {
            state.withLock { state in
                guard case .waiting = state else { return false }
                state = .held(connection)
                return true
            }
        }

        /// Gives up if no connection came yet.
        func giveUp() -> Bool {
            state.withLock { state in
                guard case .waiting = state else { return false }
                state = .tooLate
                return true
            }
        }

        /// The operation ended: its connection goes back to the pool, where another operation
        /// may take it.
        func release() {
            state.withLock { state in
                if case .held = state { state = .released }
            }
        }

        /// The connection held, taken to be closed (the server is silent); nil once released.
        func close() -> PostgresConnection? {
            state.withLock { state in
                guard case .held(let connection) = state else { return nil }
                state = .closed
                return connection
            }
        }

        var isClosed: Bool {
            state.withLock { state in
                if case .closed = state { true } else { false }
            }
        }
    }

    /// What ended first: the operation, its deadline, or the server's last chance.
    private enum Event<T: Sendable>: Sendable {
        case answered(T)
        case deadline
        case silence
    }

    /// Runs `body` on a connection of the pool if one is had within `limit`; else throws
    /// ``DeadlineExceeded`` and `body` never runs. Once it runs, `body`'s own outcome is the
    /// answer, however long it takes (the server bounds each statement) — unless the server
    /// answers nothing for `silentAfter` more (by default `limit`, at least `operationTimeout`):
    /// then the connection is closed and ``ServerSilent`` thrown.
    func withConnection<T: Sendable>(
        within limit: Duration, silentAfter: Duration? = nil, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let lease = Lease()
        let client = self.client
        let grace = silentAfter ?? grace(limit)
        do {
            return try await withThrowingTaskGroup(of: Event<T>.self) { group in
                group.addTask {
                    try await client.withConnection { connection in
                        guard lease.hold(connection) else { throw DeadlineExceeded() }
                        defer { lease.release() }
                        return .answered(try await body(connection))
                    }
                }
                group.addTask {
                    try? await Task.sleep(for: limit)
                    return .deadline
                }
                defer { group.cancelAll() }
                while let event = try await group.next() {
                    switch event {
                    case .answered(let value):
                        return value
                    case .deadline:
                        // Still waiting for a connection: give up (the wait is cancelled).
                        if lease.giveUp() { throw DeadlineExceeded() }
                        // Running: its outcome is the answer, if the server gives one.
                        group.addTask {
                            try? await Task.sleep(for: grace)
                            if !Task.isCancelled, let connection = lease.close() { try? await connection.close() }
                            return .silence
                        }
                    case .silence:
                        continue
                    }
                }
                throw DeadlineExceeded()
            }
        } catch  where lease.isClosed {
            throw ServerSilent(waited: limit + grace)
        }
    }

    /// How long past an operation's deadline a silent server is waited for (the server's own
    /// bound on a statement is the operation's deadline, so a live server answers first).
    func grace(_ limit: Duration) -> Duration { max(limit, operationTimeout) }

    /// `duration` in whole milliseconds (at least 1: 0 would mean no limit to the server).
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
