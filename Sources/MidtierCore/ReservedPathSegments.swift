/// First path segments the device listener serves itself (docs/device-api.md); every other
/// first segment is a destination name (docs/forwarding.md). The one list both the listener's
/// dispatch and the configuration check of destination names use.
package enum ReservedPathSegments {
    /// `config-api.svc` is the first segment of SAP's Discovery Service path (docs/device-api.md),
    /// kept free for it now that destination names may contain dots.
    package static let names: Set<String> = [
        "odata", "config", "mobileservices", "healthz", "readyz", "metrics", "admin", "config-api.svc",
    ]

    /// Whether the listener routes a request whose first path segment is `segment` (exactly as sent)
    /// to Midtier's own routes.
    package static func isOwnRoute(_ segment: Substring) -> Bool {
        names.contains(String(segment))
    }

    /// Whether `name` may not be a destination name: a reserved segment in any letter case, to
    /// be safe behind case-folding proxies.
    package static func isReserved(destinationName name: String) -> Bool {
        names.contains(name.lowercased())
    }
}
