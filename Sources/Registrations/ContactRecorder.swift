package import MidtierCore
package import MidtierStore
import Synchronization

/// The registrations' last contacts, gathered in memory and written to the store in batches,
/// off the request path (docs/operations.md, "Last contact").
///
/// A proxied call only notes its registration here; `flush()` writes everything noted since
/// the last flush in one store write per `batchSize` registrations (only the newest contact of
/// each). A flush that fails keeps what it could not write for the next one, so a store outage
/// costs no contact, only delay. The last contact is not an acknowledged change: the offline
/// policy counts in days, a flush runs every few seconds.
package final class ContactRecorder: Sendable {
    /// Registration id (exact bytes) → the newest contact not yet written (ms since 1970).
    private let pending = Mutex<[ExactString: Int64]>([:])
    private let store: any StateStore
    let batchSize: Int

    package init(store: any StateStore, batchSize: Int = 1000) {
        self.store = store
        self.batchSize = batchSize
    }

    /// Notes a contact of registration `id` at `milliseconds`; no I/O.
    package func record(id: String, at milliseconds: Int64) {
        pending.withLock { pending in
            let key = ExactString(id)
            if let noted = pending[key], noted >= milliseconds { return }
            pending[key] = milliseconds
        }
    }

    /// How many registrations have a contact waiting to be written.
    package var waiting: Int { pending.withLock { $0.count } }

    /// Writes every contact noted so far. On a store error, what was not written waits for the
    /// next flush and the error is thrown.
    package func flush() async throws(StoreError) {
        let noted = pending.withLock { pending in
            defer { pending.removeAll() }
            return pending
        }
        var contacts = noted.map { Contact(id: $0.key.value, at: $0.value) }[...]
        while !contacts.isEmpty {
            let batch = contacts.prefix(batchSize)
            do {
                try await store.recordContacts(Array(batch))
            } catch {
                for contact in contacts { record(id: contact.id, at: contact.at) }
                throw error
            }
            contacts = contacts.dropFirst(batch.count)
        }
    }
}
