import ConfigurationFiles
import Foundation
import MidtierCore
import Testing

/// What `check-config` and `serve` warn about: configurations that load but probably do not
/// do what their owner wants (docs/configuration.md).
@Suite struct WarningTests {
    static let key = Data(repeating: 1, count: 32).base64EncodedString()

    func warnings(_ fixture: Fixture) throws -> [ConfigWarning] {
        let configuration = try fixture.load()
        return ConfigurationLoader(directory: fixture.config, environment: fixture.environment).warnings(for: configuration)
    }

    /// On PostgreSQL without keys, CSRF sessions stay per instance: behind a load balancer
    /// without affinity a CSRF token fetched through one instance fails on a write through
    /// another. A warning names the key and the docs section; it is not a problem (one
    /// instance on PostgreSQL works).
    @Test func postgresWithoutBackendSessionKeysIsWarnedAbout() throws {
        let fixture = Fixture()
        fixture.set("midtier.json", "store", #""postgres://midtier@db.example/midtier?sslmode=require""#)
        let found = try warnings(fixture)
        #expect(found.count == 1)
        let warning = try #require(found.first)
        #expect(warning.file == fixture.path("midtier.json"))
        #expect(warning.key == "backendSessionKeys")
        #expect(warning.message.contains("docs/configuration.md#backendsessionkeys"), "message: \(warning.message)")
        #expect(warning.message.contains("each instance"), "message: \(warning.message)")
        #expect(warning.description == "\(fixture.path("midtier.json")): backendSessionKeys: warning: \(warning.message)")
    }

    @Test func postgresWithKeysAndSQLiteWithoutAreNotWarnedAbout() throws {
        let fixture = Fixture()
        #expect(try warnings(fixture).isEmpty, "SQLite: one instance owns the store")
        fixture.set("midtier.json", "store", #""postgres://midtier@db.example/midtier?sslmode=require""#)
        fixture.set("midtier.json", "backendSessionKeys", "[\"\(Self.key)\"]")
        #expect(try warnings(fixture).isEmpty)
    }
}
