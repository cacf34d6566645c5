import Foundation
package import HTTPTypes
package import Hummingbird

/// What the device API refuses of requests a browser makes (docs/device-api.md, "Requests from
/// browsers"). Basic sign-in answers `WWW-Authenticate: Basic`, so a browser that once signed
/// in keeps the credentials and sends them with any request another site makes it send: a
/// form post, or a `fetch` without CORS. Native apps send neither `Sec-Fetch-Site` nor
/// `Origin`, so nothing here concerns them.
package enum BrowserRequests {
    /// The refusal for a request that changes state (any method but GET, HEAD and OPTIONS) and
    /// that a browser says comes from another site: `Sec-Fetch-Site` `cross-site` or
    /// `same-site`, or — from a browser that does not send that header — an `Origin` that is
    /// neither `publicURL`'s nor the request's own host's. Nil for anything else.
    package static func crossSiteRefusal(_ request: Request, publicURL: String) -> Refusal? {
        switch request.method {
        case .get, .head, .options: return nil
        default: break
        }
        if let site = request.headers[.secFetchSite] {
            // same-origin, and none (the user's own typing or bookmark), are the device API's own.
            guard site.lowercased() == "cross-site" || site.lowercased() == "same-site" else { return nil }
            return refusal("Sec-Fetch-Site: \(site.prefix(16))")
        }
        guard let origin = request.headers[.origin] else { return nil }
        if let authority = request.head.authority,
            sameOrigin(origin, "http://" + authority) || sameOrigin(origin, "https://" + authority)
        {
            return nil
        }
        if sameOrigin(origin, publicURL) { return nil }
        return refusal("Origin")
    }

    /// Whether the scheme, host and port of `origin` are those of `url` (letter case aside).
    static func sameOrigin(_ origin: String, _ url: String) -> Bool {
        guard let schemeEnd = url.range(of: "://") else { return false }
        let end = url[schemeEnd.upperBound...].firstIndex(of: "/") ?? url.endIndex
        return origin.lowercased() == url[..<end].lowercased()
    }

    private static func refusal(_ why: String) -> Refusal {
        Refusal(
            .forbidden, code: "CROSS_SITE",
            "a request from another site may not change anything through the device API (\(why)); apps call without Sec-Fetch-Site or Origin")
    }

    /// Whether the body's `Content-Type` (its media type, parameters aside) is JSON —
    /// `application/json` or a `+json` type — or not given at all (a native client that sends
    /// none). Other types, `text/plain` and form types among them, are what a browser may send
    /// to another site without asking first.
    package static func isJSONOrUnlabelled(_ request: Request) -> Bool {
        guard let type = mediaType(request) else { return true }
        return type == "application/json" || (type.hasPrefix("application/") && type.hasSuffix("+json"))
    }

    /// The body's media type in lower case, without parameters; nil when none is given.
    package static func mediaType(_ request: Request) -> String? {
        guard let value = request.headers[.contentType] else { return nil }
        let type = value.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return type.isEmpty ? nil : type
    }
}

extension Refusal {
    /// 415: the body's media type is not one the route takes.
    package static func unsupportedMediaType(_ request: Request, takes accepted: String) -> Refusal {
        Refusal(
            .unsupportedMediaType, code: "UNSUPPORTED_MEDIA_TYPE",
            "the body's Content-Type \(BrowserRequests.mediaType(request)?.prefix(64) ?? "") is not one this route takes (\(accepted))")
    }
}

extension HTTPField.Name {
    static let secFetchSite = Self("Sec-Fetch-Site")!
}
