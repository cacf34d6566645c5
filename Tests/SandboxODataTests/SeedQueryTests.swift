import Foundation
import SuccessFactorsSandbox
import Testing

/// The query the mobile app's payslip screen sends, percent-encoded as curl sends it.
@Suite struct SeedQueryTests {
    /// `curl -G --data-urlencode '$filter=…' …` encodes values with `%20`, `%27`, `%2C`, `%2F`.
    static let curlQuery =
        "$filter=userId%20eq%20%27100001%27"
        + "&$expand=employeePayrollRunResultsItems%2CuserIdNav%2FempInfo%2FpaymentInformationNav%2F"
        + "toPaymentInformationDetailV3%2FbankNav"
        + "&$top=5&$orderby=payDate%20desc"

    /// The same query as a browser form would encode it: `%24` for `$`, `+` for spaces.
    static let formQuery =
        "%24filter=userId+eq+%27100001%27"
        + "&%24expand=employeePayrollRunResultsItems,userIdNav/empInfo/paymentInformationNav/"
        + "toPaymentInformationDetailV3/bankNav"
        + "&%24top=5&%24orderby=payDate+desc&%24format=json"

    @Test(arguments: [curlQuery, formQuery])
    func returnsFiveNewestRunsWithItemsAndBank(query: String) throws {
        let result = get("EmployeePayrollRunResults", query)
        #expect(result.status == 200, "\(String(decoding: result.body, as: UTF8.self))")
        let body = try JSONBody(result)
        let runs = body.results
        #expect(runs.count == 5)
        #expect(body.next == nil, "5 rows fit in one page, so there is no __next")

        // Newest first: December 2025 down to August 2025.
        let payDates = runs.compactMap { milliseconds($0["payDate"]) }
        #expect(
            payDates == [
                utcMilliseconds(2025, 12, 31), utcMilliseconds(2025, 11, 30), utcMilliseconds(2025, 10, 31),
                utcMilliseconds(2025, 9, 30), utcMilliseconds(2025, 8, 31),
            ])
        #expect(
            runs.map { $0["externalCode"] as? String } == [
                "PRR-100001-2025-12", "PRR-100001-2025-11", "PRR-100001-2025-10", "PRR-100001-2025-09",
                "PRR-100001-2025-08",
            ])

        let first = runs[0]
        let metadata = try #require(first["__metadata"] as? [String: Any])
        #expect(metadata["type"] as? String == "SFOData.EmployeePayrollRunResults")
        #expect(
            metadata["uri"] as? String == serviceRoot
                + "EmployeePayrollRunResults(externalCode='PRR-100001-2025-12',"
                + "mdfSystemEffectiveStartDate=datetime'1900-01-01T00:00:00')")
        #expect(first["currency"] as? String == "USD")

        // Items, expanded as {"results": [...]}, amounts as decimal strings.
        let items = try #require((first["employeePayrollRunResultsItems"] as? [String: Any])?["results"] as? [[String: Any]])
        #expect(items.count == 6)  // December has overtime
        let amounts = items.compactMap { $0["amount"] as? String }
        #expect(amounts.count == items.count, "every amount is a JSON string")
        #expect(amounts.first == "4377.50")
        let netPay = try #require(items.first { $0["wageType"] as? String == "/559" })
        let sum = amounts.dropLast().compactMap { Decimal(string: $0) }.reduce(0, +)
        #expect(Decimal(string: netPay["amount"] as? String ?? "") == sum, "net pay is earnings minus deductions")
        #expect(items.contains { ($0["amount"] as? String)?.hasPrefix("-") == true }, "deductions are negative")

        // userIdNav (to-one) → empInfo (to-one) → paymentInformationNav (to-many)
        // → toPaymentInformationDetailV3 (to-many) → bankNav (to-one).
        let user = try #require(first["userIdNav"] as? [String: Any])
        #expect(user["firstName"] as? String == "Alice")
        #expect(user["lastName"] as? String == "Smith")
        let employment = try #require(user["empInfo"] as? [String: Any])
        #expect(employment["userId"] as? String == "100001")
        let paymentInfos = try #require(
            (employment["paymentInformationNav"] as? [String: Any])?["results"] as? [[String: Any]])
        #expect(paymentInfos.count == 1)
        let details = try #require(
            (paymentInfos[0]["toPaymentInformationDetailV3"] as? [String: Any])?["results"] as? [[String: Any]])
        #expect(details.count == 1)
        let bank = try #require(details[0]["bankNav"] as? [String: Any])
        #expect(bank["bankName"] as? String == "First Example Bank")
        #expect((bank["__metadata"] as? [String: Any])?["uri"] as? String == serviceRoot + "Bank('BANK-US-001')")

        // Navigation properties that were not expanded are deferred links.
        let deferred = (user["__metadata"] as? [String: Any])?["uri"] as? String
        #expect(deferred == serviceRoot + "User('100001')")
        let bankOfDetail = (details[0]["__metadata"] as? [String: Any])?["uri"] as? String ?? ""
        #expect(bankOfDetail.hasPrefix(serviceRoot + "PaymentInformationDetailV3(PaymentInformationV3_effectiveStartDate="))
    }

    @Test func bobsPaymentGoesToTwoBanks() throws {
        let query = "$expand=paymentInformationNav/toPaymentInformationDetailV3/bankNav"
        let employment = try JSONBody(get("User('100002')/empInfo", query, user: "100002")).d
        let infos = (employment["paymentInformationNav"] as? [String: Any])?["results"] as? [[String: Any]] ?? []
        let details = (infos.first?["toPaymentInformationDetailV3"] as? [String: Any])?["results"] as? [[String: Any]] ?? []
        #expect(details.count == 2)
        #expect(
            details.compactMap { ($0["bankNav"] as? [String: Any])?["bankName"] as? String }.sorted()
                == ["Beispiel Sparkasse", "Deutsche Beispielbank"])
        #expect(details.first?["externalCode"] as? String == "3202", "Edm.Int64 is a JSON string")
        #expect(details.first?["amount"] as? String == "300.00")
        #expect(details.last.map { $0["amount"] is NSNull } == true, "the rest goes to the account without amount")
    }

    @Test func deferredLinksPointBelowTheEntity() throws {
        let run = try #require(try JSONBody(get("EmployeePayrollRunResults", "$top=1")).results.first)
        let uri = try #require((run["__metadata"] as? [String: Any])?["uri"] as? String)
        let items = (run["employeePayrollRunResultsItems"] as? [String: Any])?["__deferred"] as? [String: Any]
        #expect(items?["uri"] as? String == uri + "/employeePayrollRunResultsItems")
        let user = (run["userIdNav"] as? [String: Any])?["__deferred"] as? [String: Any]
        #expect(user?["uri"] as? String == uri + "/userIdNav")
    }

    @Test func followsNavigationInThePath() throws {
        let january =
            "EmployeePayrollRunResults(externalCode='PRR-100001-2024-01',"
            + "mdfSystemEffectiveStartDate=datetime'1900-01-01T00:00:00')"
        let items = try JSONBody(get(january + "/employeePayrollRunResultsItems")).results
        #expect(items.map { $0["wageType"] as? String } == ["1000", "/401", "/403", "/410", "/559"])
        #expect(try JSONBody(get(january + "/userIdNav")).d["userId"] as? String == "100001")
        #expect(try JSONBody(get(january + "/currency")).d["currency"] as? String == "USD")
        #expect(String(decoding: get(january + "/employeePayrollRunResultsItems/$count").body, as: UTF8.self) == "5")
        #expect(try JSONBody(get("User(userId='100001')")).d["lastName"] as? String == "Smith")
    }
}
