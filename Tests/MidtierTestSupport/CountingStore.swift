package import MidtierCore
package import MidtierStore
import Synchronization

/// A store in front of another that counts the registration reads reaching it, so a test can
/// see which reads the memory cache answered itself.
package final class CountingStore: StateStore {
    package let base: any StateStore
    private let reads = Mutex(0)
    private let cancelledContactWrites = Mutex(0)
    /// Runs before each contact write reaches the store (a test holds a write there).
    private let beforeContacts: (@Sendable () async -> Void)?

    package init(_ base: any StateStore, beforeContacts: (@Sendable () async -> Void)? = nil) {
        self.base = base
        self.beforeContacts = beforeContacts
    }

    /// Contact writes that reached this store from a cancelled task.
    package var contactWritesSeenCancelled: Int { cancelledContactWrites.withLock { $0 } }

    /// Registration reads (`registration(id:)`, `currentRegistration(id:)`, `registrationAndBlock(id:)`) so far.
    package var registrationReads: Int { reads.withLock { $0 } }

    private func counted() { reads.withLock { $0 += 1 } }

    package func insert(_ registration: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome {
        try await base.insert(registration, maximumPerUser: maximumPerUser, audit: audit)
    }
    package func registration(id: String) async throws(StoreError) -> Registration? {
        counted()
        return try await base.registration(id: id)
    }
    package func currentRegistration(id: String) async throws(StoreError) -> Registration? {
        counted()
        return try await base.currentRegistration(id: id)
    }
    package func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock? {
        counted()
        return try await base.registrationAndBlock(id: id)
    }
    package func registrations(matching filter: RegistrationFilter) async throws(StoreError) -> [Registration] {
        try await base.registrations(matching: filter)
    }
    package func pushTargets(app: String, providers: [PushProvider], after: String?, limit: Int) async throws(StoreError) -> [String] {
        try await base.pushTargets(app: app, providers: providers, after: after, limit: limit)
    }

    package func registrations(matching filter: RegistrationFilter, after: String?, limit: Int) async throws(StoreError) -> [Registration] {
        try await base.registrations(matching: filter, after: after, limit: limit)
    }
    package func updateDevice(_ registration: Registration, audit: AuditEntry?) async throws(StoreError) -> DeviceWrite {
        try await base.updateDevice(registration, audit: audit)
    }
    package func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition {
        try await base.transition(id: id, to: state, allowedFrom: allowedFrom, audit: audit)
    }
    package func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome {
        try await base.delete(id: id, allowedFrom: allowedFrom, audit: audit)
    }
    package func recordContacts(_ contacts: [Contact]) async throws(StoreError) {
        await beforeContacts?()
        if Task.isCancelled { cancelledContactWrites.withLock { $0 += 1 } }
        try await base.recordContacts(contacts)
    }
    package func block(of user: UserIdentity) async throws(StoreError) -> UserBlock? { try await base.block(of: user) }
    package func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError) { try await base.setBlock(block, audit: audit) }
    package func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await base.removeBlock(of: user, audit: audit)
    }
    package func purgeTokens(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) { try await base.purgeTokens(of: user, audit: audit) }
    package func backendSession(registration: String, destination: String, now: Int64) async throws(StoreError) -> SealedBackendSession? {
        try await base.backendSession(registration: registration, destination: destination, now: now)
    }
    package func saveBackendSession(_ session: SealedBackendSession, now: Int64) async throws(StoreError) -> BackendSessionSave {
        try await base.saveBackendSession(session, now: now)
    }
    package func startPageSession(_ session: StoredPageSession, bounds: PageSessionBounds, now: Int64) async throws(StoreError) {
        try await base.startPageSession(session, bounds: bounds, now: now)
    }
    package func usePageSession(key: String, site: String, now: Int64, takingNotice: Bool) async throws(StoreError) -> StoredPageSession? {
        try await base.usePageSession(key: key, site: site, now: now, takingNotice: takingNotice)
    }
    package func endPageSession(key: String, site: String) async throws(StoreError) { try await base.endPageSession(key: key, site: site) }
    package func storageDocument(_ key: StorageKey) async throws(StoreError) -> String? { try await base.storageDocument(key) }
    package func storageDocuments(app: String, user: UserIdentity, level: StorageLevel) async throws(StoreError) -> [StoredDocument] {
        try await base.storageDocuments(app: app, user: user, level: level)
    }
    package func writeStorage<Reason: Sendable>(
        _ key: StorageKey, userLimit: Int, now: Int64,
        _ edit: @escaping @Sendable (String?) -> StorageEdit<Reason>
    ) async throws(StoreError) -> StorageWrite<Reason> {
        try await base.writeStorage(key, userLimit: userLimit, now: now, edit)
    }
    package func storageEntries(of user: UserIdentity) async throws(StoreError) -> [StorageEntry] { try await base.storageEntries(of: user) }
    package func leavePageNotice(_ notice: String, key: String, site: String) async throws(StoreError) {
        try await base.leavePageNotice(notice, key: key, site: site)
    }
    package func appendAudit(_ entry: AuditEntry) async throws(StoreError) { try await base.appendAudit(entry) }
    package func audit(since: Int64, after: Int64, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await base.audit(since: since, after: after, limit: limit)
    }
    package func recentAudit(before: Int64?, about subject: AuditSubject?, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await base.recentAudit(before: before, about: subject, limit: limit)
    }
    package func ping() async -> Bool { await base.ping() }
}

extension CountingStore {
    /// It passes no push notifications and no change feed on.
    package var pushStore: (any PushStore)? { nil }
    package func changeFeed() -> PostgresChangeFeed? { nil }

    package func saveClientUpload(
        _ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
        now: Int64
    ) async throws(StoreError) -> ClientUploadSave {
        try await base.saveClientUpload(upload, entries: entries, bounds: bounds, now: now)
    }
    package func clientLogs(
        matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?, limit: Int
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
}
