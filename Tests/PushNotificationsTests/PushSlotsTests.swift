import Testing

@testable import PushNotifications

/// The places of the delivery worker (docs/push.md, "Delivery"): each app's APNs and FCM send a
/// bounded number at once, so one that answers slowly holds up only its own deliveries, and a
/// place that frees is filled at once. Stand-in services at a process boundary:
/// `Tests/e2e/push.py`.
@Suite struct PushSlotsTests {
    static let apns = PushRoute.apns("demo")
    static let fcm = PushRoute.fcm("demo")
    static let otherAppsAPNs = PushRoute.apns("second")

    static func limits(sends: Int = 2, waiting: Int = 2, claim: Int = 4, probe: Int = 1) -> PushSlots.Limits {
        var limits = PushSlots.Limits()
        limits.sendsPerRoute = sends
        limits.waitingPerRoute = waiting
        limits.claim = claim
        limits.probe = probe
        limits.longestWait = 20_000
        return limits
    }

    /// Claims `count` and admits each on `route` at time 0.
    static func admit(_ slots: inout PushSlots, _ count: Int, on route: PushRoute) -> [PushSlots.Admission] {
        slots.claimed(count)
        return (0..<count).map { _ in slots.admit(route, claimedAt: 0, now: 0).admission }
    }

    /// APNs with every place taken and its line full leaves FCM's places, and another app's
    /// APNs places, free: they are sent at once, whatever APNs does.
    @Test func aFullRouteDoesNotTakeAnotherRoutesPlaces() {
        var slots = PushSlots(limits: Self.limits())
        #expect(Self.admit(&slots, 2, on: Self.apns) == [.send, .send])
        #expect(Self.admit(&slots, 2, on: Self.apns) == [.wait(ticket: 1), .wait(ticket: 2)])
        #expect(Self.admit(&slots, 1, on: Self.apns) == [.putBack(.busy)], "a full line goes back to the store, taking no place")
        #expect(Self.admit(&slots, 2, on: Self.fcm) == [.send, .send])
        #expect(Self.admit(&slots, 1, on: Self.otherAppsAPNs) == [.send])
        #expect(slots.sending(Self.apns) == 2 && slots.waiting(Self.apns) == 2 && slots.sending(Self.fcm) == 2)
    }

    /// A claim takes what the routes with work have room for; with every one full it takes a
    /// probe (to find another route's work), and nothing while deliveries are being checked.
    @Test func claimsTakeTheRoomLeftOrAProbe() {
        var slots = PushSlots(limits: Self.limits())
        #expect(slots.claimRoom(now: 0) == 4, "nothing in flight: a whole claim")
        slots.claimed(4)
        #expect(slots.claimRoom(now: 0) == 0, "all four are being checked")
        _ = slots.admit(Self.apns, claimedAt: 0, now: 0)
        _ = slots.admit(Self.apns, claimedAt: 0, now: 0)
        #expect(slots.claimRoom(now: 0) == 0, "two being checked may take the two waiting places left")
        _ = slots.admit(Self.apns, claimedAt: 0, now: 0)
        _ = slots.admit(Self.apns, claimedAt: 0, now: 0)
        #expect(slots.claimRoom(now: 0) == 1, "every route with work is full: a probe")
    }

    /// Probes behind a full route's backlog come at most one a second however often the worker
    /// is woken, each twice the last (up to a claim), and end when a delivery gets a place.
    @Test func probesArePacedAndGrowUntilAPlaceIsFound() {
        var limits = Self.limits(claim: 8)
        limits.probeInterval = 1000
        var slots = PushSlots(limits: limits)
        _ = Self.admit(&slots, 4, on: Self.apns)
        #expect(slots.claimRoom(now: 0) == 1)
        #expect(slots.claimRoom(now: 999) == 0, "woken again within the second: no probe")
        #expect(slots.claimRoom(now: 1000) == 2)
        #expect(slots.claimRoom(now: 2000) == 4)
        #expect(slots.claimRoom(now: 3000) == 8)
        #expect(slots.claimRoom(now: 4000) == 8, "never more than a claim")
        slots.claimed(1)
        #expect(slots.admit(Self.fcm, claimedAt: 4000, now: 4000) == (.send, true), "FCM had work: it starts, the claimer wakes")
        _ = slots.finished(Self.fcm, now: 4001)
        #expect(slots.claimRoom(now: 5000) == 1, "found: the next probe is small again")
    }

    /// Item 8 of issue 36: a place that frees goes to the first delivery waiting for it; with
    /// none waiting, the claimer is woken at once to fill it from the store.
    @Test func aFreedPlaceGoesToTheNextWaitingOrWakesTheClaimer() {
        var slots = PushSlots(limits: Self.limits(waiting: 4, claim: 8))
        _ = Self.admit(&slots, 6, on: Self.apns)
        #expect(slots.waiting(Self.apns) == 4)
        var freed = slots.finished(Self.apns, now: 1)
        #expect(freed.handed.map(\.ticket) == [1] && freed.handed.map(\.admission) == [.send], "first come, first sent")
        #expect(!freed.wake, "the place was filled from the line")
        freed = slots.finished(Self.apns, now: 1)
        #expect(freed.handed.map(\.ticket) == [2] && freed.wake, "the line halved: claim more")
        _ = slots.finished(Self.apns, now: 1)
        _ = slots.finished(Self.apns, now: 1)
        #expect(slots.waiting(Self.apns) == 0 && slots.sending(Self.apns) == 2)
        freed = slots.finished(Self.apns, now: 1)
        #expect(freed.handed.isEmpty && freed.wake && slots.sending(Self.apns) == 1, "a free place and nobody waiting: claim at once")
        freed = slots.finished(Self.apns, now: 1)
        #expect(freed.wake && slots.sending(Self.apns) == 0)
    }

    /// A delivery that would be sent too late for its lease goes back instead.
    @Test func aDeliveryThatWaitedTooLongGoesBack() {
        var slots = PushSlots(limits: Self.limits())
        _ = Self.admit(&slots, 3, on: Self.apns)
        let freed = slots.finished(Self.apns, now: 20_000)
        #expect(freed.handed.map(\.admission) == [.putBack(.late)])
        #expect(slots.sending(Self.apns) == 1, "the place stays free")
        slots.claimed(1)
        #expect(slots.admit(Self.fcm, claimedAt: 0, now: 25_000).admission == .putBack(.late))
    }

    /// At a stop nothing more is claimed, the waiting deliveries go back, and those being sent
    /// keep their places until they finish.
    @Test func aStopSendsBackTheWaitingAndLetsTheSendingFinish() {
        var slots = PushSlots(limits: Self.limits())
        _ = Self.admit(&slots, 4, on: Self.apns)
        slots.claimed(1)
        #expect(slots.stop().sorted() == [1, 2])
        #expect(slots.claimRoom(now: 0) == 0)
        #expect(slots.admit(Self.fcm, claimedAt: 0, now: 0).admission == .putBack(.stopping), "checked after the stop: back")
        #expect(slots.sending(Self.apns) == 2 && slots.waiting(Self.apns) == 0)
        #expect(slots.finished(Self.apns, now: 0).handed.isEmpty && slots.sending(Self.apns) == 1)
        #expect(!slots.finished(Self.apns, now: 0).wake, "stopping: the claimer is not woken")
    }
}
