import Foundation
import SuccessFactorsSandbox
import Testing

/// "Everyone in self": a user sees their own records only.
@Suite struct VisibilityTests {
    @Test(arguments: ["100001", "100002", "100003"])
    func payrollRunsAreOnlyTheUsersOwn(user: String) throws {
        let pages = try allPages("EmployeePayrollRunResults", "$inlinecount=allpages", user: user)
        let runs = pages.flatMap(\.results)
        #expect(runs.count == 24)
        #expect(pages.first?.d["__count"] as? String == "24")
        #expect(runs.allSatisfy { $0["userId"] as? String == user })
    }

    @Test func filteringForAnotherUserFindsNothing() throws {
        for query in [
            "$filter=userId%20eq%20%27100002%27",
            "$filter=userId eq '100002' or userId eq '100003'&$inlinecount=allpages",
            "$filter=userIdNav/firstName eq 'Bob'",
            "$filter=userId ne '100001'",
        ] {
            let result = get("EmployeePayrollRunResults", query)
            #expect(result.status == 200)
            let body = try JSONBody(result)
            #expect(body.results.isEmpty, "query \(query) leaked rows")
        }
        let counted = try JSONBody(get("EmployeePayrollRunResults", "$filter=userId eq '100002'&$inlinecount=allpages"))
        #expect(counted.d["__count"] as? String == "0")
    }

    @Test func anotherUsersKeyIsNotFound() throws {
        let own = get("User('100001')")
        #expect(own.status == 200)
        #expect(try JSONBody(own).d["firstName"] as? String == "Alice")

        let other = get("User('100002')")
        #expect(other.status == 404)
        #expect(try JSONBody(other).errorCode == "NotFoundException")
        // Same answer as for a user that does not exist at all.
        #expect(get("User('999999')").status == 404)

        let bobsRun =
            "EmployeePayrollRunResults(externalCode='PRR-100002-2024-01',"
            + "mdfSystemEffectiveStartDate=datetime'1900-01-01T00:00:00')"
        #expect(get(bobsRun, user: "100001").status == 404)
        #expect(get(bobsRun, user: "100002").status == 200)
        #expect(get(bobsRun + "/employeePayrollRunResultsItems", user: "100001").status == 404)
    }

    @Test func everyEntitySetShowsOnlyOwnRecords() throws {
        let users = try JSONBody(get("User")).results
        #expect(users.map { $0["userId"] as? String } == ["100001"])

        let employments = try JSONBody(get("EmpEmployment", user: "100002")).results
        #expect(employments.map { $0["userId"] as? String } == ["100002"])

        let paymentInfos = try JSONBody(get("PaymentInformationV3", user: "100003")).results
        #expect(paymentInfos.map { $0["worker"] as? String } == ["100003"])

        let details = try JSONBody(get("PaymentInformationDetailV3", user: "100002")).results
        #expect(details.count == 2)
        #expect(details.allSatisfy { $0["PaymentInformationV3_worker"] as? String == "100002" })

        let items = try allPages("EmployeePayrollRunResultsItems", nil).flatMap(\.results)
        #expect(!items.isEmpty)
        #expect(items.allSatisfy { ($0["EmployeePayrollRunResults_externalCode"] as? String)?.hasPrefix("PRR-100001-") == true })

        // Banks are reference data, readable by everyone.
        #expect(try JSONBody(get("Bank")).results.count == 4)
    }

    @Test func countsOnlyOwnRecords() {
        let runs = get("EmployeePayrollRunResults/$count")
        #expect(runs.status == 200)
        #expect(runs.contentType == "text/plain;charset=utf-8")
        #expect(String(decoding: runs.body, as: UTF8.self) == "24")
        // Alice: 24 runs of 5 items, plus overtime in 8 of them.
        #expect(String(decoding: get("EmployeePayrollRunResultsItems/$count").body, as: UTF8.self) == "128")
        #expect(String(decoding: get("User/$count", user: "100003").body, as: UTF8.self) == "1")
    }
}
