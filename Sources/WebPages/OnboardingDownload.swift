import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP
import MidtierJSON

/// An app's onboarding configuration as a file for its developers (docs/console.md,
/// "Onboarding configuration"): the document `/config/v1/{appId}` sends, as the
/// `ConfigurationProvider.plist` the SAP SDK's `FileConfigurationProvider` reads from the app
/// bundle, or as JSON. It holds no secret: client IDs and endpoints only.
enum OnboardingDownload {
    enum Format: CaseIterable {
        case propertyList, json

        var filename: String {
            switch self {
            case .propertyList: "ConfigurationProvider.plist"
            case .json: "ConfigurationProvider.json"
            }
        }

        var label: String {
            switch self {
            case .propertyList: "ConfigurationProvider.plist"
            case .json: "JSON"
            }
        }

        var contentType: String {
            switch self {
            case .propertyList: "application/x-plist"
            case .json: "application/json;charset=utf-8"
            }
        }
    }

    static func path(app: String, _ format: Format) -> String {
        "/console/apps/\(app.percentEncoded())/\(format.filename)"
    }

    /// The download of `app`'s configuration; `404` for an app that is not configured.
    static func response(app: String, _ format: Format, _ onboarding: (String) -> JSON?) throws(Refusal) -> Response {
        guard let document = onboarding(app) else { throw .notFound("There is no app \(app) in the configuration.") }
        let data: Data
        switch format {
        case .propertyList:
            do {
                data = try PropertyListSerialization.data(fromPropertyList: propertyList(document) ?? [String: Any](), format: .xml, options: 0)
            } catch {
                throw Refusal(
                    .unprocessableContent, code: "NOT_WRITABLE",
                    "The onboarding configuration of \(app) cannot be written as \(format.filename): check its discovery members.")
            }
        case .json:
            data = Data(document.prettyPrinted().utf8)
        }
        var headers = HTTPFields()
        headers[.contentType] = format.contentType
        headers[.contentDisposition] = #"attachment; filename="\#(format.filename)""#
        Pages.protect(&headers)
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// The value as Foundation's property list writer takes it. A property list has no null: a
    /// `null` discovery member is left out (nil). Whole numbers are integers, others reals.
    static func propertyList(_ value: JSON) -> Any? {
        switch value {
        case .null: nil
        case .bool(let flag): flag
        case .number(let text): Int(text).map { $0 as Any } ?? Double(text).map { $0 as Any }
        case .string(let text): text
        case .array(let values): values.compactMap(propertyList)
        case .object(let members):
            Dictionary(members.compactMap { member in propertyList(member.value).map { (member.key, $0) } }, uniquingKeysWith: { first, _ in first })
        }
    }
}
