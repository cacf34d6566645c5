import Foundation
package import Logging
package import MidtierCore
import MidtierJSON
package import MidtierMetrics
package import MidtierStore
import Synchronization

/// Sends the store's pending push deliveries (docs/push.md, "Delivery"): it takes a batch with
/// a lease (so another instance does not send them too), checks each registration right before
/// sending — a locked, wiped or deleted registration, or a blocked user, gets nothing — sends
/// through the app's push service with a bounded number at once per app and service
/// (`PushSlots`), and records the outcome. Failed attempts are tried again
/// with growing pauses (or when the service's `Retry-After` says), at most `maxAttempts` times;
/// a token the service calls gone is cleared from its registration.
package struct PushDeliveryWorker: Sendable {
    package let store: any PushStore
    /// The apps as the current configuration has them.
    package let apps: @Sendable () -> [String: AppConfiguration]
    package let clients: PushClients
    package let wakeUp: PushWakeUp
    package let metrics: MidtierMetrics
    package let logger: Logger
    /// This instance's name in the leases.
    package let owner: String
    /// The server's clock.
    package let clock: WallClock

    /// How long a delivery put back because its route is full waits before it is due again.
    static let putBackPause: Int64 = 1000
    /// Longer than an attempt can take (at most two 30-second requests: FCM's token and the
    /// message) after the longest wait for a place (`PushSlots.Limits.longestWait`), so a lease
    /// never runs out while its owner is still sending; short, so that the deliveries of an
    /// instance that died are sent by another (or after its restart) soon.
    static let leaseMilliseconds: Int64 = 90 * 1000
    package static let maxAttempts = 8
    static let idlePoll = Duration.seconds(1)
    /// How often the deliveries waiting are counted, in milliseconds.
    static let depthEvery: Int64 = 5000

    /// The places: each route (an app's APNs, an app's FCM) sends a bounded number at once.
    package let gate: PushDeliveryGate
    /// Where the outcomes go, many in a transaction.
    let outcomes: PushOutcomeWriter
    /// Where registrations are read again before a send, many in a read.
    let recipients: PushRecipientReader

    package init(
        store: any PushStore, apps: @escaping @Sendable () -> [String: AppConfiguration],
        clients: PushClients, wakeUp: PushWakeUp, metrics: MidtierMetrics, logger: Logger,
        owner: String = UUID().uuidString, clock: WallClock = .system, limits: PushSlots.Limits = PushSlots.Limits()
    ) {
        self.store = store
        self.apps = apps
        self.clients = clients
        self.wakeUp = wakeUp
        self.metrics = metrics
        self.logger = logger
        self.owner = owner
        self.clock = clock
        self.gate = PushDeliveryGate(limits: limits, wakeUp: wakeUp)
        self.outcomes = PushOutcomeWriter(store: store, owner: owner, clock: clock, logger: logger)
        self.recipients = PushRecipientReader(store: store)
    }

    /// Runs until `stop()` (or cancellation): takes due deliveries while their routes have
    /// places (`PushSlots`), and waits for a nudge — a notification accepted here, a place
    /// freed — or a second when there is nothing to take. Returns once the deliveries being sent
    /// have finished and their outcomes are written.
    package func run() async {
        await withDiscardingTaskGroup { group in
            var depthReadAt: Int64?
            while !Task.isCancelled, !gate.isStopping {
                let claimedAt = clock.now()
                let room = gate.claimRoom(now: claimedAt)
                let batch = room > 0 ? await claim(limit: room, at: claimedAt) : []
                if depthReadAt.map({ claimedAt < $0 || claimedAt - $0 >= Self.depthEvery }) ?? true {
                    depthReadAt = claimedAt
                    await recordQueueDepth()
                }
                gate.claimed(batch.count)
                for claimed in batch {
                    group.addTask { await handle(claimed, claimedAt: claimedAt) }
                }
                if batch.count < room || room == 0 { await wakeUp.wait(upTo: Self.idlePoll) }
            }
            // Cancelled without a stop: the waiting deliveries go back all the same.
            gate.stop()
        }
    }

    /// Takes no more deliveries; `run()` returns once those being sent have finished and their
    /// outcomes are written, and those waiting for a place have gone back to the store (due at
    /// once, for another instance or the next start). docs/operations.md, "Running".
    package func stop() {
        logger.info("push deliveries: no more taken; those being sent finish first")
        gate.stop()
    }

    /// Takes up to `limit` due deliveries (none when the store does not answer).
    func claim(limit: Int, at start: Int64) async -> [ClaimedPushDelivery] {
        do {
            return try await store.claimPushDeliveries(owner: owner, now: start, leaseUntil: start + Self.leaseMilliseconds, limit: limit)
        } catch {
            logger.warning("push deliveries not read from the store; trying again", metadata: ["error": "\(error)"])
            return []
        }
    }

    /// Counts the deliveries waiting (`midtier_push_queue_depth`); a count reads every pending
    /// delivery's index entry, so it is made every ``depthEvery``, not at every claim.
    func recordQueueDepth() async {
        do {
            metrics.recordPushQueueDepth(try await store.pendingPushDeliveries())
        } catch {
            logger.warning("push deliveries waiting not counted", metadata: ["error": "\(error)"])
        }
    }

    /// Checks one claimed delivery against its registration as the claim read it, sends it
    /// when its route has a place (or puts it back), and records the outcome.
    func handle(_ claimed: ClaimedPushDelivery, claimedAt: Int64) async {
        let outcome: PushDeliveryOutcome
        switch await prepare(claimed, recipient: claimed.recipient) {
        case .finished(let done):
            gate.settled()
            outcome = done
        case .ready(let attempt):
            switch await gate.admit(attempt.route, claimedAt: claimedAt, now: clock.now()) {
            case .send(waited: false):
                outcome = await send(claimed, attempt, checkedAt: claimedAt)
            case .send(waited: true):
                outcome = await sendChecked(claimed, holding: attempt.route)
            case .putBack(let why):
                outcome = putBack(why, attempt.route)
            }
        }
        await outcomes.record(FinishedPushDelivery(notification: claimed.notification.id, registration: claimed.registration, outcome: outcome))
    }

    /// Sends a delivery that waited for its place on `route`, after reading its registration
    /// once more: the wait may have lasted seconds, and a lock, wipe, delete, block or token
    /// change made meanwhile wins (docs/push.md, "Delivery"; before, the check made before the
    /// wait was the last, and a lost phone's lock did not stop what was queued).
    func sendChecked(_ claimed: ClaimedPushDelivery, holding route: PushRoute) async -> PushDeliveryOutcome {
        let recipient: PushRecipient?
        let readAt = clock.now()
        do {
            recipient = try await recipients.recipient(registration: claimed.registration)
        } catch {
            gate.finished(route, now: clock.now())
            return retry(claimed, after: nil, provider: nil, reason: "the store did not answer")
        }
        switch await prepare(claimed, recipient: recipient) {
        case .finished(let done):
            gate.finished(route, now: clock.now())
            return done
        case .ready(let attempt) where attempt.route == route:
            return await send(claimed, attempt, checkedAt: readAt)
        case .ready:
            // Now for the app's other push service: it waits for a place of that one.
            gate.finished(route, now: clock.now())
            return .putBack(at: clock.now(), reason: "waiting: the registration's push service changed")
        }
    }

    /// How long a check holds: a request whose body goes later than this after its check (it
    /// waited for a connection, an access token or a re-send) is checked again first.
    static let checkHolds: Int64 = 500

    /// Sends a delivery checked at `checkedAt` that holds a place of its route, and frees the
    /// place. If its body goes more than ``checkHolds`` after the check, the registration is
    /// read again then, and a lock, wipe, delete, block or token change made meanwhile withdraws
    /// it (docs/push.md, "Delivery"; before, a request that waited seconds for a connection
    /// went as first checked — found by the outside attack).
    private func send(_ claimed: ClaimedPushDelivery, _ attempt: Attempt, checkedAt: Int64) async -> PushDeliveryOutcome {
        let check = SendCheck(checkedAt: checkedAt)
        let result = await attempt.send { await stillWanted(claimed, attempt, check) }
        gate.finished(attempt.route, now: clock.now())
        if let withdrawn = check.withdrawn { return withdrawn }
        return await conclude(claimed, attempt, result)
    }

    /// Whether a request may go now, its body about to be written: yes while its check holds;
    /// else as its registration reads now — the same route and token, or it is withdrawn with
    /// what the check makes of it.
    private func stillWanted(_ claimed: ClaimedPushDelivery, _ attempt: Attempt, _ check: SendCheck) async -> Bool {
        guard check.withdrawn == nil else { return false }
        let now = clock.now()
        if now >= check.checkedAt, now - check.checkedAt <= Self.checkHolds { return true }
        let recipient: PushRecipient?
        do {
            recipient = try await recipients.recipient(registration: claimed.registration)
        } catch {
            check.withdraw(retry(claimed, after: nil, provider: attempt.route.provider, reason: "the store did not answer"))
            return false
        }
        switch await prepare(claimed, recipient: recipient) {
        case .finished(let done):
            check.withdraw(done)
            return false
        case .ready(let current) where current.route == attempt.route && UserIdentity.sameBytes(current.token, attempt.token):
            check.checked(at: now)
            return true
        case .ready:
            check.withdraw(.putBack(at: clock.now(), reason: "waiting: the registration's push token changed"))
            return false
        }
    }

    /// A checked delivery: where it goes, and its request, ready to send (asking `stillWanted`
    /// when its body is to go).
    struct Attempt: Sendable {
        var route: PushRoute
        var token: String
        var send: @Sendable (_ stillWanted: @escaping @Sendable () async -> Bool) async -> PushAttemptResult
    }

    /// When a send's delivery was last checked, and the outcome it was withdrawn with.
    final class SendCheck: Sendable {
        private let state: Mutex<(checkedAt: Int64, withdrawn: PushDeliveryOutcome?)>

        init(checkedAt: Int64) { state = Mutex((checkedAt, nil)) }

        var checkedAt: Int64 { state.withLock { $0.checkedAt } }
        var withdrawn: PushDeliveryOutcome? { state.withLock { $0.withdrawn } }
        func checked(at time: Int64) { state.withLock { $0.checkedAt = time } }
        func withdraw(_ outcome: PushDeliveryOutcome) { state.withLock { $0.withdrawn = outcome } }
    }

    enum Prepared: Sendable {
        /// Nothing to send: the outcome.
        case finished(PushDeliveryOutcome)
        case ready(Attempt)
    }

    /// Checks a delivery right before it is sent, against `recipient`, its registration as
    /// read in the claim (or again after a wait): a locked, wiped or deleted registration, or a
    /// blocked user, gets nothing; then the app, the stored notification, and the push service
    /// it goes through.
    func prepare(_ claimed: ClaimedPushDelivery, recipient: PushRecipient?) async -> Prepared {
        let notification = claimed.notification
        // Checked now, right before sending, not when the notification was accepted.
        guard let recipient, UserIdentity.sameBytes(recipient.registration, claimed.registration),
            UserIdentity.sameBytes(recipient.app, notification.app)
        else {
            return .finished(skipped("the registration was deleted"))
        }
        guard recipient.state == .active else { return .finished(skipped("the registration is \(recipient.state.rawValue)")) }
        if let block = recipient.block, block.blocksTraffic { return .finished(skipped("the user is blocked")) }
        guard let app = apps()[notification.app] else { return .finished(skipped("the app is no longer configured")) }
        let message: PushMessage
        do {
            guard case .success(let value) = StrictJSON.value(Array(notification.payload.utf8)) else { throw PushMessageError(message: "unreadable") }
            message = try PushMessage.read(value)
        } catch {
            metrics.recordPush(.refused, provider: "none")
            return .finished(.failed(nil, reason: "the stored notification does not read"))
        }

        if !recipient.apnsToken.isEmpty, app.push.apns != nil {
            let token = recipient.apnsToken
            guard let client = await clients.apnsClient(for: app) else {
                return .finished(failed(.refused, .apns, "the app's APNs key does not load"))
            }
            let request = message.apnsRequest(notificationID: notification.id, now: Int(clock.now() / 1000))
            return .ready(Attempt(route: PushRoute.apns(app.id), token: token) { await client.send(request, to: token, stillWanted: $0) })
        } else if !recipient.fcmToken.isEmpty, app.push.fcm != nil {
            let token = recipient.fcmToken
            guard let client = await clients.fcmClient(for: app) else { return .finished(failed(.refused, .fcm, "the app's FCM key does not load")) }
            let request = message.fcmMessage(token: token, notificationID: notification.id)
            return .ready(Attempt(route: PushRoute.fcm(app.id), token: token) { await client.send(request, stillWanted: $0) })
        }
        return .finished(skipped("the registration has no push token for the app's push services"))
    }

    /// What an attempt's result makes of the delivery; a gone token is cleared.
    func conclude(_ claimed: ClaimedPushDelivery, _ attempt: Attempt, _ result: PushAttemptResult) async -> PushDeliveryOutcome {
        let provider = attempt.route.provider
        switch result {
        case .delivered:
            metrics.recordPush(.delivered, provider: provider.rawValue, sinceAccepted: .milliseconds(clock.now() - claimed.notification.createdAt))
            return .delivered(provider)
        case .retry(let after, let reason):
            return retry(claimed, after: after, provider: provider, reason: reason)
        case .tokenGone(let reason):
            do {
                _ = try await store.clearPushToken(registration: claimed.registration, provider: provider, token: attempt.token)
            } catch {
                logger.warning(
                    "a gone push token was not cleared; the next notification finds out again",
                    metadata: ["registration": "\(claimed.registration)", "error": "\(error)"])
            }
            return failed(.tokenGone, provider, reason)
        case .refused(let reason):
            return failed(.refused, provider, reason)
        case .withdrawn:
            // `send` answers with the outcome it was withdrawn with; this is for a client that
            // withdrew on its own.
            return skipped("withdrawn before it was sent")
        }
    }

    /// Back to the store without an attempt: due in a second when its route is full or slow,
    /// at once when this worker stops (another instance, or the next start, takes it).
    private func putBack(_ why: PushSlots.PutBack, _ route: PushRoute) -> PushDeliveryOutcome {
        let now = clock.now()
        let service = route.provider == .apns ? "APNs" : "FCM"
        switch why {
        case .busy: return .putBack(at: now + Self.putBackPause, reason: "waiting: the app's \(service) places are all taken")
        case .late: return .putBack(at: now + Self.putBackPause, reason: "waiting: the app's \(service) answers slowly")
        case .stopping: return .putBack(at: now, reason: "waiting: the instance stopped before sending it")
        }
    }

    private func skipped(_ reason: String) -> PushDeliveryOutcome {
        metrics.recordPush(.skipped, provider: "none")
        return .skipped(reason: reason)
    }

    private func failed(_ outcome: MidtierMetrics.PushOutcome, _ provider: PushProvider, _ reason: String) -> PushDeliveryOutcome {
        metrics.recordPush(outcome, provider: provider.rawValue)
        return .failed(provider, reason: reason)
    }

    /// Another attempt later: when the service said, or after 2, 4, 8 … seconds (at most an
    /// hour); none after `maxAttempts`.
    private func retry(_ claimed: ClaimedPushDelivery, after: Int?, provider: PushProvider?, reason: String) -> PushDeliveryOutcome {
        let attempts = claimed.attempts + 1
        guard attempts < Self.maxAttempts else {
            metrics.recordPush(.exhausted, provider: provider?.rawValue ?? "none")
            return .failed(provider, reason: "\(reason); gave up after \(attempts) attempts")
        }
        metrics.recordPush(.retried, provider: provider?.rawValue ?? "none")
        let pause = after ?? min(3600, 1 << min(attempts, 12))
        return .retry(at: clock.now() + Int64(pause) * 1000, provider: provider, reason: reason)
    }
}
