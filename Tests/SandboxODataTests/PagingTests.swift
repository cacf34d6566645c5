import Foundation
import SuccessFactorsSandbox
import Testing

/// Server-side paging: `__next` with `$skiptoken`, as SuccessFactors pages.
@Suite struct PagingTests {
    @Test func walksAllRunsExactlyOnce() throws {
        let pages = try allPages("EmployeePayrollRunResults", "$inlinecount=allpages")
        #expect(pages.map(\.results.count) == [20, 4])
        let codes = pages.flatMap(\.results).compactMap { $0["externalCode"] as? String }
        #expect(codes.count == 24)
        #expect(Set(codes).count == 24)
        #expect(codes == codes.sorted(), "default order is by key")
        #expect(pages.allSatisfy { $0.d["__count"] as? String == "24" })
        #expect(pages.last?.next == nil)
    }

    @Test func nextLinkKeepsTheOptionsAndUsesSkipToken() throws {
        let first = try JSONBody(get("EmployeePayrollRunResults", "$orderby=payDate%20desc&$skip=0&$select=externalCode,payDate"))
        let next = try #require(first.next)
        #expect(next.hasPrefix(serviceRoot + "EmployeePayrollRunResults?"))
        #expect(next.contains("$orderby=payDate%20desc"))
        #expect(next.contains("$select=externalCode,payDate"))
        #expect(next.hasSuffix("&$skiptoken=20"))
        #expect(!next.contains("$skip="))

        let (path, query) = try pathAndQuery(ofLink: next)
        let second = try JSONBody(get(path, query))
        #expect(second.results.count == 4)
        #expect(second.next == nil)
        #expect(second.results.last?["externalCode"] as? String == "PRR-100001-2024-01", "oldest last")
        #expect(second.results.allSatisfy { Set($0.keys) == ["__metadata", "externalCode", "payDate"] })
    }

    @Test(arguments: [
        (top: 30, expected: 24), (top: 22, expected: 22), (top: 20, expected: 20), (top: 5, expected: 5),
        (top: 0, expected: 0),
    ])
    func topBoundsTheTotalAcrossPages(top: Int, expected: Int) throws {
        let pages = try allPages("EmployeePayrollRunResults", "$top=\(top)&$orderby=payDate")
        let codes = pages.flatMap(\.results).compactMap { $0["externalCode"] as? String }
        #expect(codes.count == expected)
        #expect(Set(codes).count == expected)
    }

    @Test func skipTopAndSmallPagesTogether() throws {
        let service = PayrollODataService(pageSize: 7)
        let pages = try allPages("EmployeePayrollRunResults", "$skip=3&$top=10", service: service)
        #expect(pages.map(\.results.count) == [7, 3])
        let codes = pages.flatMap(\.results).compactMap { $0["externalCode"] as? String }
        let everything = try allPages("EmployeePayrollRunResults", nil).flatMap(\.results)
            .compactMap { $0["externalCode"] as? String }
        #expect(codes == Array(everything[3..<13]))
    }

    @Test func pagesWithFilterAndExpand() throws {
        let service = PayrollODataService(pageSize: 5)
        let pages = try allPages(
            "EmployeePayrollRunResults",
            "$filter=payDate%20ge%20datetime%272025-01-01T00:00:00%27&$expand=employeePayrollRunResultsItems",
            service: service)
        #expect(pages.map(\.results.count) == [5, 5, 2])
        let runs = pages.flatMap(\.results)
        #expect(runs.allSatisfy { ($0["externalCode"] as? String)?.hasPrefix("PRR-100001-2025-") == true })
        #expect(runs.allSatisfy { (($0["employeePayrollRunResultsItems"] as? [String: Any])?["results"] as? [Any])?.isEmpty == false })
    }

    @Test func pagesNavigationCollections() throws {
        let service = PayrollODataService(pageSize: 2)
        let january =
            "EmployeePayrollRunResults(externalCode='PRR-100001-2024-01',"
            + "mdfSystemEffectiveStartDate=datetime'1900-01-01T00:00:00')/employeePayrollRunResultsItems"
        let pages = try allPages(january, nil, service: service)
        #expect(pages.map(\.results.count) == [2, 2, 1])
    }
}
