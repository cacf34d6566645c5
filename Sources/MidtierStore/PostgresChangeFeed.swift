package import Logging
import PostgresNIO
import Synchronization

/// How an instance learns of the changes other instances make to a shared PostgreSQL store
/// (docs/operations.md): every write that others must enforce adds a numbered row to
/// `midtier_change` and sends `NOTIFY midtier_changes` at commit.
///
/// The feed `LISTEN`s on its own connection and, on every notification, reads the changes
/// after the last one it applied; it also reads them every `pollInterval` whatever happens, the
/// safety net for a notification that never came. When the connection or the store fails it
/// keeps trying, once a second, and after reconnecting catches up on everything by number; if
/// changes it missed were pruned meanwhile, it reports `.everything`, and the caller forgets
/// all it keeps in memory. What memory holds keeps serving while the store is away: a change
/// cannot be made then, so none is missed.
package final class PostgresChangeFeed: Sendable {
    package enum Event: Sendable {
        case changes([StoreChange])
        /// Changes were missed that cannot be named: forget everything kept in memory.
        case everything
    }

    private let store: PostgresStore
    private let pollInterval: Duration
    /// Changes are kept this long for instances that were away, then pruned.
    private let retentionMilliseconds: Int64
    private let logger: Logger
    /// The sequence of the last change applied; nil until the first synchronisation.
    private let applied = Mutex<Int64?>(nil)

    package init(store: PostgresStore, pollInterval: Duration = .seconds(1), retentionMilliseconds: Int64 = 3_600_000, logger: Logger) {
        self.store = store
        self.pollInterval = pollInterval
        self.retentionMilliseconds = retentionMilliseconds
        self.logger = logger
    }

    /// Runs until cancelled, handing every change to `apply` in order.
    package func run(_ apply: @escaping @Sendable (Event) async -> Void) async {
        let failing = Mutex(false)
        var connectionID = 0
        while !Task.isCancelled {
            connectionID += 1
            do {
                try await listen(connectionID: connectionID, apply: apply) {
                    if failing.withLock({ $0 }) { self.logger.notice("store change feed connected again; caught up") }
                    failing.withLock { $0 = false }
                }
            } catch is CancellationError {
                return
            } catch {
                // Stopping: the listening connection closes under the feed, which is no loss.
                if Task.isCancelled { return }
                if !failing.withLock({ $0 }) {
                    logger.warning(
                        "store change feed lost its connection; retrying every second",
                        metadata: ["error": "\(PostgresStore.describe(error))"])
                }
                failing.withLock { $0 = true }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    private func listen(connectionID: Int, apply: @escaping @Sendable (Event) async -> Void, connected: @escaping @Sendable () -> Void) async throws {
        let connection = try await PostgresConnection.connect(
            configuration: try store.location.connectionConfiguration,
            id: connectionID, logger: logger)
        defer { Task { try? await connection.close() } }
        try await connection.listen(on: PostgresStore.changeChannel) { notifications in
            // Listening now: whatever commits from here on wakes us, so catching up first
            // misses nothing.
            try await catchUp(apply)
            connected()
            let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await _ in notifications { wake.yield() }
                    throw FeedClosed()
                }
                group.addTask {
                    var polls = 0
                    while true {
                        try await Task.sleep(for: self.pollInterval)
                        wake.yield()
                        polls += 1
                        if polls % 60 == 0 { try await self.store.pruneChanges(olderThan: self.retentionMilliseconds) }
                    }
                }
                group.addTask {
                    for await _ in wakes { try await self.catchUp(apply) }
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        }
    }

    private func catchUp(_ apply: @Sendable (Event) async -> Void) async throws {
        guard let last = applied.withLock({ $0 }) else {
            // First start: memory is empty, so there is nothing to catch up on.
            let newest = try await store.newestChange()
            applied.withLock { $0 = newest }
            return
        }
        var after = last
        while true {
            let (changes, gap) = try await store.changes(after: after)
            if gap {
                logger.notice("store changes were missed while away; forgetting what memory holds")
                await apply(.everything)
                let newest = try await store.newestChange()
                applied.withLock { $0 = newest }
                return
            }
            guard let newest = changes.last?.0 else { return }
            await apply(.changes(changes.map(\.1)))
            applied.withLock { $0 = newest }
            after = newest
            if changes.count < 10_000 { return }
        }
    }
}

struct FeedClosed: Error, CustomStringConvertible {
    var description: String { "the listening connection closed" }
}
