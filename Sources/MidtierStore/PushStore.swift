package import MidtierCore

// Push notifications in the store (docs/push.md, "Delivery"): a notification is stored with
// one delivery per registration before its sender hears 202, and each delivery is handed to
// one worker at a time (a lease), so that it survives a crash and goes out once.

/// Which push service a delivery went through. A registration's token for it is its
/// `apnsDeviceToken` or its `androidGcmRegistrationId`.
package enum PushProvider: String, Sendable, CaseIterable {
    case apns, fcm
}

/// A notification as its sender gave it.
package struct PushNotificationRecord: Sendable, Equatable {
    /// Handed to the sender (a UUID), to ask for its status.
    package var id: String
    package var app: String
    /// The sender's name (`config/push-senders.json`).
    package var sender: String
    /// The notification (SAP's notification object) as accepted, JSON text.
    package var payload: String
    /// Milliseconds since 1970.
    package var createdAt: Int64

    package init(id: String, app: String, sender: String, payload: String, createdAt: Int64) {
        self.id = id
        self.app = app
        self.sender = sender
        self.payload = payload
        self.createdAt = createdAt
    }
}

/// A place in the newest-first order of notifications: the one listed last on a page.
package struct PushNotificationCursor: Sendable, Equatable {
    package var createdAt: Int64
    package var id: String

    package init(createdAt: Int64, id: String) {
        self.createdAt = createdAt
        self.id = id
    }

    /// The place after `notification`.
    package init(after notification: PushNotificationRecord) {
        self.init(createdAt: notification.createdAt, id: notification.id)
    }
}

/// Where one notification's delivery to one registration stands.
package enum PushDeliveryState: String, Sendable, CaseIterable {
    /// Not yet sent, or to be tried again at `nextAttemptAt`.
    case pending
    /// The push service took it.
    case delivered
    /// The push service refused it for good, or every attempt failed.
    case failed
    /// Not sent: the registration was locked, wiped, deleted or its user blocked, or it has no
    /// token for the app's push services.
    case skipped
}

/// One notification's delivery to one registration.
package struct PushDeliveryRecord: Sendable, Equatable {
    package var notification: String
    package var registration: String
    package var state: PushDeliveryState
    package var attempts: Int
    /// When a pending delivery is next due (milliseconds since 1970).
    package var nextAttemptAt: Int64
    /// When the state last changed.
    package var updatedAt: Int64
    /// The push service it went through (nil until an attempt was made).
    package var provider: PushProvider?
    /// Why it failed, was skipped or is being retried; "" otherwise. Never a token.
    package var reason: String

    package init(
        notification: String, registration: String, state: PushDeliveryState, attempts: Int, nextAttemptAt: Int64,
        updatedAt: Int64, provider: PushProvider?, reason: String
    ) {
        self.notification = notification
        self.registration = registration
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.updatedAt = updatedAt
        self.provider = provider
        self.reason = reason
    }
}

/// How many of a notification's deliveries are in each state.
package struct PushDeliveryCounts: Sendable, Equatable {
    package var pending = 0
    package var delivered = 0
    package var failed = 0
    package var skipped = 0

    package init(pending: Int = 0, delivered: Int = 0, failed: Int = 0, skipped: Int = 0) {
        self.pending = pending
        self.delivered = delivered
        self.failed = failed
        self.skipped = skipped
    }

    /// The counts of `deliveries`.
    package init(_ deliveries: some Sequence<PushDeliveryRecord>) {
        for delivery in deliveries { self[delivery.state] += 1 }
    }

    package subscript(state: PushDeliveryState) -> Int {
        get {
            switch state {
            case .pending: pending
            case .delivered: delivered
            case .failed: failed
            case .skipped: skipped
            }
        }
        set {
            switch state {
            case .pending: pending = newValue
            case .delivered: delivered = newValue
            case .failed: failed = newValue
            case .skipped: skipped = newValue
            }
        }
    }

    /// How many deliveries there are in all.
    package var total: Int { pending + delivered + failed + skipped }
}

/// A notification with a page of its deliveries and how many it has in each state: what the
/// admin API and the console show of it, however many registrations it went to.
package struct PushNotificationSummary: Sendable, Equatable {
    package var notification: PushNotificationRecord
    /// A page of its deliveries, by registration id's bytes.
    package var deliveries: [PushDeliveryRecord]
    /// Every delivery counted, listed or not.
    package var counts: PushDeliveryCounts
    /// The push services its deliveries went through so far, listed or not.
    package var providers: Set<PushProvider>

    package init(
        notification: PushNotificationRecord, deliveries: [PushDeliveryRecord], counts: PushDeliveryCounts, providers: Set<PushProvider> = []
    ) {
        self.notification = notification
        self.deliveries = deliveries
        self.counts = counts
        self.providers = providers
    }
}

/// A delivery handed to one worker until `leaseUntil`.
package struct ClaimedPushDelivery: Sendable, Equatable {
    package var notification: PushNotificationRecord
    package var registration: String
    /// Attempts made before this one.
    package var attempts: Int
    /// Its registration as the claim read it, in the claim's own transaction; nil when the
    /// registration is gone. The worker checks it before sending, and reads it again if the
    /// delivery then waits for a place (docs/push.md, "Delivery").
    package var recipient: PushRecipient?

    package init(notification: PushNotificationRecord, registration: String, attempts: Int, recipient: PushRecipient?) {
        self.notification = notification
        self.registration = registration
        self.attempts = attempts
        self.recipient = recipient
    }
}

/// What a push delivery is checked against right before it is sent (docs/push.md,
/// "Delivery"): its registration's app, state and push tokens, and its owner's block — the few
/// columns the check needs, not the whole registration.
package struct PushRecipient: Sendable, Equatable {
    package var registration: String
    package var app: String
    package var state: Registration.State
    package var apnsToken: String
    package var fcmToken: String
    /// The owner's block; nil when they are not blocked.
    package var block: UserBlock.Kind?

    package init(registration: String, app: String, state: Registration.State, apnsToken: String, fcmToken: String, block: UserBlock.Kind?) {
        self.registration = registration
        self.app = app
        self.state = state
        self.apnsToken = apnsToken
        self.fcmToken = fcmToken
        self.block = block
    }
}

/// An attempt's outcome to record (``PushStore/finishPushDeliveries(_:owner:now:)``).
package struct FinishedPushDelivery: Sendable, Equatable {
    package var notification: String
    package var registration: String
    package var outcome: PushDeliveryOutcome

    package init(notification: String, registration: String, outcome: PushDeliveryOutcome) {
        self.notification = notification
        self.registration = registration
        self.outcome = outcome
    }
}

/// What became of an attempt.
package enum PushDeliveryOutcome: Sendable, Equatable {
    case delivered(PushProvider)
    /// Try again at `at` (milliseconds since 1970); the attempt counts.
    case retry(at: Int64, provider: PushProvider?, reason: String)
    case failed(PushProvider?, reason: String)
    case skipped(reason: String)
    /// Not sent: back to the queue, due at `at`; the attempt does not count (its push service's
    /// places were all taken, or the worker is stopping).
    case putBack(at: Int64, reason: String)
}

/// The store's side of push notifications. Every write is one transaction, committed before
/// it returns.
package protocol PushStore: Sendable {
    /// Stores `notification` and one pending delivery (due at once) per registration id in
    /// `registrations` (duplicates once), in one transaction.
    func enqueue(_ notification: PushNotificationRecord, registrations: [String]) async throws(StoreError)
    /// Stores several notifications, each with its deliveries as ``enqueue(_:registrations:)``
    /// does, all in one transaction: all or none (a sender's bulk send).
    func enqueue(_ notifications: [(notification: PushNotificationRecord, registrations: [String])]) async throws(StoreError)
    /// Hands up to `limit` pending deliveries due at `now` to `owner` until `leaseUntil`, oldest
    /// due first, each with its registration and its owner's block read in the same
    /// transaction (the registrations live in the same database). A delivery whose lease has not
    /// run out is never handed to another owner (PostgreSQL: `FOR UPDATE SKIP LOCKED`), so
    /// instances sharing the store never send one twice while its owner lives.
    func claimPushDeliveries(owner: String, now: Int64, leaseUntil: Int64, limit: Int) async throws(StoreError) -> [ClaimedPushDelivery]
    /// The registrations `ids` as a delivery is checked against them, by their ids' bytes (an
    /// id not found has none), read from the store itself, not from a memory cache.
    func pushRecipients(registrations ids: [String]) async throws(StoreError) -> [ExactString: PushRecipient]
    /// Records each attempt's outcome and ends its lease, if `owner` still holds it (a lease
    /// that ran out may be another owner's), all in one transaction; how many were recorded.
    func finishPushDeliveries(_ finished: [FinishedPushDelivery], owner: String, now: Int64) async throws(StoreError) -> Int
    /// A notification and every one of its deliveries (by registration id's bytes); nil when
    /// unknown. As many rows as the notification has registrations: for a sender's status call
    /// (``pushNotification(id:deliveriesAfter:limit:)`` is the bounded read).
    func pushNotification(id: String) async throws(StoreError) -> (PushNotificationRecord, [PushDeliveryRecord])?
    /// A notification with at most `limit` of its deliveries, those after the registration id
    /// `after` (by bytes; from the first when nil) in the order of the registration ids' bytes,
    /// and how many of all its deliveries are in each state (one `GROUP BY state` over the
    /// index `push_deliveries_states`), read at one moment; nil when unknown. However many
    /// registrations the notification went to, it reads `limit` rows and counts the rest in the
    /// index (docs/admin.md, "Push notifications").
    func pushNotification(id: String, deliveriesAfter after: String?, limit: Int) async throws(StoreError) -> PushNotificationSummary?
    /// The newest notifications first (by `createdAt`, then by the bytes of their ids), of one
    /// app or of all (`app` nil), those after `before` in that order when given, at most
    /// `limit`: a page of the admin listing, one index range (docs/admin.md, "Push notifications").
    func recentPushNotifications(app: String?, before: PushNotificationCursor?, limit: Int) async throws(StoreError) -> [PushNotificationRecord]
    /// How many deliveries are pending (the queue's depth).
    func pendingPushDeliveries() async throws(StoreError) -> Int
    /// Clears `token` from the registration's token for `provider` if it still holds exactly
    /// that token (the push service said it is gone; a newer token stays). True if cleared.
    func clearPushToken(registration: String, provider: PushProvider, token: String) async throws(StoreError) -> Bool
    /// Takes `token` for `provider` from every registration of `app` other than `keeping` that
    /// holds exactly that token (bytes), so that a phone now registered by another user no
    /// longer gets the earlier registration's notifications; the ids of the registrations that
    /// lost it.
    func registrationsReleasingPushToken(
        _ token: String, provider: PushProvider, app: String,
        keeping: String
    ) async throws(StoreError) -> [String]
    /// The users whose registrations of `app` hold exactly `token` for `provider` (bytes), so
    /// that a token is never taken from another user without a word (docs/push.md).
    func pushTokenHolders(_ token: String, provider: PushProvider, app: String) async throws(StoreError) -> [UserIdentity]
    /// Deletes notifications created before `before` with no pending delivery, and their
    /// deliveries; how many notifications.
    func purgePushNotifications(before: Int64) async throws(StoreError) -> Int
    /// Ends the leases an earlier run of this same instance held (owners `instance/…` other
    /// than `owner`), so that the deliveries whose outcome a crash left unknown are due again
    /// at once rather than when their leases run out; how many. Only for an instance that holds
    /// its listening ports, which no other live process of the same name can.
    func releasePushLeases(ofInstance instance: String, keeping owner: String) async throws(StoreError) -> Int
}

extension PushStore {
    /// Records one attempt's outcome (``finishPushDeliveries(_:owner:now:)``); false when
    /// `owner` no longer held its lease.
    package func finishPushDelivery(
        notification: String, registration: String, owner: String, outcome: PushDeliveryOutcome,
        now: Int64
    ) async throws(StoreError) -> Bool {
        let finished = FinishedPushDelivery(notification: notification, registration: registration, outcome: outcome)
        return try await finishPushDeliveries([finished], owner: owner, now: now) == 1
    }

    /// The newest `limit` notifications, of `app` or of all (the first page).
    package func recentPushNotifications(app: String?, limit: Int) async throws(StoreError) -> [PushNotificationRecord] {
        try await recentPushNotifications(app: app, before: nil, limit: limit)
    }

    /// As ``registrationsReleasingPushToken(_:provider:app:keeping:)``: how many registrations
    /// lost the token.
    package func releasePushToken(_ token: String, provider: PushProvider, app: String, keeping: String) async throws(StoreError) -> Int {
        try await registrationsReleasingPushToken(token, provider: provider, app: app, keeping: keeping).count
    }
}

extension PushStore {
    /// The registration `id` as a delivery is checked against it (nil when there is none).
    package func pushRecipient(registration id: String) async throws(StoreError) -> PushRecipient? {
        try await pushRecipients(registrations: [id])[ExactString(id)]
    }
}
