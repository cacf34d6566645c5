package import MidtierStore

/// Which push service a delivery goes through, with whose credentials: one app's APNs or its
/// FCM. Each route has its own places (docs/push.md, "Delivery"), so one that answers slowly
/// holds up only its own deliveries.
package struct PushRoute: Hashable, Sendable, CustomStringConvertible {
    package var app: String
    package var provider: PushProvider

    package init(app: String, provider: PushProvider) {
        self.app = app
        self.provider = provider
    }

    package static func apns(_ app: String) -> PushRoute { PushRoute(app: app, provider: .apns) }
    package static func fcm(_ app: String) -> PushRoute { PushRoute(app: app, provider: .fcm) }

    package var description: String { "\(app)/\(provider.rawValue)" }
}

/// Where the deliveries a worker holds are, as a value (the worker keeps it behind a lock,
/// `PushDeliveryGate`): claimed and being checked, being sent on their route, or waiting for
/// a place on it. docs/push.md, "Delivery".
///
/// - Each route sends at most `sendsPerRoute` at once; at most `waitingPerRoute` more wait for
///   a place, in the order they came; a delivery beyond that goes back to the store for a
///   moment, so that it never takes the place of another route's.
/// - A claim takes as many as the routes have places for (waiting included); with nothing in
///   flight, `claim`. When every route with work is full, a probe — `probe` at first, twice as
///   many each time after, up to `claim`, at most one a `probeInterval` — finds work for another
///   route behind a full one's backlog, without putting back more than a claim a second
///   however often the worker is woken; a delivery that gets a place ends the probing.
/// - The claimer is woken (`wake`) when a send place frees with nobody waiting for it, when a
///   route's waiting line halves, and when a route starts sending: as soon as there is room.
package struct PushSlots: Sendable {
    package struct Limits: Sendable, Equatable {
        /// Requests at once to one route's push service.
        package var sendsPerRoute = 64
        /// Deliveries waiting for a place of one route, at most.
        package var waitingPerRoute = 64
        /// The most deliveries one claim takes.
        package var claim = 64
        /// What the first probe takes when every route with work is full.
        package var probe = 8
        /// The shortest time between two probes, in milliseconds.
        package var probeInterval: Int64 = 1000
        /// The longest a delivery waits for a place, in milliseconds after its claim: it is put
        /// back rather than sent later, so that its attempt (at most a minute) ends within its
        /// lease (90 seconds).
        package var longestWait: Int64 = 20_000

        package init() {}
    }

    /// Where a checked delivery goes.
    package enum Admission: Equatable, Sendable {
        case send
        /// Waits for a place; `ticket` names it when one frees.
        case wait(ticket: Int)
        /// Back to the store, not sent.
        case putBack(PutBack)
    }

    package enum PutBack: Equatable, Sendable {
        /// Its route's places and waiting line are full.
        case busy
        /// It waited for a place as long as its lease allows.
        case late
        /// The worker is stopping.
        case stopping
    }

    struct Waiter {
        var ticket: Int
        var claimedAt: Int64
    }

    struct Route {
        var sending = 0
        var waiting: [Waiter] = []
    }

    package let limits: Limits
    /// Claimed, and not yet on a route (being checked).
    package private(set) var unrouted = 0
    private var routes: [PushRoute: Route] = [:]
    package private(set) var stopping = false
    private var nextTicket = 0
    private var probeSize: Int
    private var lastProbe: Int64?

    package init(limits: Limits = Limits()) {
        self.limits = limits
        probeSize = limits.probe
    }

    package func sending(_ route: PushRoute) -> Int { routes[route]?.sending ?? 0 }
    package func waiting(_ route: PushRoute) -> Int { routes[route]?.waiting.count ?? 0 }

    /// The places left on the routes with work, waiting included, less the deliveries being
    /// checked (they will take some); `claim` with nothing in flight.
    private var room: Int {
        let capacity =
            routes.isEmpty
            ? limits.claim
            : routes.values.reduce(0) { $0 + (limits.sendsPerRoute - $1.sending) + (limits.waitingPerRoute - $1.waiting.count) }
        return max(0, min(limits.claim, capacity) - unrouted)
    }

    /// How many deliveries a claim may take now (the claim is then made): none while stopping;
    /// the room, or a probe when every route with work is full and nothing is being checked.
    package mutating func claimRoom(now: Int64) -> Int {
        guard !stopping else { return 0 }
        let room = room
        if room > 0 || unrouted > 0 { return room }
        if let lastProbe, now - lastProbe < limits.probeInterval { return 0 }
        lastProbe = now
        defer { probeSize = min(limits.claim, probeSize * 2) }
        return probeSize
    }

    /// A claim took `count` deliveries.
    package mutating func claimed(_ count: Int) {
        unrouted += count
    }

    /// A claimed delivery, checked, goes through `route`: sent now if the route has a place,
    /// else it waits if the line is short, else it goes back (so it does if it was claimed too
    /// long ago to be sent within its lease). `wake`: the claimer may claim more.
    package mutating func admit(_ route: PushRoute, claimedAt: Int64, now: Int64) -> (admission: Admission, wake: Bool) {
        let before = room
        unrouted -= 1
        guard !stopping else { return (.putBack(.stopping), false) }
        guard now - claimedAt < limits.longestWait else { return (.putBack(.late), opened(from: before)) }
        var state = routes[route] ?? Route()
        let admission: Admission
        if state.sending < limits.sendsPerRoute {
            state.sending += 1
            admission = .send
            probeSize = limits.probe
        } else if state.waiting.count < limits.waitingPerRoute {
            nextTicket += 1
            state.waiting.append(Waiter(ticket: nextTicket, claimedAt: claimedAt))
            admission = .wait(ticket: nextTicket)
        } else {
            admission = .putBack(.busy)
        }
        let starts = state.sending == 1 && admission == .send
        routes[route] = state.sending == 0 && state.waiting.isEmpty ? nil : state
        return (admission, starts || opened(from: before))
    }

    /// A claimed delivery that goes to no route (skipped, or failed before sending).
    package mutating func settled() -> Bool {
        let before = room
        unrouted -= 1
        return opened(from: before)
    }

    /// A send on `route` ended: its place goes to the first waiting delivery (those that waited
    /// too long go back instead, `.late`). What became of each waiting delivery this
    /// decided, and whether to wake the claimer.
    package mutating func finished(_ route: PushRoute, now: Int64) -> (handed: [(ticket: Int, admission: Admission)], wake: Bool) {
        guard var state = routes[route] else { return ([], false) }
        let before = room
        var handed: [(ticket: Int, admission: Admission)] = []
        var placed = false
        while !placed, !state.waiting.isEmpty {
            let next = state.waiting.removeFirst()
            if now - next.claimedAt < limits.longestWait {
                handed.append((next.ticket, .send))
                placed = true
            } else {
                handed.append((next.ticket, .putBack(.late)))
            }
        }
        if !placed { state.sending -= 1 }
        let halved = placed && state.waiting.count == limits.waitingPerRoute / 2
        routes[route] = state.sending == 0 && state.waiting.isEmpty ? nil : state
        // A freed place that no delivery here waits for is filled from the store at once.
        return (handed, !stopping && (!placed || halved || opened(from: before)))
    }

    /// Stops claiming: every waiting delivery goes back (their tickets), and those checked
    /// from now on too; the ones being sent finish.
    package mutating func stop() -> [Int] {
        stopping = true
        var tickets: [Int] = []
        for (route, state) in routes {
            tickets += state.waiting.map(\.ticket)
            routes[route] = state.sending == 0 ? nil : Route(sending: state.sending)
        }
        return tickets
    }

    /// Whether the room grew to half a claim or more from below it.
    private func opened(from before: Int) -> Bool {
        !stopping && before < limits.claim / 2 && room >= limits.claim / 2
    }
}
