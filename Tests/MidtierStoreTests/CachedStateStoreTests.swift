import Foundation
import MidtierCore
import MidtierStore
import MidtierTestSupport
import Synchronization
import Testing

/// A store in front of another that counts the registration reads reaching it, so a test can
/// see which reads the memory cache answered itself.
final class CountingStore: StateStore {
    let base: any StateStore
    private let reads = Mutex(0)

    init(_ base: any StateStore) { self.base = base }

    /// Registration reads (`registration(id:)`, `currentRegistration(id:)`, `registrationAndBlock(id:)`) so far.
    var registrationReads: Int { reads.withLock { $0 } }

    private func counted() { reads.withLock { $0 += 1 } }

    func insert(_ registration: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome {
        try await base.insert(registration, maximumPerUser: maximumPerUser, audit: audit)
    }
    func registration(id: String) async throws(StoreError) -> Registration? {
        counted()
        return try await base.registration(id: id)
    }
    func currentRegistration(id: String) async throws(StoreError) -> Registration? {
        counted()
        return try await base.currentRegistration(id: id)
    }
    func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock? {
        counted()
        return try await base.registrationAndBlock(id: id)
    }
    func registrations(matching filter: RegistrationFilter) async throws(StoreError) -> [Registration] {
        try await base.registrations(matching: filter)
    }
    func registrations(matching filter: RegistrationFilter, after: String?, limit: Int) async throws(StoreError) -> [Registration] {
        try await base.registrations(matching: filter, after: after, limit: limit)
    }
    func updateDevice(_ registration: Registration, audit: AuditEntry?) async throws(StoreError) -> DeviceWrite {
        try await base.updateDevice(registration, audit: audit)
    }
    func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition {
        try await base.transition(id: id, to: state, allowedFrom: allowedFrom, audit: audit)
    }
    func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome {
        try await base.delete(id: id, allowedFrom: allowedFrom, audit: audit)
    }
    func recordContacts(_ contacts: [Contact]) async throws(StoreError) { try await base.recordContacts(contacts) }
    func block(of user: UserIdentity) async throws(StoreError) -> UserBlock? { try await base.block(of: user) }
    func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError) { try await base.setBlock(block, audit: audit) }
    func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool {
        try await base.removeBlock(of: user, audit: audit)
    }
    func purgeTokens(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) { try await base.purgeTokens(of: user, audit: audit) }
    func backendSession(registration: String, destination: String, now: Int64) async throws(StoreError) -> SealedBackendSession? {
        try await base.backendSession(registration: registration, destination: destination, now: now)
    }
    func saveBackendSession(_ session: SealedBackendSession, now: Int64) async throws(StoreError) -> BackendSessionSave {
        try await base.saveBackendSession(session, now: now)
    }
    func startPageSession(_ session: StoredPageSession, bounds: PageSessionBounds, now: Int64) async throws(StoreError) {
        try await base.startPageSession(session, bounds: bounds, now: now)
    }
    func usePageSession(key: String, site: String, now: Int64, takingNotice: Bool) async throws(StoreError) -> StoredPageSession? {
        try await base.usePageSession(key: key, site: site, now: now, takingNotice: takingNotice)
    }
    func endPageSession(key: String, site: String) async throws(StoreError) { try await base.endPageSession(key: key, site: site) }
    func storageDocument(_ key: StorageKey) async throws(StoreError) -> String? { try await base.storageDocument(key) }
    func storageDocuments(app: String, user: UserIdentity, level: StorageLevel) async throws(StoreError) -> [StoredDocument] {
        try await base.storageDocuments(app: app, user: user, level: level)
    }
    func writeStorage<Reason: Sendable>(
        _ key: StorageKey, userLimit: Int, now: Int64,
        _ edit: @escaping @Sendable (String?) -> StorageEdit<Reason>
    ) async throws(StoreError) -> StorageWrite<Reason> {
        try await base.writeStorage(key, userLimit: userLimit, now: now, edit)
    }
    func storageEntries(of user: UserIdentity) async throws(StoreError) -> [StorageEntry] { try await base.storageEntries(of: user) }
    func leavePageNotice(_ notice: String, key: String, site: String) async throws(StoreError) {
        try await base.leavePageNotice(notice, key: key, site: site)
    }
    func appendAudit(_ entry: AuditEntry) async throws(StoreError) { try await base.appendAudit(entry) }
    func audit(since: Int64, after: Int64, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await base.audit(since: since, after: after, limit: limit)
    }
    func recentAudit(before: Int64?, about subject: AuditSubject?, limit: Int) async throws(StoreError) -> [AuditEntry] {
        try await base.recentAudit(before: before, about: subject, limit: limit)
    }
    func ping() async -> Bool { await base.ping() }
}

/// The memory cache in front of the store: what it answers itself, and when it asks the store
/// again (docs/identity.md, "Registration ids").
@Suite(.timeLimit(.minutes(10))) struct CachedStateStoreTests {
    static func registration(_ id: String) -> Registration {
        Registration(id: id, appId: "demo", user: .local("alice"), deviceType: "iPad", createdAt: 1_000)
    }

    /// An unknown id costs what a known one does: after the first miss, memory answers. (A
    /// registration id's existence must not show in the time an answer takes.)
    @Test func aMissedIdIsAnsweredFromMemoryTheSecondTime() async throws {
        try await withTestStore(.sqlite) { test in
            let counting = CountingStore(try await test.open(cached: false))
            let cache = CachedStateStore(base: counting)
            #expect(try await cache.registrationAndBlock(id: "nobody") == nil)
            #expect(try await cache.registrationAndBlock(id: "nobody") == nil)
            #expect(try await cache.registration(id: "nobody") == nil)
            #expect(counting.registrationReads == 1, "two misses and a read of one unknown id: one store read")

            // Known ids too: one read, then memory.
            #expect(try await cache.insert(Self.registration("known"), maximumPerUser: nil, audit: nil) == .inserted)
            let before = counting.registrationReads
            #expect(try await cache.registrationAndBlock(id: "known")?.registration.id == "known")
            #expect(counting.registrationReads == before, "a registration made here is in memory at once")
        }
    }

    /// A registration made on this instance after its id was missed is found at once; one made
    /// by another instance is found once the change feed made memory forget the miss.
    @Test func aRegistrationMadeAfterAMissIsFound() async throws {
        try await withTestStore(.sqlite) { test in
            let cache = CachedStateStore(base: try await test.open(cached: false))
            #expect(try await cache.registration(id: "r1") == nil)
            #expect(try await cache.insert(Self.registration("r1"), maximumPerUser: nil, audit: nil) == .inserted)
            #expect(try await cache.registration(id: "r1")?.id == "r1", "made here: found at once")
            #expect(try await cache.registrationAndBlock(id: "r1")?.registration.id == "r1")

            // Another instance (a second store on the same data) makes r2 after this one missed it.
            #expect(try await cache.registrationAndBlock(id: "r2") == nil)
            let other = try await test.open(cached: true)
            #expect(try await other.insert(Self.registration("r2"), maximumPerUser: nil, audit: nil) == .inserted)
            cache.forget(missOf: "r2")  // what the change feed does with the creation
            #expect(try await cache.registrationAndBlock(id: "r2")?.registration.id == "r2")
            // Everything forgotten (changes missed): misses too.
            #expect(try await cache.registration(id: "r3") == nil)
            #expect(try await other.insert(Self.registration("r3"), maximumPerUser: nil, audit: nil) == .inserted)
            cache.forgetAll()
            #expect(try await cache.registration(id: "r3")?.id == "r3")
        }
    }

    /// A miss read while a write happened is not remembered (it may predate the write).
    @Test func aMissRacingAWriteIsNotRemembered() async throws {
        try await withTestStore(.sqlite) { test in
            let counting = CountingStore(try await test.open(cached: false))
            let cache = CachedStateStore(base: counting)
            #expect(try await cache.registration(id: "r1") == nil)
            cache.forget(registration: "r1")
            #expect(try await cache.registration(id: "r1") == nil)
            #expect(counting.registrationReads == 2, "forgotten: read again")
        }
    }

    /// A flood of random ids does not grow memory past its bound: the misses memory keeps stay
    /// at most `unknownCapacity`.
    @Test func missesKeptAreBounded() async throws {
        try await withTestStore(.sqlite) { test in
            let counting = CountingStore(try await test.open(cached: false))
            let cache = CachedStateStore(base: counting, unknownCapacity: 10)
            for n in 0..<95 {
                #expect(try await cache.registration(id: "random-\(n)") == nil)
                #expect(cache.unknownCount <= 10)
            }
            #expect(cache.unknownCount >= 1)
            #expect(counting.registrationReads == 95)
            // The newest miss is still kept.
            #expect(try await cache.registration(id: "random-94") == nil)
            #expect(counting.registrationReads == 95)
        }
    }
}

extension CountingStore {
    /// It passes no push notifications and no change feed on.
    var pushStore: (any PushStore)? { nil }
    func changeFeed() -> PostgresChangeFeed? { nil }

    func saveClientUpload(
        _ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
        now: Int64
    ) async throws(StoreError) -> ClientUploadSave {
        try await base.saveClientUpload(upload, entries: entries, bounds: bounds, now: now)
    }
    func clientLogs(matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?, limit: Int) async throws(StoreError) -> [ClientLogRecord]
    {
        try await base.clientLogs(matching: filter, after: cursor, limit: limit)
    }
    func clientUploads(
        _ kind: ClientUploadKind, matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientUpload] {
        try await base.clientUploads(kind, matching: filter, after: cursor, limit: limit)
    }
    func purgeClientUploads(receivedBefore cutoff: Int64) async throws(StoreError) -> Int {
        try await base.purgeClientUploads(receivedBefore: cutoff)
    }
}
