import MidtierCore
import Synchronization

/// Keeps what the request path reads — registrations and user blocks — in memory in front of
/// a durable store, so that an authenticated, registered call costs no store round trip.
///
/// Writes go to the durable store first and update memory only after they committed, so the
/// cache never holds a change that could still be lost. A read that missed and went to the
/// store does not put its result into memory if any write happened meanwhile (a generation
/// counter), so a stale row cannot overwrite a newer change. Bounded: past `capacity`
/// entries, a map is emptied and refills from the store on demand.
///
/// Instances sharing a store (PostgreSQL) learn of each other's writes through the store's
/// change feed, which calls `forget`.
package final class CachedStateStore: StateStore {
    private struct State {
        // Keyed by exact bytes, as the store compares them (docs/identity.md).
        var registrations: [ExactString: Registration] = [:]
        /// `.some(nil)`: the user is known not to be blocked.
        var blocks: [UserIdentity: UserBlock?] = [:]
        var generation: UInt64 = 0
    }

    package let base: any StateStore
    private let state = Mutex(State())
    private let capacity: Int

    package init(base: any StateStore, capacity: Int = 500_000) {
        self.base = base
        self.capacity = capacity
    }

    /// Runs a committed write's effect on memory, and moves the generation on.
    private func afterWrite(_ change: (inout State) -> Void) {
        state.withLock { state in
            state.generation &+= 1
            change(&state)
        }
    }

    private func remember(registration: Registration, ifGeneration generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.registrations.count >= capacity { state.registrations.removeAll(keepingCapacity: true) }
            state.registrations[ExactString(registration.id)] = registration
        }
    }

    private func remember(block: UserBlock?, of user: UserIdentity, ifGeneration generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.blocks.count >= capacity { state.blocks.removeAll(keepingCapacity: true) }
            state.blocks[user] = .some(block)
        }
    }

    // MARK: Reads

    package func registration(id: String) async throws(StoreError) -> Registration? {
        let (cached, generation) = state.withLock { ($0.registrations[ExactString(id)], $0.generation) }
        if let cached { return cached }
        let loaded = try await base.registration(id: id)
        if let loaded { remember(registration: loaded, ifGeneration: generation) }
        return loaded
    }

    package func currentRegistration(id: String) async throws(StoreError) -> Registration? {
        let generation = state.withLock { $0.generation }
        let loaded = try await base.currentRegistration(id: id)
        if let loaded { remember(registration: loaded, ifGeneration: generation) }
        return loaded
    }

    package func block(of user: UserIdentity) async throws(StoreError) -> UserBlock? {
        let (cached, generation) = state.withLock { ($0.blocks[user], $0.generation) }
        if let cached { return cached }
        let loaded = try await base.block(of: user)
        remember(block: loaded, of: user, ifGeneration: generation)
        return loaded
    }

    package func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock? {
        guard let registration = try await registration(id: id) else { return nil }
        return RegistrationAndBlock(registration: registration, block: try await block(of: registration.user))
    }

    package func registrations(matching filter: RegistrationFilter) async throws(StoreError) -> [Registration] {
        try await base.registrations(matching: filter)
    }

    package func audit(since: Int64, after: Int64, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await base.audit(since: since, after: after, limit: limit)
    }

    package func recentAudit(before: Int64?, about subject: AuditSubject?, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await base.recentAudit(before: before, about: subject, limit: limit)
    }

    package func ping() async -> Bool { await base.ping() }

    // MARK: Writes (store first, memory after the commit)

    package func insert(_ registration: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome {
        let outcome = try await base.insert(registration, maximumPerUser: maximumPerUser, audit: audit)
        if outcome == .inserted { afterWrite { $0.registrations[ExactString(registration.id)] = registration } }
        return outcome
    }

    package func updateDevice(_ registration: Registration, audit: AuditEntry?) async throws(StoreError) -> Bool {
        let updated = try await base.updateDevice(registration, audit: audit)
        afterWrite { $0.registrations[ExactString(registration.id)] = nil }
        return updated
    }

    package func transition(id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
                           audit: AuditEntry) async throws(StoreError) -> StateTransition {
        let result = try await base.transition(id: id, to: state, allowedFrom: allowedFrom, audit: audit)
        afterWrite { memory in
            if case .changed(let registration) = result {
                memory.registrations[ExactString(id)] = registration
            } else {
                memory.registrations[ExactString(id)] = nil
            }
        }
        return result
    }

    package func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome {
        let outcome = try await base.delete(id: id, allowedFrom: allowedFrom, audit: audit)
        afterWrite { $0.registrations[ExactString(id)] = nil }
        return outcome
    }

    package func recordContacts(_ contacts: [Contact]) async throws(StoreError) {
        try await base.recordContacts(contacts)
        afterWrite { memory in
            for contact in contacts {
                let key = ExactString(contact.id)
                guard var registration = memory.registrations[key], registration.lastContactAt < contact.at else { continue }
                registration.lastContactAt = contact.at
                memory.registrations[key] = registration
            }
        }
    }

    package func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError) {
        try await base.setBlock(block, audit: audit)
        afterWrite { $0.blocks[block.user] = .some(block) }
    }

    package func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool {
        let removed = try await base.removeBlock(of: user, audit: audit)
        afterWrite { $0.blocks[user] = .some(nil) }
        return removed
    }

    package func appendAudit(_ entry: AuditEntry) async throws(StoreError) {
        try await base.appendAudit(entry)
    }

    package func purgeTokens(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) {
        try await base.purgeTokens(of: user, audit: audit)
    }

    // Back-end sessions: their own memory is the cookie jar (BackendSessions).

    package func backendSession(registration: String, destination: String, now: Int64) async throws(StoreError) -> SealedBackendSession? {
        try await base.backendSession(registration: registration, destination: destination, now: now)
    }

    package func saveBackendSession(_ session: SealedBackendSession, now: Int64) async throws(StoreError) -> BackendSessionSave {
        try await base.saveBackendSession(session, now: now)
    }

    // MARK: Changes made elsewhere (another instance on the same store)

    /// Forgets what memory holds of a registration, so the next read goes to the store.
    package func forget(registration id: String) {
        afterWrite { $0.registrations[ExactString(id)] = nil }
    }

    /// Forgets what memory holds of a user's block.
    package func forget(blockOf user: UserIdentity) {
        afterWrite { $0.blocks[user] = nil }
    }

    /// Forgets everything (after changes were missed that cannot be caught up on one by one).
    package func forgetAll() {
        afterWrite { memory in
            memory.registrations.removeAll()
            memory.blocks.removeAll()
        }
    }
}
