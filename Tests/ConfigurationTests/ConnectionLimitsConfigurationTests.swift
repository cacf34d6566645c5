import ConfigurationFiles
import MidtierCore
import Testing

/// `requestHeadTimeoutSeconds`, `idleTimeoutSeconds`, `requestBodyTimeoutSeconds`,
/// `maxConnectionsPerAddress` in `midtier.json` (docs/configuration.md).
@Suite struct ConnectionLimitsConfigurationTests {
    @Test func defaultsWhenAbsent() throws {
        let limits = try Fixture().load().server.connectionLimits
        #expect(limits == ConnectionLimits(requestHeadSeconds: 20, idleSeconds: 75, requestBodySeconds: 30, maxConnectionsPerAddress: 100))
    }

    @Test func givenValuesAreRead() throws {
        let fixture = Fixture()
        fixture.set(midtier, "requestHeadTimeoutSeconds", "5")
        fixture.set(midtier, "idleTimeoutSeconds", #""120""#)
        fixture.set(midtier, "requestBodyTimeoutSeconds", "90")
        fixture.set(midtier, "maxConnectionsPerAddress", "16")
        let limits = try fixture.load().server.connectionLimits
        #expect(limits == ConnectionLimits(requestHeadSeconds: 5, idleSeconds: 120, requestBodySeconds: 90, maxConnectionsPerAddress: 16))
    }

    @Test(arguments: [
        ("requestHeadTimeoutSeconds", "0", "must be a whole number from 1 to 3600"),
        ("requestHeadTimeoutSeconds", "2.5", "must be a whole number from 1 to 3600"),
        ("idleTimeoutSeconds", "86401", "must be a whole number from 1 to 86400"),
        ("idleTimeoutSeconds", "null", "must be a whole number from 1 to 86400"),
        ("requestBodyTimeoutSeconds", "-1", "must be a whole number from 1 to 3600"),
        ("requestBodyTimeoutSeconds", "true", "must be a whole number from 1 to 3600"),
        ("maxConnectionsPerAddress", "0", "must be a whole number from 1 to 1000000"),
        ("maxConnectionsPerAddress", #""many""#, "must be a whole number from 1 to 1000000"),
    ])
    func badValuesNameFileAndKey(key: String, value: String, message: String) {
        let fixture = Fixture()
        fixture.set(midtier, key, value)
        let problems = fixture.problems()
        #expect(problems.count == 1, "\(problems.map(\.description))")
        #expect(problems.first?.file == fixture.path(midtier))
        #expect(problems.first?.key == key)
        #expect(problems.first?.message.contains(message) == true, "\(problems.map(\.description))")
    }
}
