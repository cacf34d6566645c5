import ConfigurationFiles
import MidtierCore
import Testing

/// `implicitRegistration` in an app file (docs/configuration.md): off unless set, a boolean.
@Suite struct ImplicitRegistrationSettingTests {
    @Test func offByDefaultAndReadWhenSet() throws {
        #expect(try Fixture().load().apps["com.example.payroll"]?.implicitRegistration == false)
        let fixture = Fixture()
        fixture.set(payroll, "implicitRegistration", "true")
        #expect(try fixture.load().apps["com.example.payroll"]?.implicitRegistration == true)
    }

    @Test func aValueThatIsNotABooleanIsAProblemNamingTheKey() {
        let fixture = Fixture()
        fixture.set(payroll, "implicitRegistration", #""sometimes""#)
        let problems = fixture.problems()
        #expect(
            problems.contains { $0.key == "implicitRegistration" && $0.description.contains("true or false") },
            "\(problems.map(\.description))")
    }
}
