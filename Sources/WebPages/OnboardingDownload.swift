import Foundation
import HTTPTypes
import Hummingbird
import MidtierCore
import MidtierHTTP

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
    static func response(app: String, _ format: Format, _ onboarding: (String) -> [String: Any]?) throws(Refusal) -> Response {
        guard let document = onboarding(app) else { throw .notFound("There is no app \(app) in the configuration.") }
        let data: Data
        do {
            switch format {
            case .propertyList:
                data = try PropertyListSerialization.data(fromPropertyList: withoutNulls(document), format: .xml, options: 0)
            case .json:
                data = try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted])
            }
        } catch {
            throw Refusal(.unprocessableContent, code: "NOT_WRITABLE",
                          "The onboarding configuration of \(app) cannot be written as \(format.filename): check its discovery members.")
        }
        var headers = HTTPFields()
        headers[.contentType] = format.contentType
        headers[.contentDisposition] = #"attachment; filename="\#(format.filename)""#
        Pages.protect(&headers)
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A property list has no null: a `null` discovery member is left out of the plist.
    static func withoutNulls(_ value: Any) -> Any {
        switch value {
        case let object as [String: Any]: object.filter { !($0.value is NSNull) }.mapValues(withoutNulls)
        case let list as [Any]: list.filter { !($0 is NSNull) }.map(withoutNulls)
        default: value
        }
    }
}
