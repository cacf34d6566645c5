package import MidtierCore
import Synchronization

/// Keeps what the request path reads — registrations' standing and user blocks — in memory in
/// front of a durable store, so that an authenticated, registered call costs no store round
/// trip (docs/operations.md, "Memory").
///
/// Writes go to the durable store first and update memory only after they committed, so the
/// cache never holds a change that could still be lost. A read that missed and went to the
/// store does not put its result into memory if any write to the same shard happened meanwhile
/// (a generation counter), so a stale row cannot overwrite a newer change.
///
/// Bounded, and without a pause: memory is split into shards, each under its own lock and each
/// a ``ClockCache``, so a full cache lets go of one entry not used lately per insertion — never
/// of the whole map — and a call waits only for the calls on its own shard. Of a registration,
/// memory keeps only its standing (app, owner, state, last contact); the reads that need the
/// device fields go to the store.
///
/// Ids the store has no registration for are remembered too (at most `unknownIds`), so that an
/// unknown id costs what a known one does: the time of an answer does not tell whether a
/// registration id exists (docs/identity.md, "Registration ids"). A registration created here
/// replaces its id's miss at once.
///
/// Instances sharing a store (PostgreSQL) learn of each other's writes — creations included —
/// through the store's change feed, which calls `forget`.
package final class CachedStateStore: StateStore {
    /// What memory keeps of a registration (its id is the key).
    private struct Standing {
        var appId: String
        var user: UserIdentity
        var state: Registration.State
        var lastContactAt: Int64

        init(_ registration: Registration) {
            (appId, user, state, lastContactAt) = (registration.appId, registration.user, registration.state, registration.lastContactAt)
        }
    }

    private struct Shard {
        // Keyed by exact bytes, as the store compares them (docs/identity.md).
        var registrations: ClockCache<ExactString, Standing>
        /// `.some(nil)`: the user is known not to be blocked.
        var blocks: ClockCache<UserIdentity, UserBlock?>
        /// Ids the store had no registration for (when read).
        var unknown: ClockCache<ExactString, Void>
        var generation: UInt64 = 0

        init(_ capacity: MemoryCacheSettings, shards: Int) {
            let share = { (total: Int) in (total + shards - 1) / shards }
            registrations = ClockCache(capacity: share(capacity.registrations))
            blocks = ClockCache(capacity: share(capacity.users))
            unknown = ClockCache(capacity: share(capacity.unknownIds))
        }
    }

    /// One lock per shard, so that the calls of one shard do not wait for another's.
    private final class LockedShard: Sendable {
        let state: Mutex<Shard>
        init(_ shard: Shard) { state = Mutex(shard) }
    }

    package static let shardCount = 16

    package let base: any StateStore
    /// Moves on with every change of a block (under the changed user's shard lock).
    private let blockWrites = Atomic<UInt64>(0)
    package let capacity: MemoryCacheSettings
    private let shards: [LockedShard]

    package init(base: any StateStore, capacity: MemoryCacheSettings = MemoryCacheSettings()) {
        self.base = base
        self.capacity = capacity
        self.shards = (0..<Self.shardCount).map { _ in LockedShard(Shard(capacity, shards: Self.shardCount)) }
    }

    private func shard(of key: some Hashable) -> LockedShard {
        var hasher = Hasher()
        hasher.combine(key)
        return shards[Int(UInt(bitPattern: hasher.finalize()) % UInt(Self.shardCount))]
    }

    /// How many unknown ids memory keeps now.
    package var unknownCount: Int { counted { $0.unknown.count } }
    /// How many registrations memory keeps now.
    package var registrationCount: Int { counted { $0.registrations.count } }

    private func counted(_ count: (borrowing Shard) -> Int) -> Int {
        var total = 0
        for locked in shards { total += locked.state.withLock { count($0) } }
        return total
    }

    /// Runs a committed write's effect on memory, and moves the shard's generation on.
    private func afterWrite(_ key: some Hashable, _ change: (inout Shard) -> Void) {
        shard(of: key).state.withLock { shard in
            shard.generation &+= 1
            change(&shard)
        }
    }

    /// Keeps what the store answered for `id` — a registration, or none — unless a write to its
    /// shard happened since the read started.
    private func remember(_ registration: Registration?, id: String, ifGeneration generation: UInt64) {
        let key = ExactString(id)
        shard(of: key).state.withLock { shard in
            guard shard.generation == generation else { return }
            if let registration {
                shard.registrations.set(Standing(registration), for: key)
                shard.unknown.remove(key)
            } else {
                shard.unknown.set((), for: key)
            }
        }
    }

    private func remember(block: UserBlock?, of user: UserIdentity, ifGeneration generation: UInt64) {
        shard(of: user).state.withLock { shard in
            guard shard.generation == generation else { return }
            shard.blocks.set(block, for: user)
        }
    }

    /// Keeps a block read along with a registration (whose owner was not known before the
    /// read, nor so their shard), unless any block changed since the read started.
    private func remember(block: UserBlock?, of user: UserIdentity, ifBlockWrites writes: UInt64) {
        shard(of: user).state.withLock { shard in
            guard blockWrites.load(ordering: .acquiring) == writes, shard.blocks.peek(user) == nil else { return }
            shard.blocks.set(block, for: user)
        }
    }

    /// Runs a committed change of `user`'s block on memory; moves both generations on.
    private func afterBlockWrite(_ user: UserIdentity, _ change: (inout Shard) -> Void) {
        afterWrite(user) { shard in
            blockWrites.add(1, ordering: .releasing)
            change(&shard)
        }
    }

    // MARK: Reads

    /// What the request path reads: from memory, else one read of the store.
    package func standing(ofRegistration id: String) async throws(StoreError) -> RegistrationStanding? {
        let key = ExactString(id)
        let (cached, unknown, generation) = shard(of: key).state.withLock { shard in
            let cached = shard.registrations.value(for: key)
            return (cached, cached == nil && shard.unknown.contains(key), shard.generation)
        }
        if unknown { return nil }
        guard let cached else {
            // A miss costs one read: the registration and its owner's block together.
            let blockWrites = self.blockWrites.load(ordering: .acquiring)
            guard let loaded = try await base.registrationAndBlock(id: id) else {
                remember(nil, id: id, ifGeneration: generation)
                return nil
            }
            remember(loaded.registration, id: id, ifGeneration: generation)
            remember(block: loaded.block, of: loaded.registration.user, ifBlockWrites: blockWrites)
            return RegistrationStanding(loaded.registration, block: loaded.block)
        }
        var standing = RegistrationStanding(
            id: id, appId: cached.appId, user: cached.user, state: cached.state, lastContactAt: cached.lastContactAt, block: nil)
        standing.block = try await block(of: cached.user)
        return standing
    }

    /// The whole registration, from the store (memory keeps only its standing).
    package func registration(id: String) async throws(StoreError) -> Registration? {
        let generation = shard(of: ExactString(id)).state.withLock { $0.generation }
        let loaded = try await base.registration(id: id)
        remember(loaded, id: id, ifGeneration: generation)
        return loaded
    }

    package func currentRegistration(id: String) async throws(StoreError) -> Registration? {
        let generation = shard(of: ExactString(id)).state.withLock { $0.generation }
        let loaded = try await base.currentRegistration(id: id)
        remember(loaded, id: id, ifGeneration: generation)
        return loaded
    }

    package func block(of user: UserIdentity) async throws(StoreError) -> UserBlock? {
        let (cached, generation) = shard(of: user).state.withLock { ($0.blocks.value(for: user), $0.generation) }
        if let cached { return cached }
        let loaded = try await base.block(of: user)
        remember(block: loaded, of: user, ifGeneration: generation)
        return loaded
    }

    /// The whole registration and its owner's block, from the store (for push deliveries,
    /// which need the device's tokens).
    package func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock? {
        try await base.registrationAndBlock(id: id)
    }

    package func registrations(matching filter: RegistrationFilter) async throws(StoreError) -> [Registration] {
        try await base.registrations(matching: filter)
    }

    package func registrations(matching filter: RegistrationFilter, after: String?, limit: Int) async throws(StoreError) -> [Registration] {
        try await base.registrations(matching: filter, after: after, limit: limit)
    }

    package func pushTargets(app: String, providers: [PushProvider], after: String?, limit: Int) async throws(StoreError) -> [String] {
        try await base.pushTargets(app: app, providers: providers, after: after, limit: limit)
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
            let key = ExactString(registration.id)
            afterWrite(key) { memory in
                memory.registrations.set(Standing(registration), for: key)
                memory.unknown.remove(key)
            }
        }
        return outcome
    }

    package func updateDevice(_ registration: Registration, audit: AuditEntry?) async throws(StoreError) -> DeviceWrite {
        let updated = try await base.updateDevice(registration, audit: audit)
        let key = ExactString(registration.id)
        afterWrite(key) { $0.registrations.remove(key) }
        return updated
    }

    package func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition {
        let result = try await base.transition(id: id, to: state, allowedFrom: allowedFrom, audit: audit)
        let key = ExactString(id)
        afterWrite(key) { memory in
            if case .changed(let registration) = result {
                memory.registrations.set(Standing(registration), for: key)
            } else {
                memory.registrations.remove(key)
            }
        }
        return result
    }

    package func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome {
        let outcome = try await base.delete(id: id, allowedFrom: allowedFrom, audit: audit)
        let key = ExactString(id)
        afterWrite(key) { $0.registrations.remove(key) }
        return outcome
    }

    package func recordContacts(_ contacts: [Contact]) async throws(StoreError) {
        try await base.recordContacts(contacts)
        // No generation moves on: a last contact only grows, and a read racing this one that
        // keeps an older time costs at most one more contact noted (the offline policy judges
        // on the store's time, RegistrationService.admit). So the contacts written every two
        // seconds never make the misses being read meanwhile go unremembered.
        for contact in contacts {
            let key = ExactString(contact.id)
            shard(of: key).state.withLock { memory in
                memory.registrations.update(key) { standing in standing.lastContactAt = max(standing.lastContactAt, contact.at) }
            }
        }
    }

    package func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError) {
        try await base.setBlock(block, audit: audit)
        afterBlockWrite(block.user) { $0.blocks.set(block, for: block.user) }
    }

    package func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool {
        let removed = try await base.removeBlock(of: user, audit: audit)
        afterBlockWrite(user) { $0.blocks.set(UserBlock?.none, for: user) }
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
        let key = ExactString(id)
        afterWrite(key) { memory in
            memory.registrations.remove(key)
            memory.unknown.remove(key)
        }
    }

    /// Forgets that there was no registration `id` (one was created since), keeping what
    /// memory holds of one.
    package func forget(missOf id: String) {
        let key = ExactString(id)
        afterWrite(key) { $0.unknown.remove(key) }
    }

    /// Forgets what memory holds of a user's block.
    package func forget(blockOf user: UserIdentity) {
        afterBlockWrite(user) { $0.blocks.remove(user) }
    }

    /// Forgets everything (after changes were missed that cannot be caught up on one by one).
    package func forgetAll() {
        blockWrites.add(1, ordering: .releasing)
        for locked in shards {
            // Swapped out under the lock, let go of after it: no call waits for the freeing.
            var fresh = Shard(capacity, shards: Self.shardCount)
            let forgotten = locked.state.withLock { shard in
                fresh.generation = shard.generation &+ 1
                let forgotten = shard
                shard = fresh
                return forgotten
            }
            _ = forgotten
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

    package func pushRecipients(registrations ids: [String]) async throws(StoreError) -> [ExactString: PushRecipient] {
        try await push.pushRecipients(registrations: ids)
    }

    package func finishPushDeliveries(_ finished: [FinishedPushDelivery], owner: String, now: Int64) async throws(StoreError) -> Int {
        try await push.finishPushDeliveries(finished, owner: owner, now: now)
    }

    package func pushNotification(id: String) async throws(StoreError) -> (PushNotificationRecord, [PushDeliveryRecord])? {
        try await push.pushNotification(id: id)
    }

    package func pushNotification(id: String, deliveriesAfter after: String?, limit: Int) async throws(StoreError) -> PushNotificationSummary? {
        try await push.pushNotification(id: id, deliveriesAfter: after, limit: limit)
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
        if cleared {
            let key = ExactString(registration)
            afterWrite(key) { $0.registrations.remove(key) }
        }
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
            for id in released {
                let key = ExactString(id)
                afterWrite(key) { $0.registrations.remove(key) }
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
