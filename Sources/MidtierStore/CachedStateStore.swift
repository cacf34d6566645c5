package import MidtierCore
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
/// Ids the store has no registration for are remembered too (at most `unknownCapacity`, then
/// emptied like the maps), so that an unknown id costs what a known one does: the time of an
/// answer does not tell whether a registration id exists (docs/identity.md, "Registration
/// ids"). A registration created here replaces its id's miss at once.
///
/// Instances sharing a store (PostgreSQL) learn of each other's writes — creations included —
/// through the store's change feed, which calls `forget`.
package final class CachedStateStore: StateStore {
    private struct State {
        // Keyed by exact bytes, as the store compares them (docs/identity.md).
        var registrations: [ExactString: Registration] = [:]
        /// `.some(nil)`: the user is known not to be blocked.
        var blocks: [UserIdentity: UserBlock?] = [:]
        /// Ids the store had no registration for (when read).
        var unknown: Set<ExactString> = []
        var generation: UInt64 = 0
    }

    package let base: any StateStore
    private let state = Mutex(State())
    private let capacity: Int
    private let unknownCapacity: Int

    package init(base: any StateStore, capacity: Int = 500_000, unknownCapacity: Int = 100_000) {
        self.base = base
        self.capacity = capacity
        self.unknownCapacity = unknownCapacity
    }

    /// How many unknown ids memory keeps now.
    package var unknownCount: Int { state.withLock { $0.unknown.count } }

    /// Runs a committed write's effect on memory, and moves the generation on.
    private func afterWrite(_ change: (inout State) -> Void) {
        state.withLock { state in
            state.generation &+= 1
            change(&state)
        }
    }

    /// Keeps what the store answered for `id` — a registration, or none — unless a write
    /// happened since the read started.
    private func remember(_ registration: Registration?, id: String, ifGeneration generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            let key = ExactString(id)
            if let registration {
                if state.registrations.count >= capacity { state.registrations.removeAll(keepingCapacity: true) }
                state.registrations[key] = registration
                state.unknown.remove(key)
            } else {
                if state.unknown.count >= unknownCapacity { state.unknown.removeAll(keepingCapacity: true) }
                state.unknown.insert(key)
            }
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
        let key = ExactString(id)
        let (cached, unknown, generation) = state.withLock { ($0.registrations[key], $0.unknown.contains(key), $0.generation) }
        if let cached { return cached }
        if unknown { return nil }
        let loaded = try await base.registration(id: id)
        remember(loaded, id: id, ifGeneration: generation)
        return loaded
    }

    package func currentRegistration(id: String) async throws(StoreError) -> Registration? {
        let generation = state.withLock { $0.generation }
        let loaded = try await base.currentRegistration(id: id)
        remember(loaded, id: id, ifGeneration: generation)
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

    package func registrations(matching filter: RegistrationFilter, after: String?, limit: Int) async throws(StoreError) -> [Registration] {
        try await base.registrations(matching: filter, after: after, limit: limit)
    }

    package func audit(since: Int64, after: Int64, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await base.audit(since: since, after: after, limit: limit)
    }

    package func recentAudit(before: Int64?, about subject: AuditSubject?, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await base.recentAudit(before: before, about: subject, limit: limit)
    }

    package func ping() async -> Bool { await base.ping() }

    /// Push notifications when the base store keeps them, written and read through.
    package var pushStore: (any PushStore)? { base.pushStore == nil ? nil : self }
    /// The base store's.
    package func changeFeed() -> PostgresChangeFeed? { base.changeFeed() }

    // MARK: Writes (store first, memory after the commit)

    package func insert(_ registration: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome {
        let outcome = try await base.insert(registration, maximumPerUser: maximumPerUser, audit: audit)
        if outcome == .inserted {
            afterWrite { memory in
                memory.registrations[ExactString(registration.id)] = registration
                memory.unknown.remove(ExactString(registration.id))
            }
        }
        return outcome
    }

    package func updateDevice(_ registration: Registration, audit: AuditEntry?) async throws(StoreError) -> DeviceWrite {
        let updated = try await base.updateDevice(registration, audit: audit)
        afterWrite { $0.registrations[ExactString(registration.id)] = nil }
        return updated
    }

    package func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition {
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

    // Page sessions: read through on every page request, so that a sign-out on any instance
    // ends the session everywhere at once (docs/console.md, "Sessions").

    package func startPageSession(_ session: StoredPageSession, bounds: PageSessionBounds, now: Int64) async throws(StoreError) {
        try await base.startPageSession(session, bounds: bounds, now: now)
    }

    package func usePageSession(key: String, site: String, now: Int64, takingNotice: Bool) async throws(StoreError) -> StoredPageSession? {
        try await base.usePageSession(key: key, site: site, now: now, takingNotice: takingNotice)
    }

    package func endPageSession(key: String, site: String) async throws(StoreError) {
        try await base.endPageSession(key: key, site: site)
    }

    package func leavePageNotice(_ notice: String, key: String, site: String) async throws(StoreError) {
        try await base.leavePageNotice(notice, key: key, site: site)
    }

    // User and device storage: read through, shared by every instance (docs/device-api.md).

    package func storageDocument(_ key: StorageKey) async throws(StoreError) -> String? {
        try await base.storageDocument(key)
    }

    package func storageDocuments(app: String, user: UserIdentity, level: StorageLevel) async throws(StoreError) -> [StoredDocument] {
        try await base.storageDocuments(app: app, user: user, level: level)
    }

    package func writeStorage<Reason: Sendable>(
        _ key: StorageKey, userLimit: Int, now: Int64,
        _ edit: @escaping @Sendable (String?) -> StorageEdit<Reason>
    ) async throws(StoreError) -> StorageWrite<Reason> {
        try await base.writeStorage(key, userLimit: userLimit, now: now, edit)
    }

    package func storageEntries(of user: UserIdentity) async throws(StoreError) -> [StorageEntry] {
        try await base.storageEntries(of: user)
    }

    // Client logs and usage: written and read through, shared by every instance.

    package func saveClientUpload(
        _ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
        now: Int64
    ) async throws(StoreError) -> ClientUploadSave {
        try await base.saveClientUpload(upload, entries: entries, bounds: bounds, now: now)
    }

    package func clientLogs(
        matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientLogRecord] {
        try await base.clientLogs(matching: filter, after: cursor, limit: limit)
    }

    package func clientUploads(
        _ kind: ClientUploadKind, matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientUpload] {
        try await base.clientUploads(kind, matching: filter, after: cursor, limit: limit)
    }

    package func purgeClientUploads(receivedBefore cutoff: Int64) async throws(StoreError) -> Int {
        try await base.purgeClientUploads(receivedBefore: cutoff)
    }

    // MARK: Changes made elsewhere (another instance on the same store)

    /// Forgets what memory holds of a registration — or that there was none —, so the next
    /// read goes to the store.
    package func forget(registration id: String) {
        afterWrite { memory in
            memory.registrations[ExactString(id)] = nil
            memory.unknown.remove(ExactString(id))
        }
    }

    /// Forgets that there was no registration `id` (one was created since), keeping what
    /// memory holds of one.
    package func forget(missOf id: String) {
        afterWrite { $0.unknown.remove(ExactString(id)) }
    }

    /// Forgets what memory holds of a user's block.
    package func forget(blockOf user: UserIdentity) {
        afterWrite { $0.blocks[user] = nil }
    }

    /// Forgets everything (after changes were missed that cannot be caught up on one by one).
    package func forgetAll() {
        afterWrite { memory in
            memory.registrations.removeAll()
            memory.unknown.removeAll()
            memory.blocks.removeAll()
        }
    }
}

// MARK: Push notifications: written and read through, shared by every instance (docs/push.md)

extension CachedStateStore: PushStore {
    /// The base store's side of push notifications.
    private var push: any PushStore {
        get throws(StoreError) {
            guard let push = base.pushStore else { throw StoreError("the store does not keep push notifications") }
            return push
        }
    }

    package func enqueue(_ notification: PushNotificationRecord, registrations: [String]) async throws(StoreError) {
        try await push.enqueue(notification, registrations: registrations)
    }

    package func enqueue(_ notifications: [(notification: PushNotificationRecord, registrations: [String])]) async throws(StoreError) {
        try await push.enqueue(notifications)
    }

    package func claimPushDeliveries(
        owner: String, now: Int64, leaseUntil: Int64,
        limit: Int
    ) async throws(StoreError) -> [ClaimedPushDelivery] {
        try await push.claimPushDeliveries(owner: owner, now: now, leaseUntil: leaseUntil, limit: limit)
    }

    package func finishPushDelivery(
        notification: String, registration: String, owner: String, outcome: PushDeliveryOutcome,
        now: Int64
    ) async throws(StoreError) -> Bool {
        try await push.finishPushDelivery(notification: notification, registration: registration, owner: owner, outcome: outcome, now: now)
    }

    package func pushNotification(id: String) async throws(StoreError) -> (PushNotificationRecord, [PushDeliveryRecord])? {
        try await push.pushNotification(id: id)
    }

    package func recentPushNotifications(
        app: String?, before: PushNotificationCursor?, limit: Int
    ) async throws(StoreError) -> [PushNotificationRecord] {
        try await push.recentPushNotifications(app: app, before: before, limit: limit)
    }

    package func pendingPushDeliveries() async throws(StoreError) -> Int {
        try await push.pendingPushDeliveries()
    }

    /// A token cleared changes the registration: memory forgets it, as after `updateDevice`
    /// (other instances learn of it through the change feed).
    package func clearPushToken(registration: String, provider: PushProvider, token: String) async throws(StoreError) -> Bool {
        let cleared = try await push.clearPushToken(registration: registration, provider: provider, token: token)
        if cleared { afterWrite { $0.registrations[ExactString(registration)] = nil } }
        return cleared
    }

    /// Every registration that lost the token changed: memory forgets each (other instances
    /// learn of it through the change feed).
    package func registrationsReleasingPushToken(
        _ token: String, provider: PushProvider, app: String,
        keeping: String
    ) async throws(StoreError) -> [String] {
        let released = try await push.registrationsReleasingPushToken(token, provider: provider, app: app, keeping: keeping)
        if !released.isEmpty {
            afterWrite { memory in
                for id in released { memory.registrations[ExactString(id)] = nil }
            }
        }
        return released
    }

    package func pushTokenHolders(_ token: String, provider: PushProvider, app: String) async throws(StoreError) -> [UserIdentity] {
        try await push.pushTokenHolders(token, provider: provider, app: app)
    }

    package func purgePushNotifications(before: Int64) async throws(StoreError) -> Int {
        try await push.purgePushNotifications(before: before)
    }

    package func releasePushLeases(ofInstance instance: String, keeping owner: String) async throws(StoreError) -> Int {
        try await push.releasePushLeases(ofInstance: instance, keeping: owner)
    }
}
