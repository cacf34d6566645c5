import Foundation
import HTTPTypes
package import Logging
package import MidtierCore
package import MidtierHTTP
package import MidtierStore
package import PushNotifications
package import Registrations
package import TokenExchange

/// What an admin can see and do: the one set of operations behind both the admin API (JSON,
/// `AdminRoutes`) and the web console (HTML, `ConsoleRoutes`), so that a block or a wipe is the
/// same change with the same audit entry whichever way it was made (docs/admin.md).
///
/// Every change is audited with the admin's name and address in the same transaction as the
/// change. A store failure is `503`; the caller renders refusals its own way.
package struct Administration: Sendable {
    package let registrations: RegistrationService
    package let tokens: TokenCache
    /// The destinations in force (they change on reload).
    package let destinations: @Sendable () -> [DestinationConfiguration]
    /// Whether a user is configured (`users.json`).
    package let knownUser: @Sendable (UserIdentity) -> Bool
    /// The ids of `users.json` in force.
    package let localUserIDs: @Sendable () -> [String]
    /// The JWT issuers of the apps in force: the realms besides `users.json` (docs/identity.md).
    package let realms: @Sendable () -> [String]
    package let reload: @Sendable (AuditActor) async -> ReloadOutcome
    /// Push notifications (docs/push.md): the store's side, the delivery worker's wake-up and
    /// the apps in force; nil on a store without push (the console's Push page says so).
    package let pushStore: (any PushStore)?
    package let pushWakeUp: PushWakeUp?
    package let apps: @Sendable () -> [String: AppConfiguration]
    let logger: Logger

    /// The longest block reason, in bytes.
    package static let maximumReasonBytes = 1000

    package init(
        registrations: RegistrationService, tokens: TokenCache, destinations: @escaping @Sendable () -> [DestinationConfiguration],
        knownUser: @escaping @Sendable (UserIdentity) -> Bool, localUserIDs: @escaping @Sendable () -> [String],
        realms: @escaping @Sendable () -> [String], reload: @escaping @Sendable (AuditActor) async -> ReloadOutcome,
        logger: Logger, store pushStore: (any PushStore)? = nil, wakeUp pushWakeUp: PushWakeUp? = nil,
        apps: @escaping @Sendable () -> [String: AppConfiguration] = { [:] }
    ) {
        self.registrations = registrations
        self.tokens = tokens
        self.destinations = destinations
        self.knownUser = knownUser
        self.localUserIDs = localUserIDs
        self.realms = realms
        self.reload = reload
        self.pushStore = pushStore
        self.pushWakeUp = pushWakeUp
        self.apps = apps
        self.logger = logger
    }

    /// A user as an admin sees them.
    package struct UserRecord: Sendable {
        package var user: UserIdentity
        /// Configured in `users.json`.
        package var known: Bool
        package var block: UserBlock?
        package var registrations: [Registration]
    }

    // MARK: Users and blocks

    /// The user's block and registrations; `404` for a user Midtier knows nothing of.
    package func user(_ user: UserIdentity) async throws(Refusal) -> UserRecord {
        let block = try await store { () async throws(StoreError) in try await registrations.store.block(of: user) }
        let owned = try await store { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user))
        }
        let known = knownUser(user)
        guard known || block != nil || !owned.isEmpty else { throw .notFound("user \(user) is not known") }
        return UserRecord(user: user, known: known, block: block, registrations: owned)
    }

    /// What a block did.
    package struct BlockOutcome: Sendable {
        package var block: UserBlock
        /// Whether Midtier holds a registration of the user (in any state). `false` for a user
        /// who has not onboarded a device yet, such as an IdP user blocked before their first
        /// sign-in: the block waits for them, if the id is spelled as their sign-in will be.
        package var seen: Bool
    }

    /// Blocks `user` and drops their cached tokens. The reason is at most
    /// `maximumReasonBytes` bytes. `404` for a user nobody can sign in as (docs/admin.md): a
    /// `users.json` id that is not there, or a realm no app names, unless Midtier already holds
    /// a block or a registration of that user.
    package func block(_ user: UserIdentity, kind: UserBlock.Kind, reason: String, by actor: AuditActor) async throws(Refusal) -> BlockOutcome {
        guard reason.utf8.count <= Self.maximumReasonBytes else {
            throw .badRequest("reason must be a string of at most \(Self.maximumReasonBytes) bytes")
        }
        let owned = try await store { () async throws(StoreError) in
            try await registrations.store.registrations(matching: RegistrationFilter(user: user))
        }
        if owned.isEmpty, let unknown = unknownUserProblem(user),
            try await store({ () async throws(StoreError) in try await registrations.store.block(of: user) }) == nil
        {
            throw .notFound(unknown)
        }
        let block = UserBlock(user: user, kind: kind, reason: reason, since: registrations.clock.now(), by: actor.name)
        let audit = AuditEntry(
            at: block.since, actor: actor.name, action: "user.block", target: user.description,
            detail: "\(kind.rawValue): \(reason)", source: actor.source)
        try await store { () async throws(StoreError) in try await registrations.store.setBlock(block, audit: audit) }
        let dropped = tokens.remove(user: user)
        logger.notice(
            "user blocked", metadata: ["user": "\(user)", "type": "\(kind.rawValue)", "by": "\(actor.name)", "tokensDropped": "\(dropped)"])
        return BlockOutcome(block: block, seen: !owned.isEmpty)
    }

    /// Why nobody can sign in as `user` with the configuration in force, or nil when someone
    /// can: a `users.json` id must be there byte for byte; an IdP user's realm must be the
    /// issuer of an app, a back end's user's the realm of a `backend` app, in upper case (their
    /// id cannot be checked before they sign in).
    private func unknownUserProblem(_ user: UserIdentity) -> String? {
        if user.isLocal {
            guard !knownUser(user) else { return nil }
            var problem = "user \(Self.quoted(user.id)) is not in users.json (ids are compared by their exact bytes)"
            // Swift's == is canonical equivalence: exactly the near miss to point out.
            if let twin = localUserIDs().first(where: { $0 == user.id }) {
                problem +=
                    "; users.json has \(Self.quoted(twin)), a canonically equivalent spelling with other bytes: "
                    + "\(Self.codePoints(twin)) there, \(Self.codePoints(user.id)) here"
            }
            return problem
        }
        let configured = realms()
        if configured.contains(where: { UserIdentity.sameBytes($0, user.realm) }) {
            // A back end's users are named in upper case (docs/identity.md): another spelling
            // would be nobody.
            if user.realm.hasPrefix(BackendSignIn.realmPrefix) {
                guard user.id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    return "users of realm \(Self.quoted(user.realm)) are named in printable ASCII without spaces"
                }
                let upper = String(decoding: user.id.utf8.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }, as: UTF8.self)
                if !UserIdentity.sameBytes(user.id, upper) {
                    return "users of realm \(Self.quoted(user.realm)) are named in upper case: \(Self.quoted(upper))"
                }
            }
            return nil
        }
        let named = configured.sorted().prefix(10).map(Self.quoted).joined(separator: ", ")
        return "realm \(Self.quoted(user.realm)) is not the realm of any app in force: an identity provider's issuer, or backend:<destination> "
            + "(realms are compared by their exact bytes)"
            + (configured.isEmpty ? "; no app signs in with an identity provider or a back end" : "; the realms are \(named)")
    }

    private static func quoted(_ text: String) -> String { "\"\(text)\"" }

    /// `Jose\u{301}` as `Jose<U+0301>`: printable ASCII as is, every other code point by number.
    static func codePoints(_ text: String) -> String {
        text.unicodeScalars.map { scalar in
            guard !(0x20..<0x7F).contains(scalar.value) else { return String(scalar) }
            let hex = String(scalar.value, radix: 16, uppercase: true)
            return "<U+\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex)>"
        }.joined()
    }

    /// Lifts `user`'s block; `404` when there is none.
    package func unblock(_ user: UserIdentity, by actor: AuditActor) async throws(Refusal) {
        let audit = AuditEntry(
            at: registrations.clock.now(), actor: actor.name, action: "user.unblock", target: user.description, source: actor.source)
        let removed = try await store { () async throws(StoreError) in try await registrations.store.removeBlock(of: user, audit: audit) }
        guard removed else { throw .notFound("user \(user) is not blocked") }
        logger.notice("user unblocked", metadata: ["user": "\(user)", "by": "\(actor.name)"])
    }

    /// Drops `user`'s cached tokens here, and through the store on every instance sharing it.
    /// Returns how many this instance held.
    package func purgeTokens(of user: UserIdentity, by actor: AuditActor) async throws(Refusal) -> Int {
        let purged = tokens.remove(user: user)
        let audit = AuditEntry(
            at: registrations.clock.now(), actor: actor.name, action: "tokens.purge", target: user.description,
            detail: "\(purged) token(s)", source: actor.source)
        try await store { () async throws(StoreError) in try await registrations.store.purgeTokens(of: user, audit: audit) }
        return purged
    }

    // MARK: Text an admin names things by

    /// A user id, realm or filter as an admin typed it (`name` is the parameter or field): one
    /// with a control character names nothing Midtier can hold (docs/identity.md, "Stored
    /// text"), so it is a `400` naming `name` before the store is asked (PostgreSQL cannot even
    /// be asked about a NUL). Registration ids are `registration(id:)`'s `404` instead.
    package static func checkText(_ text: String, named name: String) throws(Refusal) {
        guard !StoredText.hasControlCharacters(text) else { throw .badRequest("\(name) contains control characters") }
    }

    /// The `404` for `id`, shown by code point past printable ASCII (it may hold anything).
    private static func noRegistration(_ id: String) -> Refusal {
        .notFound("registration \(codePoints(id)) does not exist")
    }

    // MARK: Registrations

    /// The registration `id`; `404` when there is none.
    /// An id no registration can have (`RegistrationService.isAcceptableID`: a NUL, say) is
    /// `404` without asking the store, as on the device API.
    package func registration(id: String) async throws(Refusal) -> Registration {
        guard RegistrationService.isAcceptableID(id),
            let found = try await store({ () async throws(StoreError) in try await registrations.store.registration(id: id) })
        else {
            throw Self.noRegistration(id)
        }
        return found
    }

    /// Locks, unlocks or wipes `id`; `404` when there is none, `409` for a wiped one that is
    /// to be locked or unlocked.
    package func apply(_ action: RegistrationAction, to id: String, by actor: AuditActor) async throws(Refusal) -> Registration {
        guard RegistrationService.isAcceptableID(id) else { throw Self.noRegistration(id) }
        switch try await store({ () async throws(StoreError) in try await registrations.apply(action, to: id, by: actor) }) {
        case .changed(let registration):
            logger.notice("registration \(action.rawValue)", metadata: ["registration": "\(id)", "by": "\(actor.name)"])
            return registration
        case .notFound:
            throw Self.noRegistration(id)
        case .refused(let current):
            throw Refusal(
                .conflict, code: "CONFLICT", "registration \(id) is \(current.rawValue); a wiped registration cannot be \(action.rawValue)ed")
        }
    }

    /// Deletes `id` (whatever its state; the id is never handed out again); `404` when there is
    /// none.
    package func delete(id: String, by actor: AuditActor) async throws(Refusal) {
        guard RegistrationService.isAcceptableID(id) else { throw Self.noRegistration(id) }
        switch try await store({ () async throws(StoreError) in try await registrations.delete(id: id, by: actor) }) {
        case .deleted:
            logger.notice("registration deleted", metadata: ["registration": "\(id)", "by": "\(actor.name)"])
        case .notFound, .refused:
            throw Self.noRegistration(id)
        }
    }

    // MARK: Destinations

    /// A destination as admins may see it: never a password, key, passphrase or key file.
    package struct DestinationSummary: Sendable {
        package var name: String
        package var url: String
        /// The destination's `Authentication` type.
        package var authentication: String
        /// The back-end user of a Basic destination.
        package var user: String?
        /// A SAML bearer destination's token service and what it sends there (no secret).
        package var tokenServiceURL: String?
        package var clientKey: String?
        package var companyId: String?
        package var audience: String?
        package var nameIdFormat: String?
        /// The scopes asked for, and the token service's client user (not its password).
        package var scope: String?
        package var tokenServiceUser: String?
        /// An `OAuth2*` destination's client id (not its secret).
        package var clientId: String?
        package var userIdSource: String?
        /// A `PrincipalPropagation` destination's mode, subject pattern and validity.
        package var principalPropagationMode: String?
        package var subjectPattern: String?
        package var certificateValidityMinutes: Int?
        package var timeoutMilliseconds: Int
        /// The names of the headers and query parameters it adds (not their values).
        package var headers: [String]
        package var queries: [String]
        /// The names of the device's own cookies it is sent (`forwardDeviceCookies`; names
        /// only, which are not secrets).
        package var forwardDeviceCookies: [String]
    }

    /// A URL without its query, which may carry what is not for admins' eyes (a parameter an
    /// operator put there, a secret among them).
    static func withoutQuery(_ url: String) -> String { String(url.prefix { $0 != "?" }) }

    /// The destinations in force, by name.
    package func destinationSummaries() -> [DestinationSummary] {
        destinations().sorted { $0.name < $1.name }.map { destination in
            var summary = DestinationSummary(
                name: destination.name, url: destination.url, authentication: "NoAuthentication",
                userIdSource: destination.userIdSource, timeoutMilliseconds: destination.timeoutMilliseconds,
                headers: destination.extraHeaders.map(\.name), queries: destination.extraQueries.map(\.name),
                forwardDeviceCookies: destination.forwardDeviceCookies)
            switch destination.authentication {
            case .noAuthentication:
                break
            case .basic(let user, _):
                summary.authentication = "BasicAuthentication"
                summary.user = user
            case .samlBearer(let settings):
                summary.authentication = "OAuth2SAMLBearerAssertion"
                summary.tokenServiceURL = Self.withoutQuery(settings.tokenServiceURL)
                summary.clientKey = settings.clientKey
                summary.companyId = settings.companyId
                summary.audience = settings.audience
                summary.nameIdFormat = settings.nameIdFormat
                summary.scope = settings.scope
                summary.tokenServiceUser = settings.tokenServiceUser
            case .principalPropagation(let settings):
                summary.authentication = "PrincipalPropagation"
                summary.principalPropagationMode = settings.mode.rawValue
                summary.subjectPattern = settings.subjectPattern.description
                summary.certificateValidityMinutes = settings.validityMinutes
            case .userBasic:
                summary.authentication = "UserBasicAuthentication"
            case .clientCertificate:
                summary.authentication = "ClientCertificateAuthentication"
            case .oauth2(let settings):
                summary.authentication = settings.type
                summary.tokenServiceURL = Self.withoutQuery(settings.tokenServiceURL)
                summary.clientId = settings.clientId
                summary.scope = settings.scope
                summary.tokenServiceUser = settings.tokenServiceUser
            }
            return summary
        }
    }

    // MARK: Audit

    /// Entries at or after `since` (ms) with a sequence above `after`, oldest first.
    package func audit(since: Int64, after: Int64, limit: Int) async throws(Refusal) -> [AuditEntry] {
        try await store { () async throws(StoreError) in try await registrations.store.audit(since: since, after: after, limit: limit) }
    }

    /// Entries below sequence `before` (all when nil) that `subject` selects, newest first.
    package func recentAudit(before: Int64?, about subject: AuditSubject?, limit: Int) async throws(Refusal) -> [AuditEntry] {
        try await store { () async throws(StoreError) in
            try await registrations.store.recentAudit(before: before, about: subject, limit: limit)
        }
    }

    private func store<T>(_ operation: () async throws(StoreError) -> T) async throws(Refusal) -> T {
        try await Refusal.unlessStoreFails(logger, operation)
    }
}
