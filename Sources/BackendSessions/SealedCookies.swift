import MidtierCore
import MidtierJSON

/// A session's cookies as they are sealed into the store: a JSON array of
/// `{"name":…,"value":…,"path":…,"expiresAt":…}` (`expiresAt` left out for a session cookie),
/// written and read with the core's JSON writer and strict reader.
enum SealedCookies {
    typealias Cookie = BackendCookieJar.Cookie

    struct Unreadable: Error, CustomStringConvertible {
        var description: String
    }

    static func text(_ cookies: [Cookie]) -> [UInt8] {
        let list = JSON.array(
            cookies.map { cookie in
                var members = [
                    JSONMember(key: "name", value: .string(cookie.name)), JSONMember(key: "value", value: .string(cookie.value)),
                    JSONMember(key: "path", value: .string(cookie.path)),
                ]
                if let expiresAt = cookie.expiresAt { members.append(JSONMember(key: "expiresAt", value: .number(expiresAt))) }
                return .object(members)
            })
        return Array(list.serialized().utf8)
    }

    static func cookies(_ bytes: [UInt8]) throws(Unreadable) -> [Cookie] {
        let value: JSON
        switch StrictJSON.value(bytes) {
        case .success(let parsed): value = parsed
        case .failure(let error): throw Unreadable(description: "the sealed cookies are not JSON: \(error.message)")
        }
        guard case .array(let entries) = value else { throw Unreadable(description: "the sealed cookies are not a list") }
        var cookies: [Cookie] = []
        for entry in entries {
            guard let name = entry["name"]?.stringValue, let text = entry["value"]?.stringValue, let path = entry["path"]?.stringValue else {
                throw Unreadable(description: "a sealed cookie lacks its name, value or path")
            }
            var expiresAt: Int64?
            switch entry["expiresAt"] {
            case nil, .null?: break
            case .number(let number)?:
                guard let milliseconds = Int64(number) else { throw Unreadable(description: "a sealed cookie's expiry is not whole milliseconds") }
                expiresAt = milliseconds
            case _?: throw Unreadable(description: "a sealed cookie's expiry is not a number")
            }
            cookies.append(Cookie(name: name, value: text, path: path, expiresAt: expiresAt))
        }
        return cookies
    }
}
