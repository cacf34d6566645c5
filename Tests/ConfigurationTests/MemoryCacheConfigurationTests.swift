import ConfigurationFiles
import MidtierCore
import Testing

/// `memoryCache` in `midtier.json` (docs/configuration.md, docs/operations.md "Memory").
@Suite struct MemoryCacheConfigurationTests {
    @Test func defaultsWhenAbsent() throws {
        #expect(try Fixture().load().server.memoryCache == MemoryCacheSettings(registrations: 500_000, unknownIds: 100_000, users: 500_000))
    }

    @Test func givenValuesAreRead() throws {
        let fixture = Fixture()
        fixture.set(midtier, "memoryCache", #"{"registrations": 2000000, "unknownIds": 5000}"#)
        #expect(try fixture.load().server.memoryCache == MemoryCacheSettings(registrations: 2_000_000, unknownIds: 5_000, users: 500_000))
    }

    @Test(arguments: [
        (#"{"registrations": 0}"#, "memoryCache.registrations", "must be a whole number from 1 to 100000000"),
        (#"{"users": "many"}"#, "memoryCache.users", "must be a whole number from 1 to 100000000"),
        (#"{"unknownIds": 1.5}"#, "memoryCache.unknownIds", "must be a whole number from 1 to 100000000"),
        (#"{"registration": 10}"#, "memoryCache.registration", "unknown"),
        ("[]", "memoryCache", "object"),
    ])
    func badValuesNameFileAndKey(value: String, key: String, message: String) {
        let fixture = Fixture()
        fixture.set(midtier, "memoryCache", value)
        let problems = fixture.problems()
        #expect(problems.count == 1, "\(problems.map(\.description))")
        #expect(problems.first?.key == key, "\(problems.map(\.description))")
        #expect(problems.first?.message.contains(message) == true, "\(problems.map(\.description))")
    }
}
