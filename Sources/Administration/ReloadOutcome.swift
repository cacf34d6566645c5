/// What reloading the configuration did.
package enum ReloadOutcome: Sendable {
    case reloaded(apps: Int, destinations: Int, users: Int)
    /// The new files have problems (`file: key: what`); the old configuration stays in force.
    case rejected([String])
}
