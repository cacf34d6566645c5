package import MidtierCore

/// A change that every instance sharing a store must apply to what it keeps in memory: a
/// registration changed or went, a user's block changed, or a user's back-end tokens were
/// purged. Instances learn of each other's changes through the store (`ChangeFeed`).
package enum StoreChange: Sendable, Equatable {
    /// A registration's state changed, or it was deleted: its back-end sessions end.
    case registration(id: String)
    /// A registration was created: memory forgets that its id was unknown.
    case created(id: String)
    /// A registration's device fields changed.
    case device(id: String)
    case block(user: UserIdentity)
    case tokens(user: UserIdentity)
    /// A registration's back-end session with a destination changed (new cookies, or ended).
    case session(registration: String, destination: String)

    /// (kind, first key, second key) as stored in `midtier_change`.
    var columns: (String, String, String) {
        switch self {
        case .registration(let id): ("registration", id, "")
        case .created(let id): ("created", id, "")
        case .device(let id): ("device", id, "")
        case .block(let user): ("block", user.realm, user.id)
        case .tokens(let user): ("tokens", user.realm, user.id)
        case .session(let registration, let destination): ("session", registration, destination)
        }
    }

    init?(kind: String, first: String, second: String) {
        switch kind {
        case "registration": self = .registration(id: first)
        case "created": self = .created(id: first)
        case "device": self = .device(id: first)
        case "block": self = .block(user: UserIdentity(realm: first, id: second))
        case "tokens": self = .tokens(user: UserIdentity(realm: first, id: second))
        case "session": self = .session(registration: first, destination: second)
        default: return nil
        }
    }
}
