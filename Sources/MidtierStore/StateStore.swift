package import MidtierCore

/// Durable state: registrations, user blocks, and the audit trail. Every write is one
/// transaction, committed (with its audit entry) before it returns: a change that was
/// acknowledged survives a crash.
package protocol StateStore: Sendable {
    // MARK: Registrations

    /// Inserts `registration` unless its id is in use or was ever used (deleted ids are
    /// retired, never handed out again), its user already has `maximumPerUser` registrations,
    /// or a push token it names is held by another user's registration of the app; nothing is
    /// written then.
    func insert(_ registration: Registration, maximumPerUser: Int?, audit: AuditEntry?) async throws(StoreError) -> InsertOutcome
    func registration(id: String) async throws(StoreError) -> Registration?
    /// The registration as the durable store has it now, past any memory cache (for decisions
    /// another instance's writes could change, such as the offline policy).
    func currentRegistration(id: String) async throws(StoreError) -> Registration?
    /// A registration with its owner's block, in one read (the request path needs both).
    func registrationAndBlock(id: String) async throws(StoreError) -> RegistrationAndBlock?
    /// What decides whether a call with registration `id` goes through, in one read at most:
    /// the request path's (CachedStateStore answers it from memory).
    func standing(ofRegistration id: String) async throws(StoreError) -> RegistrationStanding?
    /// Every registration `filter` selects, oldest first: for reads bounded by the filter (one
    /// user's registrations, at most `maxRegistrationsPerUser`), never for a listing of all.
    func registrations(matching filter: RegistrationFilter) async throws(StoreError) -> [Registration]
    /// A page of the registrations `filter` selects: those whose id's bytes come after `after`
    /// (from the first when nil), in the order of their ids' bytes (the same on both stores),
    /// at most `limit`. Each filter reads an index range, never the whole table, so a page
    /// costs the same at a million registrations as at ten (docs/admin.md, "Listing
    /// registrations").
    func registrations(matching filter: RegistrationFilter, after: String?, limit: Int) async throws(StoreError) -> [Registration]
    /// A page of the ids of `app`'s active registrations that hold a token for one of
    /// `providers` (the app's push services), in the order of their ids' bytes after `after`:
    /// the recipients of a push to a whole app, read from the (app, state, id) index without
    /// reading each registration whole (docs/push.md, "Sending").
    func pushTargets(app: String, providers: [PushProvider], after: String?, limit: Int) async throws(StoreError) -> [String]
    /// Replaces the device fields of the stored registration with the same id, unless a push
    /// token it names is held by another user's registration of the app (checked in the same
    /// transaction).
    func updateDevice(_ registration: Registration, audit: AuditEntry?) async throws(StoreError) -> DeviceWrite
    /// Moves a registration to `state` when its current state is in `allowedFrom`.
    func transition(
        id: String, to state: Registration.State, allowedFrom: Set<Registration.State>,
        audit: AuditEntry
    ) async throws(StoreError) -> StateTransition
    /// Deletes when the registration's state is in `allowedFrom`, and retires its id for good.
    func delete(id: String, allowedFrom: Set<Registration.State>, audit: AuditEntry?) async throws(StoreError) -> DeleteOutcome
    /// Records successful contacts, in one write (monotonic: a last contact never moves back
    /// in time). Not audited.
    func recordContacts(_ contacts: [Contact]) async throws(StoreError)

    // MARK: Blocks

    func block(of user: UserIdentity) async throws(StoreError) -> UserBlock?
    /// Sets (or replaces) the user's block.
    func setBlock(_ block: UserBlock, audit: AuditEntry) async throws(StoreError)
    /// Removes the user's block; false when there was none.
    func removeBlock(of user: UserIdentity, audit: AuditEntry) async throws(StoreError) -> Bool

    /// Records a purge of the user's back-end tokens (with its audit entry), so that every
    /// instance sharing the store drops them too.
    func purgeTokens(of user: UserIdentity, audit: AuditEntry) async throws(StoreError)

    // MARK: Back-end sessions (sealed by the caller; gone with their registration's state change)

    /// The session of `registration` with `destination`, unless it expired before `now` (ms).
    func backendSession(registration: String, destination: String, now: Int64) async throws(StoreError) -> SealedBackendSession?
    /// Keeps `session` in place of the one before, if its registration is active and the one
    /// before has an earlier stamp. Expired sessions of any registration are dropped on the way.
    func saveBackendSession(_ session: SealedBackendSession, now: Int64) async throws(StoreError) -> BackendSessionSave

    // MARK: Page sessions (the web console's and the self-service page's; docs/console.md)

    /// Keeps `session`. First drops every session over at `now`, then the person's least
    /// recently used ones of the same site past `bounds.perSubject - 1`, then the site's least
    /// recently used ones past `bounds.capacity - 1`.
    func startPageSession(_ session: StoredPageSession, bounds: PageSessionBounds, now: Int64) async throws(StoreError)
    /// The session of `site` keyed `key` unless it is over at `now` (then it is deleted), marked
    /// as used at `now`. With `takingNotice`, its notice is returned and removed.
    func usePageSession(key: String, site: String, now: Int64, takingNotice: Bool) async throws(StoreError) -> StoredPageSession?
    /// Deletes the session (sign-out, or a change of what it was opened with).
    func endPageSession(key: String, site: String) async throws(StoreError)
    /// Sets the session's one-time notice.
    func leavePageNotice(_ notice: String, key: String, site: String) async throws(StoreError)

    // MARK: User and device storage (the Storage service; docs/device-api.md)

    /// The document at `key`, as stored.
    func storageDocument(_ key: StorageKey) async throws(StoreError) -> String?
    /// The documents of one level, sorted by the bytes
    /// of their names; two names that differ only in Unicode normalization are two documents.
    func storageDocuments(app: String, user: UserIdentity, level: StorageLevel) async throws(StoreError) -> [StoredDocument]
    /// Changes the document at `key` as `edit` decides from the one stored, in one transaction
    /// that also checks that the user's documents stay within `userLimit` bytes together and,
    /// for a `device` level key, that the registration is the user's active one of the app.
    /// Wiping or deleting a registration deletes its documents in its own transaction.
    func writeStorage<Reason: Sendable>(
        _ key: StorageKey, userLimit: Int, now: Int64,
        _ edit: @escaping @Sendable (String?) -> StorageEdit<Reason>
    ) async throws(StoreError) -> StorageWrite<Reason>
    /// Every document of `user` (all apps and levels), without values, for admins.
    func storageEntries(of user: UserIdentity) async throws(StoreError) -> [StorageEntry]

    // MARK: Client logs and usage (docs/device-api.md, "Client logs and usage")

    /// Keeps `upload` with its log `entries` (none for usage) in one transaction that checks
    /// the registration is active, counts its uploads of the kind since `now - bounds.window`
    /// against `bounds.uploadsPerWindow`, and drops its oldest uploads of the kind (with their
    /// entries) until all kept fit in `bounds.bytesPerRegistration`. Wiping or deleting a
    /// registration deletes its uploads in its own transaction.
    func saveClientUpload(
        _ upload: ClientUpload, entries: [ClientLogEntry], bounds: ClientUploadBounds,
        now: Int64
    ) async throws(StoreError) -> ClientUploadSave
    /// Log entries that `filter` selects, newest first (entry time, then upload, then sequence
    /// descending), after `cursor` when given, at most `limit`.
    func clientLogs(
        matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientLogRecord]
    /// Uploads of `kind` that `filter` selects (by `receivedAt`), newest first, after
    /// `cursor` when given, at most `limit`.
    func clientUploads(
        _ kind: ClientUploadKind, matching filter: ClientUploadFilter, after cursor: ClientUploadCursor?,
        limit: Int
    ) async throws(StoreError) -> [ClientUpload]
    /// Deletes every upload (with its entries) received before `cutoff` (ms); how many.
    func purgeClientUploads(receivedBefore cutoff: Int64) async throws(StoreError) -> Int

    // MARK: Audit

    func appendAudit(_ entry: AuditEntry) async throws(StoreError)
    /// Entries at or after `since` (ms) with a sequence number above `after`, in sequence
    /// order, at most `limit`. Sequence numbers follow commit order on every store, so paging
    /// with `after` set to the last sequence seen misses nothing and repeats nothing.
    func audit(since: Int64, after: Int64, limit: Int) async throws(StoreError) -> [AuditEntry]
    /// Entries with a sequence number below `before` (all when nil) that `subject` selects (all
    /// when nil), newest first, at most `limit`: the web console's audit pages.
    func recentAudit(before: Int64?, about subject: AuditSubject?, limit: Int) async throws(StoreError) -> [AuditEntry]

    /// Whether the store answers (for `/readyz`).
    func ping() async -> Bool

    // MARK: What else the store offers (each store declares it; nobody has to cast to find out)

    /// The store's side of push notifications (docs/push.md); nil for a store that keeps none.
    var pushStore: (any PushStore)? { get }
    /// A feed of the changes other instances make to this store, for memory to follow
    /// (docs/operations.md), logging to the store's logger; nil for a store that one instance owns.
    func changeFeed() -> PostgresChangeFeed?
}

extension StateStore {
    package func currentRegistration(id: String) async throws(StoreError) -> Registration? { try await registration(id: id) }
}

extension StateStore {
    /// A durable store reads the registration with its owner's block.
    package func standing(ofRegistration id: String) async throws(StoreError) -> RegistrationStanding? {
        guard let found = try await registrationAndBlock(id: id) else { return nil }
        return RegistrationStanding(found.registration, block: found.block)
    }
}
