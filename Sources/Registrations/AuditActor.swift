package import MidtierCore

/// Who made a change and from where, for the audit trail.
package struct AuditActor: Sendable, Equatable {
    /// `admin#<n>`, `user:<id>` or `system`.
    package var name: String
    /// The client address.
    package var source: String
    package init(name: String, source: String = "") {
        self.name = name
        self.source = source
    }
    package static func user(_ user: UserIdentity, source: String) -> AuditActor { AuditActor(name: "user:\(user)", source: source) }
    package static let system = AuditActor(name: "system")
}
