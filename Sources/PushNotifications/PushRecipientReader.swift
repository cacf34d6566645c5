package import MidtierCore
package import MidtierStore

/// Reads registrations again for the delivery worker (a delivery that waited for its place, a
/// request whose body goes late), many in one read: a read asked for while one is under way goes
/// in the next, which starts after it was asked for, so it sees every change acknowledged before
/// (docs/push.md, "Delivery"). Before, each delivery read on its own, and the reads of a busy
/// drain took the store's connections from an admin's block (outside attack F4).
package final class PushRecipientReader: Sendable {
    /// The most registrations in one read.
    static let mostPerRead = 256

    private let calls: CoalescedCalls<String, Result<PushRecipient?, StoreError>>

    package init(store: any PushStore) {
        calls = CoalescedCalls(mostPerRun: Self.mostPerRead) { ids in
            do throws(StoreError) {
                let found = try await store.pushRecipients(registrations: ids)
                return { .success(found[ExactString($0)]) }
            } catch {
                return { _ in .failure(error) }
            }
        }
    }

    /// The registration `id` as it reads now (nil when there is none).
    package func recipient(registration id: String) async throws(StoreError) -> PushRecipient? {
        try await calls.call(id).get()
    }
}
