import Foundation
import SuccessFactorsSandbox
import Testing

/// Bad requests answer SuccessFactors-style errors; no input crashes the service.
@Suite struct ErrorTests {
    private func error(
        _ path: String, _ query: String? = nil, method: String = "GET"
    ) throws -> (status: Int, code: String?, message: String) {
        let result = PayrollODataService().handle(
            method: method, path: path, query: query, serviceRoot: serviceRoot, user: "100001")
        let body = try JSONBody(result)
        return (result.status, body.errorCode, body.errorMessage ?? "")
    }

    @Test func badFilterIsBadRequestWithAClearReason() throws {
        let missingOperand = try error("EmployeePayrollRunResults", "$filter=userId%20eq")
        #expect(missingOperand.status == 400)
        #expect(missingOperand.code == "COE_GENERAL_BAD_REQUEST")
        #expect(missingOperand.message.contains("$filter"))
        #expect(missingOperand.message.contains("expected"))

        let unterminated = try error("EmployeePayrollRunResults", "$filter=userId eq '100001")
        #expect(unterminated.status == 400)
        #expect(unterminated.message.contains("no closing quote"))

        let unknownProperty = try error("EmployeePayrollRunResults", "$filter=salary gt 100")
        #expect(unknownProperty.status == 400)
        #expect(unknownProperty.code == "COE_PROPERTY_NOT_FOUND")
        #expect(unknownProperty.message.contains("salary"))

        let unquoted = try error("EmployeePayrollRunResults", "$filter=userId eq 100001")
        #expect(unquoted.status == 400)
        #expect(unquoted.message.contains("Quote string literals"))

        let badDate = try error("EmployeePayrollRunResults", "$filter=payDate gt datetime'2024-02-30T00:00:00'")
        #expect(badDate.status == 400)
        #expect(badDate.message.contains("not a valid date"))

        for filter in [
            "userId", "payDate gt null", "userId eq '1' and", "(userId eq '1'", "userId eq '1')",
            "userId eq '1' xor userId eq '2'", "userId eq 'a' eq 'b'", "userIdNav eq '1'",
            "amount add 1 eq 2", "userId eq @p", "userId eq guid'123'", "1", "-", "payDate eq 2024-01-01",
            "amount eq 1e3", "amount eq 1.5D", "userId in (userId)", "userId in ()", "userId in ('1'",
        ] {
            let answer = try error("EmployeePayrollRunResults", "$filter=" + filter)
            #expect(answer.status == 400, "\(filter) should be rejected")
            #expect(!answer.message.isEmpty)
        }
    }

    /// The sandbox does not support functions in `$filter`; calling one is a 400 that says so,
    /// whatever the function and its arguments.
    @Test(arguments: [
        "startswith(externalName,'Payroll Ja')", "endswith(externalName,'2025')", "substringof('2024',externalCode)",
        "tolower(currency) eq 'usd'", "toupper(currency) eq 'USD'", "trim(currency) eq 'USD'",
        "userId eq '1' and startswith(userId)", "not endswith(externalCode,'-03')", "foo(userId)", "year(payDate) eq 2025",
        "length(userId) eq 6", "userId eq tolower('100001')",
    ])
    func functionsAreRefusedClearly(filter: String) throws {
        let answer = try error("EmployeePayrollRunResults", "$filter=" + filter)
        #expect(answer.status == 400)
        #expect(answer.code == "COE_GENERAL_BAD_REQUEST")
        #expect(answer.message.hasPrefix("Invalid $filter: "))
        #expect(answer.message.contains("is a function call"))
        #expect(answer.message.contains("does not support functions in $filter"))
        let name = String(filter.split(separator: "(")[0].split(separator: " ").last ?? "")
        #expect(answer.message.contains("\(name)(…) at position"), "\(answer.message)")
    }

    @Test func otherBadOptions() throws {
        for query in [
            "$top=-1", "$top=abc", "$top=", "$skip=1.5", "$skiptoken=x", "$inlinecount=some", "$format=atom",
            "$orderby=payDate sideways", "$orderby=employeePayrollRunResultsItems/amount", "$expand=",
            "$unknown=1", "$top=1&$top=2", "$filter=%ZZ", "$filter=%FF%FE",
        ] {
            let answer = try error("EmployeePayrollRunResults", query)
            #expect(answer.status == 400, "\(query) should be rejected")
            #expect(answer.code?.hasPrefix("COE_") == true)
        }
        let expandProperty = try error("EmployeePayrollRunResults", "$expand=payDate")
        #expect(expandProperty.code == "COE_BAD_PROPERTY_EXPRESSION")
        #expect(expandProperty.message.contains("cannot expand non-navigation property"))
        let expandUnknown = try error("EmployeePayrollRunResults", "$expand=items")
        #expect(expandUnknown.code == "COE_PROPERTY_NOT_FOUND")
        // Custom options without '$' are SuccessFactors' business (paging=snapshot, …) and ignored.
        #expect(get("EmployeePayrollRunResults", "paging=snapshot&customPageSize=5&$format=json").status == 200)
    }

    @Test func unknownEntitySetAndPaths() throws {
        let unknownSet = try error("Payslips")
        #expect(unknownSet.status == 400)
        #expect(unknownSet.code == "COE_ENTITY_NOT_FOUND")
        #expect(unknownSet.message == "[COE0007]invalid entity (or function) name: Payslips")

        #expect(try error("User('100001')/salary").code == "COE_PROPERTY_NOT_FOUND")
        #expect(try error("User/empInfo").status == 400)
        #expect(try error("User()").status == 400)
        #expect(try error("User(100001)").status == 400)
        #expect(try error("User('100001'").status == 400)
        let singleKeyForComposite = try error("EmployeePayrollRunResults('PRR-100001-2024-01')")
        #expect(singleKeyForComposite.status == 400)
        #expect(singleKeyForComposite.message.contains("complex key"))
        #expect(try error("User('100001')/$count").status == 400)
    }

    @Test(arguments: ["POST", "PUT", "PATCH", "MERGE", "DELETE", "OPTIONS"])
    func writesAreNotAllowed(method: String) throws {
        let answer = try error("EmployeePayrollRunResults", method: method)
        #expect(answer.status == 405)
        #expect(answer.message.contains("read-only"))
    }

    @Test func hugeTopAndSkipDoNotCrash() throws {
        let huge = "99999999999999999999999999999999"
        let top = get("EmployeePayrollRunResults", "$top=\(huge)")
        #expect(top.status == 200)
        #expect(try JSONBody(top).results.count == 20)
        #expect(try JSONBody(top).next != nil)
        #expect(try allPages("EmployeePayrollRunResults", "$top=\(huge)").flatMap(\.results).count == 24)

        for query in [
            "$skip=\(huge)", "$skip=\(Int.max)", "$skiptoken=\(huge)", "$top=\(Int.max)&$skip=\(Int.max)",
            "$top=\(Int.max)&$skip=23", "$skip=\(Int.max)&$inlinecount=allpages",
        ] {
            let result = get("EmployeePayrollRunResults", query)
            #expect(result.status == 200, "\(query)")
            #expect(try JSONBody(result).results.count <= 1)
        }
        let count = get("EmployeePayrollRunResults/$count", "$top=\(Int.max)&$skip=\(Int.max)")
        #expect(String(decoding: count.body, as: UTF8.self) == "0")
        let service = PayrollODataService(pageSize: Int.max)
        #expect(try JSONBody(get("EmployeePayrollRunResults", "$skip=2&$top=\(Int.max)", service: service)).results.count == 22)
        #expect(
            PayrollODataService(pageSize: -5).handle(
                method: "GET", path: "User", query: nil, serviceRoot: serviceRoot, user: "100001"
            ).status == 200)
    }

    @Test func pathologicalFiltersAreRejectedOrAnswered() throws {
        let deep = String(repeating: "(", count: 10_000) + "userId eq '1'" + String(repeating: ")", count: 10_000)
        #expect(get("EmployeePayrollRunResults", "$filter=" + deep).status == 400)
        let nots = String(repeating: "not ", count: 5_000) + "isVoid"
        #expect(get("EmployeePayrollRunResults", "$filter=" + nots).status == 400)
        let calls = String(repeating: "tolower(", count: 5_000) + "userId" + String(repeating: ")", count: 5_000)
        #expect(get("EmployeePayrollRunResults", "$filter=" + calls + " eq 'x'").status == 400)
        let longOr = (0..<3_000).map { "externalCode eq 'PRR-100001-2024-\($0)'" }.joined(separator: " or ")
        #expect(get("EmployeePayrollRunResults", "$filter=" + longOr).status == 200)
        let deepExpand = Array(repeating: "empInfo/userNav", count: 50).joined(separator: "/")
        #expect(get("User", "$expand=" + deepExpand).status == 400)
        let deepPath = Array(repeating: "empInfo/userNav", count: 50).joined(separator: "/") + "/firstName"
        #expect(get("User", "$filter=" + deepPath + " eq 'x'").status == 400)
    }

    /// Deterministic garbage (a fixed linear congruential generator) never crashes the service.
    @Test func garbageNeverCrashes() {
        let alphabet = Array("abcdeyqIuNv$%&=()'/,.-+ 0123456789eqandornotgtXZ\u{00e9}\u{1F600}\\\"*")
        var seed: UInt64 = 42
        func next() -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: seed >> 33)
        }
        let prefixes = ["$filter=", "$expand=", "$select=", "$orderby=", "$top=", "", "$filter=userId eq "]
        let paths = ["EmployeePayrollRunResults", "User", "EmployeePayrollRunResultsItems", ""]
        for _ in 0..<2_000 {
            let length = next() % 40
            let noise = String((0..<length).map { _ in alphabet[next() % alphabet.count] })
            let query = prefixes[next() % prefixes.count] + noise
            let path = next() % 3 == 0 ? paths[next() % paths.count] + noise : paths[next() % paths.count]
            let result = get(path, query)
            #expect([200, 400, 404].contains(result.status), "path \(path) query \(query)")
            #expect(!result.body.isEmpty)
        }
    }
}
