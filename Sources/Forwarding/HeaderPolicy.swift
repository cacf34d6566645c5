import HTTPTypes
import Hummingbird
import MidtierCore

/// Which headers cross Midtier, in each direction (docs/forwarding.md, "Requests").
package enum HeaderPolicy {
    /// Hop-by-hop headers (RFC 9110 §7.6.1), never forwarded in either direction.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
        "te", "trailer", "transfer-encoding", "upgrade",
    ]

    /// Request headers Midtier replaces or that framing recomputes.
    static let replacedOnRequest: Set<String> = [
        "host", "authorization", "content-length", "expect", "cookie",
    ]

    /// Headers that claim an identity or a client address, or that would make a back end read
    /// the request differently from Midtier (original-URL and method-override headers). They
    /// are never trusted from a device and never forwarded, in any spelling: names are
    /// compared in lower case with `_` read as `-`, because some servers (and CGI-style
    /// gateways) treat the two alike.
    package static func isIdentityHeader(_ name: String) -> Bool {
        isIdentityHeader(normalized: normalize(name))
    }

    /// `isIdentityHeader` for a name already in lower case with `-` for `_`.
    static func isIdentityHeader(normalized: String) -> Bool {
        if normalized.hasPrefix("x-forwarded") || normalized.hasPrefix("x-smp-") || normalized.hasPrefix("x-auth-request-") {
            return true
        }
        // A client certificate as a TLS-terminating proxy passes it on: `SSL_CLIENT_CERT` (SAP's
        // ICM and Web Dispatcher, Apache's `SSL_*` variables), `Client-Cert` (RFC 9440) and
        // their variants. Only Midtier's own (`PrincipalPropagation`) reaches a back end.
        if normalized.hasPrefix("ssl-") || normalized.hasPrefix("x-ssl-") || normalized.hasPrefix("client-cert")
            || normalized.hasPrefix("x-client-cert") || normalized.hasPrefix("x-arr-clientcert") || normalized.hasPrefix("x-client-verify")
            || normalized.hasPrefix("sslclient") || normalized.hasPrefix("x-amzn-mtls-") || normalized.hasPrefix("cert-chain")
            || normalized.hasPrefix("x-webauth-") || normalized.hasPrefix("x-ms-client-principal")
        {
            return true
        }
        if (normalized.hasPrefix("sap-") || normalized.hasPrefix("x-sap-")) && normalized.contains("user") {
            return true
        }
        return identityHeaders.contains(normalized)
    }

    static let identityHeaders: Set<String> = [
        "forwarded", "x-real-ip", "x-client-ip", "true-client-ip", "client-ip", "x-cluster-client-ip",
        "x-original-forwarded-for", "x-remote-user", "remote-user", "x-remote-group", "x-user", "x-auth-user",
        "x-authenticated-user", "x-authenticated-userid", "x-ms-client-principal-name", "x-original-url",
        "x-original-uri", "x-rewrite-url", "x-http-method-override", "x-method-override", "x-http-method",
        // A SAP logon ticket as a header (as the cookie of that name, never the device's to give).
        "mysapsso2",
    ]

    static func normalize(_ name: String) -> String {
        normalize(lowercased: name.lowercased())
    }

    /// `normalize` for a name already in lower case.
    static func normalize(lowercased lower: String) -> String {
        guard lower.utf8.contains(UInt8(ascii: "_")) else { return lower }
        return String(String.UnicodeScalarView(lower.unicodeScalars.map { $0 == "_" ? "-" : $0 }))
    }

    /// Whether a device's request header may be copied to the back end.
    package static func forwardsRequestHeader(_ name: String, connectionTokens: Set<String>) -> Bool {
        forwardsRequestHeader(lowercased: name.lowercased(), connectionTokens: connectionTokens)
    }

    /// `forwardsRequestHeader` for a name already in lower case (`HTTPField.Name.canonicalName`).
    static func forwardsRequestHeader(lowercased lower: String, connectionTokens: Set<String>) -> Bool {
        !hopByHop.contains(lower) && !replacedOnRequest.contains(lower) && (connectionTokens.isEmpty || !connectionTokens.contains(lower))
            && !isIdentityHeader(normalized: normalize(lowercased: lower))
    }

    /// Whether a back end's response header may be copied to the device. `Set-Cookie` stays
    /// with Midtier: the device never holds a back-end session.
    package static func forwardsResponseHeader(_ name: String, connectionTokens: Set<String>) -> Bool {
        forwardsResponseHeader(lowercased: name.lowercased(), connectionTokens: connectionTokens)
    }

    static func forwardsResponseHeader(lowercased lower: String, connectionTokens: Set<String>) -> Bool {
        return !hopByHop.contains(lower) && (connectionTokens.isEmpty || !connectionTokens.contains(lower)) && lower != "set-cookie"
            && lower != "set-cookie2"
    }

    /// The names listed in `Connection` headers (also hop-by-hop), in lower case, but for
    /// `close` and the names that are hop-by-hop anyway (`keep-alive`): so that the common
    /// `Connection: keep-alive` makes no set at all.
    package static func connectionTokens(_ values: [String]) -> Set<String> {
        var tokens: Set<String> = []
        for value in values {
            for token in value.split(separator: ",") {
                let name = token.trimmingCharacters(in: " \t").lowercased()
                if name != "close", !hopByHop.contains(name) { tokens.insert(name) }
            }
        }
        return tokens
    }

    /// The device's own cookies a back end is sent (`name=value` each): only those named in
    /// `listed` (the destination's `forwardDeviceCookies`, exact names), never a SAP logon
    /// ticket or session (`DestinationConfiguration.neverForwardedCookie`), and never one of
    /// the name of a cookie Midtier keeps for the back end (`kept`, a `Cookie` value; names in
    /// any letter case): the back end's session is Midtier's, not the device's.
    static func deviceCookies(of fields: HTTPFields, listed: [String], kept: String?) -> [String] {
        guard !listed.isEmpty else { return [] }
        let keptNames = (kept ?? "").split(separator: ";").map { $0.prefix { $0 != "=" }.trimmingCharacters(in: " ").lowercased() }
        let device = Cookies(from: fields[values: .cookie])
        return listed.compactMap { name in
            guard DestinationConfiguration.neverForwardedCookie(name) == nil, !keptNames.contains(name.lowercased()),
                let cookie = device[name]
            else { return nil }
            return name + "=" + cookie.value
        }
    }
}

extension StringProtocol {
    func trimmingCharacters(in set: String) -> String {
        guard let first = firstIndex(where: { !set.contains($0) }),
            let last = lastIndex(where: { !set.contains($0) })
        else { return "" }
        return String(self[first...last])
    }
}
