import Foundation
import SuccessFactorsSandbox
import Testing

/// `$select`, `$filter` and `$orderby`.
@Suite struct QueryOptionTests {
    private func codes(_ path: String, _ query: String, user: String = "100001") throws -> [String] {
        let result = get(path, query, user: user, service: PayrollODataService(pageSize: 1000))
        try #require(result.status == 200, "\(query): \(String(decoding: result.body, as: UTF8.self))")
        return try JSONBody(result).results.compactMap { $0["externalCode"] as? String }
    }

    // MARK: $select

    @Test func selectKeepsOnlyTheNamedProperties() throws {
        let runs = try JSONBody(get("EmployeePayrollRunResults", "$select=externalCode,payDate&$top=3")).results
        #expect(runs.count == 3)
        for run in runs {
            #expect(Set(run.keys) == ["__metadata", "externalCode", "payDate"])
        }
    }

    @Test func selectReachesIntoExpandedNavigation() throws {
        let query =
            "$select=externalCode,employeePayrollRunResultsItems/amount,employeePayrollRunResultsItems/wageType"
            + "&$expand=employeePayrollRunResultsItems&$top=2"
        let runs = try JSONBody(get("EmployeePayrollRunResults", query)).results
        #expect(runs.count == 2)
        for run in runs {
            #expect(Set(run.keys) == ["__metadata", "externalCode", "employeePayrollRunResultsItems"])
            let items = (run["employeePayrollRunResultsItems"] as? [String: Any])?["results"] as? [[String: Any]] ?? []
            #expect(!items.isEmpty)
            #expect(items.allSatisfy { Set($0.keys) == ["__metadata", "amount", "wageType"] })
        }
    }

    @Test func selectingANavigationPropertyGivesItsLink() throws {
        let run = try #require(try JSONBody(get("EmployeePayrollRunResults", "$select=payDate,userIdNav&$top=1")).results.first)
        #expect(Set(run.keys) == ["__metadata", "payDate", "userIdNav"])
        #expect((run["userIdNav"] as? [String: Any])?["__deferred"] != nil)
        let star = try #require(try JSONBody(get("User", "$select=*")).results.first)
        #expect(star["email"] as? String == "asmith@example.com")
        #expect(star["empInfo"] != nil)
    }

    @Test func selectErrors() throws {
        let unknown = get("EmployeePayrollRunResults", "$select=externalCode,salary")
        #expect(unknown.status == 400)
        #expect(try JSONBody(unknown).errorCode == "COE_PROPERTY_NOT_FOUND")
        let notExpanded = get("EmployeePayrollRunResults", "$select=employeePayrollRunResultsItems/amount")
        #expect(notExpanded.status == 400)
        #expect(try JSONBody(notExpanded).errorMessage?.contains("$expand=employeePayrollRunResultsItems") == true)
    }

    // MARK: $filter

    @Test func comparisonOperatorsOnDates() throws {
        #expect(try codes("EmployeePayrollRunResults", "$filter=payDate ge datetime'2025-01-01T00:00:00'").count == 12)
        #expect(
            try codes("EmployeePayrollRunResults", "$filter=payDate gt datetime'2025-11-30T00:00:00'")
                == ["PRR-100001-2025-12"])
        #expect(
            try codes("EmployeePayrollRunResults", "$filter=payDate lt datetime'2024-02-29T00:00:00'")
                == ["PRR-100001-2024-01"])
        #expect(try codes("EmployeePayrollRunResults", "$filter=payDate le datetime'2024-02-29T00:00:00'").count == 2)
        #expect(
            try codes("EmployeePayrollRunResults", "$filter=payDate eq datetime'2024-02-29'")
                == ["PRR-100001-2024-02"])
        #expect(try codes("EmployeePayrollRunResults", "$filter=payDate ne datetime'2024-02-29T00:00'").count == 23)
        // SuccessFactors also takes quoted dates.
        #expect(try codes("EmployeePayrollRunResults", "$filter=startDateWhenPaid ge '2025-07-01'").count == 6)
    }

    @Test func booleanOperatorsAndParentheses() throws {
        let between = "$filter=payDate ge datetime'2025-01-01T00:00:00' and payDate le datetime'2025-06-30T00:00:00'"
        #expect(try codes("EmployeePayrollRunResults", between).count == 6)
        let either = "$filter=externalCode eq 'PRR-100001-2024-03' or externalCode eq 'PRR-100001-2025-03'"
        #expect(try codes("EmployeePayrollRunResults", either) == ["PRR-100001-2024-03", "PRR-100001-2025-03"])
        let negated = "$filter=not (payDate lt datetime'2025-12-01T00:00:00')"
        #expect(try codes("EmployeePayrollRunResults", negated) == ["PRR-100001-2025-12"])
        let grouped =
            "$filter=(externalCode eq 'PRR-100001-2024-03' or externalCode eq 'PRR-100001-2025-03') "
            + "and payDate gt datetime'2025-01-01T00:00:00'"
        #expect(try codes("EmployeePayrollRunResults", grouped) == ["PRR-100001-2025-03"])
        #expect(try codes("EmployeePayrollRunResults", "$filter=isVoid eq false").count == 24)
        #expect(try codes("EmployeePayrollRunResults", "$filter=not isVoid").count == 24)
        #expect(try codes("EmployeePayrollRunResults", "$filter=currency eq 'USD' and userId eq '100001'").count == 24)
    }

    @Test func stringLiteralsWithQuotesAndIn() throws {
        #expect(try codes("EmployeePayrollRunResults", "$filter=externalName eq 'O''Neil''s payroll'").isEmpty)
        #expect(
            try codes("EmployeePayrollRunResults", "$filter=externalName eq 'Payroll March 2025'")
                == ["PRR-100001-2025-03"])
        // What Tests/e2e/isolation.py sends: a nonce no run is named.
        #expect(try codes("EmployeePayrollRunResults", "$filter=externalName ne 'nonce-4711'").count == 24)
        #expect(
            try codes("EmployeePayrollRunResults", "$filter=externalCode in ('PRR-100001-2024-05','PRR-100001-2024-06')")
                .count == 2)
        // SuccessFactors' own form, without parentheses.
        #expect(
            try codes("EmployeePayrollRunResults", "$filter=externalCode in 'PRR-100001-2024-05','PRR-100001-2024-06'")
                .count == 2)
        #expect(
            try codes("EmployeePayrollRunResults", "$filter=payDate in (datetime'2024-02-29', '2025-03-31')")
                == ["PRR-100001-2024-02", "PRR-100001-2025-03"])
        // The README's demo filter.
        #expect(try codes("EmployeePayrollRunResults", "$filter=userId eq '100001'").count == 24)
    }

    @Test func dateRangesAsSuccessFactorsClientsWriteThem() throws {
        let range =
            "$filter=userId eq '100001' and (payDate ge datetime'2025-01-01T00:00:00' "
            + "and payDate lt datetime'2025-04-01T00:00:00') and not isVoid"
        #expect(
            try codes("EmployeePayrollRunResults", range)
                == ["PRR-100001-2025-01", "PRR-100001-2025-02", "PRR-100001-2025-03"])
        let modified = "$filter=lastModifiedDateTime ge datetimeoffset'2000-01-01T00:00:00Z'"
        #expect(try codes("EmployeePayrollRunResults", modified).count == 24)
    }

    @Test func numbersOnDecimalAmounts() throws {
        let items = "EmployeePayrollRunResultsItems"
        #expect(try codes(items, "$filter=wageType eq '/559'").count == 24)
        #expect(try codes(items, "$filter=amount lt 0").count == 72)
        #expect(try codes(items, "$filter=amount gt 4300 and wageType eq '1000'").count == 12, "2025 salary")
        #expect(try codes(items, "$filter=amount eq 4250.00M").count == 12)
        #expect(try codes(items, "$filter=amount eq -185.00").count == 24)
        #expect(try codes(items, "$filter=quantity ne null").count == 8)
        #expect(try codes(items, "$filter=quantity eq null").count == 120)
    }

    @Test func propertyPathsThroughNavigation() throws {
        #expect(try codes("EmployeePayrollRunResults", "$filter=userIdNav/firstName eq 'Alice'").count == 24)
        #expect(try codes("EmployeePayrollRunResults", "$filter=userIdNav/empInfo/userId eq '100001'").count == 24)
        // To-many: a run matches when any of its items does (overtime months).
        #expect(try codes("EmployeePayrollRunResults", "$filter=employeePayrollRunResultsItems/wageType eq '1100'").count == 8)
        let details = get(
            "PaymentInformationDetailV3", "$filter=bankNav/bankName eq 'Beispiel Sparkasse'", user: "100002")
        #expect(try JSONBody(details).results.count == 1)
    }

    // MARK: $orderby

    @Test func ordersByManyProperties() throws {
        let items = try JSONBody(
            get(
                "EmployeePayrollRunResultsItems", "$orderby=wageType desc,amount asc&$top=3")
        ).results
        #expect(items.map { $0["wageType"] as? String } == ["1100", "1100", "1100"])
        let amounts = try JSONBody(get("EmployeePayrollRunResultsItems", "$orderby=amount asc,externalCode desc&$top=2")).results
        // The largest deduction: 18 % income tax on 4377.50 + 400.00 overtime (2025, overtime months).
        #expect(amounts.map { $0["amount"] as? String } == ["-859.95", "-859.95"])
        #expect(amounts.map { $0["externalCode"] as? String } == ["PRR-100001-2025-12-03", "PRR-100001-2025-09-03"])
        let byName = try codes("EmployeePayrollRunResults", "$orderby=userIdNav/lastName,payDate desc")
        #expect(byName.first == "PRR-100001-2025-12")
    }
}
