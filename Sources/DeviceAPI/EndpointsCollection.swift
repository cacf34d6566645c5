import Callers
import Foundation
import MidtierCore

/// The registration service's `Endpoints` collection (docs/device-api.md, "Destinations"): the
/// destinations an app may call, as SAP's `SAPcpmsDestinations` loads them —
/// `…/odata/applications/{v}/{appId}/Endpoints` and `Endpoints('{name}')`.
///
/// `RemoteURL` is where the device calls the destination: Midtier's own
/// `{publicURL}/{EndpointName}`, never the back end's address, which stays with Midtier
/// together with the back end's credentials.
enum EndpointsCollection {
    /// The app's destinations that are configured, sorted by name, as Endpoint entities.
    static func entities(app: AppConfiguration, configuration: MidtierConfiguration, version: String) -> [ODataEntity] {
        app.destinations.filter { configuration.destinations[$0] != nil }.sorted().map {
            entity(name: $0, app: app.id, version: version, publicURL: configuration.server.publicURL)
        }
    }

    /// One Endpoint entity, or nil when `name` is not a configured destination of the app
    /// (compared by its exact bytes, as destination names are everywhere).
    static func entity(named name: String, app: AppConfiguration, configuration: MidtierConfiguration, version: String) -> ODataEntity? {
        guard let known = app.destinations.first(where: { UserIdentity.sameBytes($0, name) }),
            configuration.destinations[known] != nil
        else { return nil }
        return entity(name: known, app: app.id, version: version, publicURL: configuration.server.publicURL)
    }

    /// `Endpoints('name')` → `name` (OData v2 key syntax, `''` for a quote).
    static func key(_ entity: String) -> String? {
        guard entity.hasPrefix("Endpoints('"), entity.hasSuffix("')"), entity.count > "Endpoints('')".count else { return nil }
        return entity.dropFirst("Endpoints('".count).dropLast(2).replacingOccurrences(of: "''", with: "'")
    }

    /// The Endpoint entity's properties and their kinds, for `$metadata`.
    static var sample: ODataEntity { entity(name: "", app: "", version: "v1", publicURL: "") }

    static func entity(name: String, app: String, version: String, publicURL: String) -> ODataEntity {
        ODataEntity(
            uri: "\(publicURL)/odata/applications/\(version)/\(app)/Endpoints('\(name.replacingOccurrences(of: "'", with: "''"))')",
            type: "applications.Endpoint",
            properties: [
                "EndpointName": .string(name),
                "RemoteURL": .string("\(publicURL)/\(name)"),
                // Every call through Midtier is signed in (docs/device-api.md, "Signing in").
                "AnonymousAccess": .bool(false),
            ])
    }
}
