import SuccessFactorsSandbox
import Testing

/// The answers' exact bytes: members in SuccessFactors' order (`__metadata`, then properties in
/// `$metadata` order, then navigation properties), compact, strings escaped as RFC 8259 requires.
@Suite struct JSONShapeTests {
    private func text(_ result: ODataResult) -> String { String(decoding: result.body, as: UTF8.self) }

    @Test func entityMembersComeInSuccessFactorsOrder() {
        let user = get("User('100001')", "$select=firstName,userId,empInfo")
        #expect(
            text(user) == #"{"d":{"__metadata":{"uri":"http://localhost:8081/odata/v2/User('100001')","type":"SFOData.User"},"#
                + #""userId":"100001","firstName":"Alice","#
                + #""empInfo":{"__deferred":{"uri":"http://localhost:8081/odata/v2/User('100001')/empInfo"}}}}"#)
        let page = get("EmployeePayrollRunResults", "$select=externalCode&$top=2&$inlinecount=allpages", service: PayrollODataService(pageSize: 1))
        #expect(text(page).hasPrefix(#"{"d":{"__count":"24","results":[{"__metadata":{"uri":"#))
        #expect(
            text(page).hasSuffix(
                #","__next":"http://localhost:8081/odata/v2/EmployeePayrollRunResults?$select=externalCode&$top=1&$inlinecount=allpages&$skiptoken=1"}}"#
            ))
    }

    @Test func controlCharactersAreEscaped() {
        let answer = get("User", "$inlinecount=%00%01%08%09%0A%0D%1F%22%2F%5C%7F%C3%A9")
        #expect(answer.status == 400)
        #expect(
            text(answer) == #"{"error":{"code":"COE_GENERAL_BAD_REQUEST","message":{"lang":"en-US","value":"#
                + #""Invalid $inlinecount '\u0000\u0001\u0008\t\n\r\u001f\"/\\\#u{7F}é': use allpages or none."}}}"#)
    }
}
