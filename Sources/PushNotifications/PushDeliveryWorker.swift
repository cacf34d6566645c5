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
/// through the app's push service, and records the outcome. Failed attempts are tried again
/// with growing pauses (or when the service's `Retry-After` says), at most `maxAttempts` times;
/// a token the service calls gone is cleared from its registration.
package struct PushDeliveryWorker: Sendable {
    package let store: any PushStore
    package let registrations: any StateStore
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

    /// Deliveries sent at once; more are taken as these finish, so one slow push service does
    /// not hold up the others.
    static let concurrency = 64
    /// Longer than an attempt can take (at most two 30-second requests: FCM's token and the
    /// message), so a lease never runs out while its owner is still sending; short, so that
    /// the deliveries of an instance that died are sent by another (or after its restart) soon.
    static let leaseMilliseconds: Int64 = 90 * 1000
    package static let maxAttempts = 8
    static let idlePoll = Duration.seconds(1)

    package init(
        store: any PushStore, registrations: any StateStore, apps: @escaping @Sendable () -> [String: AppConfiguration],
        clients: PushClients, wakeUp: PushWakeUp, metrics: MidtierMetrics, logger: Logger,
        owner: String = UUID().uuidString, clock: WallClock = .system
    ) {
        self.store = store
        self.registrations = registrations
        self.apps = apps
        self.clients = clients
        self.wakeUp = wakeUp
        self.metrics = metrics
        self.logger = logger
        self.owner = owner
        self.clock = clock
    }

    /// Runs until cancelled: takes due deliveries while fewer than `concurrency` are being
    /// sent, and waits for a nudge (a notification accepted here, half the places freed) or a
    /// second when there is nothing to take.
    package func run() async {
        let inFlight = InFlight()
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                let room = Self.concurrency - inFlight.count.withLock { $0 }
                let batch = room > 0 ? await claim(limit: room) : []
                inFlight.count.withLock { $0 += batch.count }
                for claimed in batch {
                    group.addTask {
                        await send(claimed)
                        // Half the places free again: take more, in one claim rather than one
                        // claim per finished delivery.
                        let halfFree = inFlight.count.withLock { count -> Bool in
                            count -= 1
                            return count == Self.concurrency / 2
                        }
                        if halfFree { wakeUp.nudge() }
                    }
                }
                if batch.isEmpty { await wakeUp.wait(upTo: Self.idlePoll) }
            }
        }
    }

    /// How many deliveries are being sent.
    final class InFlight: Sendable {
        let count = Mutex(0)
    }

    /// Takes up to `limit` due deliveries (none when the store does not answer).
    func claim(limit: Int) async -> [ClaimedPushDelivery] {
        let start = clock.now()
        do {
            let batch = try await store.claimPushDeliveries(owner: owner, now: start, leaseUntil: start + Self.leaseMilliseconds, limit: limit)
            metrics.recordPushQueueDepth(try await store.pendingPushDeliveries())
            return batch
        } catch {
            logger.warning("push deliveries not read from the store; trying again", metadata: ["error": "\(error)"])
            return []
        }
    }

    /// Sends one claimed delivery and records its outcome.
    package func send(_ claimed: ClaimedPushDelivery) async {
        let outcome = await deliver(claimed)
        do {
            _ = try await store.finishPushDelivery(
                notification: claimed.notification.id, registration: claimed.registration,
                owner: owner, outcome: outcome, now: clock.now())
        } catch {
            // The lease runs out and the delivery is tried again (it may then go twice).
            logger.warning(
                "a push delivery's outcome was not written", metadata: ["notification": "\(claimed.notification.id)", "error": "\(error)"])
        }
    }

    /// One attempt at one delivery.
    package func deliver(_ claimed: ClaimedPushDelivery) async -> PushDeliveryOutcome {
        let notification = claimed.notification
        // Checked now, right before sending, not when the notification was accepted.
        let found: RegistrationAndBlock?
        do {
            found = try await registrations.registrationAndBlock(id: claimed.registration)
        } catch {
            return retry(claimed, after: nil, provider: nil, reason: "the store did not answer")
        }
        guard let found, UserIdentity.sameBytes(found.registration.appId, notification.app) else { return skipped("the registration was deleted") }
        let registration = found.registration
        guard registration.state == .active else { return skipped("the registration is \(registration.state.rawValue)") }
        if let block = found.block, block.kind.blocksTraffic { return skipped("the user is blocked") }
        guard let app = apps()[notification.app] else { return skipped("the app is no longer configured") }
        let message: PushMessage
        do {
            guard case .success(let value) = StrictJSON.value(Array(notification.payload.utf8)) else { throw PushMessageError(message: "unreadable") }
            message = try PushMessage.read(value)
        } catch {
            metrics.recordPush(.refused, provider: "none")
            return .failed(nil, reason: "the stored notification does not read")
        }

        let provider: PushProvider, token: String, result: PushAttemptResult
        if !registration.apnsDeviceToken.isEmpty, app.push.apns != nil {
            provider = .apns
            token = registration.apnsDeviceToken
            guard let client = await clients.apnsClient(for: app) else { return failed(.refused, .apns, "the app's APNs key does not load") }
            result = await client.send(message.apnsRequest(notificationID: notification.id, now: Int(clock.now() / 1000)), to: token)
        } else if !registration.androidGcmRegistrationId.isEmpty, app.push.fcm != nil {
            provider = .fcm
            token = registration.androidGcmRegistrationId
            guard let client = await clients.fcmClient(for: app) else { return failed(.refused, .fcm, "the app's FCM key does not load") }
            result = await client.send(message.fcmMessage(token: token, notificationID: notification.id))
        } else {
            return skipped("the registration has no push token for the app's push services")
        }

        switch result {
        case .delivered:
            metrics.recordPush(.delivered, provider: provider.rawValue, sinceAccepted: .milliseconds(clock.now() - notification.createdAt))
            return .delivered(provider)
        case .retry(let after, let reason):
            return retry(claimed, after: after, provider: provider, reason: reason)
        case .tokenGone(let reason):
            do {
                _ = try await store.clearPushToken(registration: registration.id, provider: provider, token: token)
            } catch {
                logger.warning(
                    "a gone push token was not cleared; the next notification finds out again",
                    metadata: ["registration": "\(registration.id)", "error": "\(error)"])
            }
            return failed(.tokenGone, provider, reason)
        case .refused(let reason):
            return failed(.refused, provider, reason)
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
