import Foundation
import SuccessFactorsSandbox
import Testing

/// The demo data set is complete, realistic and deterministic.
@Suite struct DemoDataTests {
    let data = PayrollData.demo

    @Test func hasThreeDistinctUsers() {
        #expect(data.userIds == ["100001", "100002", "100003"])
        #expect(data.users.map { "\($0.firstName) \($0.lastName)" } == ["Alice Smith", "Bob Jones", "Carol White"])
        #expect(data.employments.count == 3)
        #expect(data.paymentInformation.map(\.details.count) == [1, 2, 1])
        let bankCodes = Set(data.banks.map(\.externalCode))
        #expect(data.paymentInformation.flatMap(\.details).allSatisfy { bankCodes.contains($0.bank) })
    }

    @Test(arguments: ["100001", "100002", "100003"])
    func everyUserHas24MonthlyRuns(user: String) throws {
        let runs = data.payrollRuns.filter { $0.userId == user }
        #expect(runs.count == 24)
        #expect(Set(runs.map(\.externalCode)).count == 24)
        for run in runs {
            #expect((4...6).contains(run.items.count))
            let amounts = run.items.compactMap { Decimal(string: $0.amount) }
            #expect(amounts.count == run.items.count)
            let net = try #require(run.items.last)
            #expect(net.wageType == "/559")
            #expect(Decimal(string: net.amount) == amounts.dropLast().reduce(0, +))
            #expect(run.items.allSatisfy { $0.amount.split(separator: ".").last?.count == 2 })
            #expect(run.periodStart <= run.periodEnd)
            #expect(run.payDate == run.periodEnd)
        }
        let payDates = runs.map(\.payDate).sorted()
        let first = try #require(payDates.first)
        let last = try #require(payDates.last)
        #expect(first == Date(timeIntervalSince1970: Double(utcMilliseconds(2024, 1, 31)) / 1000))
        #expect(last == Date(timeIntervalSince1970: Double(utcMilliseconds(2025, 12, 31)) / 1000))
    }

    @Test func answersAreDeterministic() {
        let query = "$expand=employeePayrollRunResultsItems,userIdNav/empInfo&$orderby=payDate desc"
        let first = get("EmployeePayrollRunResults", query, service: PayrollODataService())
        let second = get("EmployeePayrollRunResults", query, service: PayrollODataService())
        #expect(first.body == second.body)
        #expect(get("$metadata").body == get("$metadata").body)
    }

    @Test func extraEmployeesEachSeeTheirOwnRuns() throws {
        let data = PayrollData.demo(extraEmployees: 5)
        #expect(data.userIds == ["100001", "100002", "100003", "200001", "200002", "200003", "200004", "200005"])
        #expect(data.payrollRuns.count == 8 * 24)
        #expect(Set(data.payrollRuns.map(\.externalCode)).count == 8 * 24)
        let service = PayrollODataService(data: data, pageSize: 50)
        for user in ["200001", "200005"] {
            let runs = try JSONBody(get("EmployeePayrollRunResults", "$top=50", user: user, service: service)).results
            #expect(runs.count == 24)
            #expect(runs.allSatisfy { $0["userId"] as? String == user })
        }
        #expect(try JSONBody(get("EmployeePayrollRunResults", user: "200006", service: service)).results.isEmpty)
        #expect(PayrollData.demo(extraEmployees: 0).userIds == PayrollData.demo.userIds)
    }

    @Test func customDataIsServed() throws {
        let day = Date(timeIntervalSince1970: 1_717_200_000)
        let custom = PayrollData(
            users: [
                .init(
                    userId: "u1", username: "u1", firstName: "Uma", lastName: "One", email: "u1@example.com",
                    title: "Tester", department: "QA", division: "Corp", location: "Here", country: "Nowhere",
                    timeZone: "UTC", defaultLocale: "en_US", hireDate: day, lastModified: day)
            ],
            employments: [], paymentInformation: [], banks: [],
            payrollRuns: [
                .init(
                    externalCode: "R1", externalName: "Run 1", userId: "u1", employmentId: "u1", companyId: "C",
                    payrollProviderId: "P", payrollId: "X", payDate: day, periodStart: day, periodEnd: day,
                    currency: "CHF",
                    items: [.init(externalCode: "R1-1", externalName: "Pay", wageType: "1000", amount: "1.50")],
                    lastModified: day)
            ])
        #expect(custom.userIds == ["u1"])
        let service = PayrollODataService(data: custom)
        let runs = try JSONBody(get("EmployeePayrollRunResults", "$expand=employeePayrollRunResultsItems", user: "u1", service: service)).results
        #expect(runs.count == 1)
        #expect(runs.first?["payDate"] as? String == "/Date(1717200000000)/")
        let items = (runs.first?["employeePayrollRunResultsItems"] as? [String: Any])?["results"] as? [[String: Any]]
        #expect(items?.first?["amount"] as? String == "1.50")
        #expect(try JSONBody(get("User('u1')/empInfo", user: "u1", service: service)).errorCode == "NotFoundException")
    }
}
