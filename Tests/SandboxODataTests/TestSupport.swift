import Foundation
import SuccessFactorsSandbox
import Testing

/// Service root the tests pretend the sandbox runs under.
let serviceRoot = "http://localhost:8081/odata/v2/"

/// A GET against the service, as the Hummingbird route would pass it on.
func get(
    _ path: String, _ query: String? = nil, user: String = "100001",
    service: PayrollODataService = PayrollODataService()
) -> ODataResult {
    service.handle(method: "GET", path: path, query: query, serviceRoot: serviceRoot, user: user)
}

/// Splits an absolute `__next` link into the path and query the route would hand over.
func pathAndQuery(ofLink link: String) throws -> (path: String, query: String?) {
    #expect(link.hasPrefix(serviceRoot), "link \(link) is not under the service root")
    let relative = String(link.dropFirst(serviceRoot.count))
    guard let questionMark = relative.firstIndex(of: "?") else { return (relative, nil) }
    return (String(relative[..<questionMark]), String(relative[relative.index(after: questionMark)...]))
}

struct JSONBody {
    let object: [String: Any]

    init(_ result: ODataResult, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(result.contentType == "application/json;charset=utf-8", sourceLocation: sourceLocation)
        let parsed = try JSONSerialization.jsonObject(with: Data(result.body))
        object = try #require(parsed as? [String: Any], sourceLocation: sourceLocation)
    }

    /// `d` of a success answer.
    var d: [String: Any] { object["d"] as? [String: Any] ?? [:] }

    /// `d.results` of a collection answer.
    var results: [[String: Any]] { d["results"] as? [[String: Any]] ?? [] }

    var next: String? { d["__next"] as? String }

    var errorCode: String? { (object["error"] as? [String: Any])?["code"] as? String }

    var errorMessage: String? {
        ((object["error"] as? [String: Any])?["message"] as? [String: Any])?["value"] as? String
    }
}

/// Follows `__next` links from a first request until the last page; returns every page.
func allPages(
    _ path: String, _ query: String?, user: String = "100001", service: PayrollODataService = PayrollODataService()
) throws -> [JSONBody] {
    var pages: [JSONBody] = []
    var request: (path: String, query: String?)? = (path, query)
    while let (currentPath, currentQuery) = request {
        let result = get(currentPath, currentQuery, user: user, service: service)
        try #require(result.status == 200, "page \(pages.count + 1) failed: \(String(decoding: result.body, as: UTF8.self))")
        let page = try JSONBody(result)
        pages.append(page)
        request = try page.next.map(pathAndQuery(ofLink:))
        try #require(pages.count <= 100, "paging does not end")
    }
    return pages
}

/// `"/Date(1735603200000)/"` → milliseconds.
func milliseconds(_ value: Any?) -> Int64? {
    guard let text = value as? String, text.hasPrefix("/Date("), text.hasSuffix(")/") else { return nil }
    let inner = text.dropFirst(6).dropLast(2)
    return Int64(inner.prefix { $0 == "-" || $0.isNumber })
}

/// Milliseconds of a UTC date, computed independently of the sandbox.
func utcMilliseconds(_ year: Int, _ month: Int, _ day: Int) -> Int64 {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let date = calendar.date(from: DateComponents(year: year, month: month, day: day))!
    return Int64(date.timeIntervalSince1970 * 1000)
}
