import Foundation
package import MidtierCore
import NIOHTTP1
package import NIOSSL

/// Where a destination's back end listens, and whom it must prove to be: what one pooled
/// connection is for.
package struct UpstreamOrigin: Hashable, Sendable, CustomStringConvertible {
    package let tls: Bool
    package let host: String
    package let port: Int
    /// The `Host` header: the host, with the port unless it is the scheme's default.
    package let authority: String
    /// For https with `trustedCertificates`: the TLS context that trusts only those (else the
    /// pool's, with the system's roots). Connections are pooled per context too.
    var trust: NIOSSLContext?
    /// The most idle connections kept per event loop: fewer for one user's own TLS context
    /// (`PrincipalPropagation` over mutual TLS). Not part of what a connection is for.
    var maximumIdle = UpstreamConnectionPool.maximumIdlePerOrigin

    package static func == (a: Self, b: Self) -> Bool {
        a.tls == b.tls && a.port == b.port && a.host == b.host && a.trust.map(ObjectIdentifier.init) == b.trust.map(ObjectIdentifier.init)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(tls)
        hasher.combine(host)
        hasher.combine(port)
        hasher.combine(trust.map(ObjectIdentifier.init))
    }

    /// Splits a destination `URL` (already checked by the configuration loader: an absolute
    /// http or https URL without user information, query or fragment).
    package init?(url: String) {
        let lower = url.lowercased()
        let tls: Bool
        if lower.hasPrefix("https://") { tls = true } else if lower.hasPrefix("http://") { tls = false } else { return nil }
        let authority = url.dropFirst(tls ? 8 : 7).prefix { $0 != "/" }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let rest = authority[authority.index(after: close)...]
            if rest.hasPrefix(":") { portText = rest.dropFirst() } else if !rest.isEmpty { return nil }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        let defaultPort = tls ? 443 : 80
        let port: Int
        if let portText {
            guard let parsed = Int(portText), (1...65535).contains(parsed) else { return nil }
            port = parsed
        } else {
            port = defaultPort
        }
        guard !host.isEmpty else { return nil }
        self.tls = tls
        self.host = String(host)
        self.port = port
        let hostPart = host.contains(":") ? "[\(host)]" : String(host)
        self.authority = port == defaultPort ? hostPart : "\(hostPart):\(port)"
    }

    package var description: String { "\(tls ? "https" : "http")://\(authority)" }
}

/// What forwarding needs of one destination, worked out once per configuration: where its
/// back end listens, the base path, the fixed query and headers, and the URL rewriter.
package struct UpstreamDestination: Sendable {
    package let configuration: DestinationConfiguration
    /// Nil only for a URL the loader would have refused, or certificates NIOSSL cannot load;
    /// calls to it answer 502.
    package let origin: UpstreamOrigin?
    /// Why `trustedCertificates` could not be used, if so.
    let trustProblem: String?
    /// The TLS client settings of the destination (its trust), for one user's own context.
    let baseTLS: TLSConfiguration
    /// The destination URL's path ("" or "/odata/v2"), to which the device's remainder is added.
    let basePath: String
    /// `URL.queries.*`, encoded, joined with `&`; nil when there are none.
    let fixedQuery: String?
    /// The names of `URL.queries.*`, in lower and upper case, for `replacesParameter`.
    let fixedQueryNames: [(lower: String, upper: String)]
    /// `URL.headers.*`.
    let fixedHeaders: [(name: String, value: String)]
    /// The back end's absolute URLs → Midtier's, in answers.
    package let rewriter: URLRewriter
    /// What answers get replaced, per back-end credential.
    let answerTables: AnswerTableMemo

    /// - Parameter publicURL: the server's `publicURL`.
    package init(_ destination: DestinationConfiguration, publicURL: String) {
        configuration = destination
        var origin = UpstreamOrigin(url: destination.url)
        var problem: String?
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if origin?.tls == true, destination.trustedCertificatesPEM != nil || destination.clientIdentity != nil {
            do {
                if let pem = destination.trustedCertificatesPEM {
                    tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(pem))
                }
                if let identity = destination.clientIdentity {
                    try Self.present(identity, in: &tls)
                }
                origin?.trust = try NIOSSLContext(configuration: tls)
            } catch {
                origin = nil
                problem = "the trustedCertificates or KeyStoreLocation of destination \(destination.name) cannot be used: \(error)"
            }
        }
        baseTLS = tls
        self.origin = origin
        trustProblem = problem
        let afterScheme = destination.url.firstRange(of: "://").map { destination.url[$0.upperBound...] } ?? Substring(destination.url)
        basePath = String(afterScheme.drop { $0 != "/" })
        let queries = destination.extraQueries.map {
            // `URL.queries.*` as a query component: what OData query syntax needs stays as it is.
            $0.name.percentEncoded(keeping: "$'(),:@") + "=" + $0.value.percentEncoded(keeping: "$'(),:@")
        }
        fixedQuery = queries.isEmpty ? nil : queries.joined(separator: "&")
        fixedQueryNames = destination.extraQueries.map { ($0.name.lowercased(), $0.name.uppercased()) }
        fixedHeaders = destination.extraHeaders
        rewriter = URLRewriter(backendBase: destination.url, deviceBase: publicURL + "/" + destination.name)
        answerTables = AnswerTableMemo(rewriter: rewriter)
    }

    package var name: String { configuration.name }

    /// `KeyStoreLocation` as the certificate chain and key of a TLS configuration.
    static func present(_ identity: ClientIdentity, in tls: inout TLSConfiguration) throws {
        switch identity {
        case .pem(let bytes, let passphrase):
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(bytes).map { .certificate($0) }
            let key: NIOSSLPrivateKey
            if let passphrase {
                key = try NIOSSLPrivateKey(bytes: bytes, format: .pem) { $0(Array(passphrase.utf8)) }
            } else {
                key = try NIOSSLPrivateKey(bytes: bytes, format: .pem)
            }
            tls.privateKey = .privateKey(key)
        case .pkcs12(let bytes, let passphrase):
            let bundle = try NIOSSLPKCS12Bundle(buffer: bytes, passphrase: passphrase.map { Array($0.utf8) })
            tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
            tls.privateKey = .privateKey(bundle.privateKey)
        }
    }

    /// Why `KeyStoreLocation` cannot be used (wrong password, no key, a key that does not
    /// belong to the certificate), or nil.
    package static func problem(with identity: ClientIdentity) -> String? {
        var tls = TLSConfiguration.makeClientConfiguration()
        do {
            try present(identity, in: &tls)
            guard !tls.certificateChain.isEmpty else { return "the file holds no certificate" }
            _ = try NIOSSLContext(configuration: tls)
            return nil
        } catch {
            switch identity {
            case .pkcs12: return "the PKCS#12 file does not open (wrong KeyStorePassword, or not PKCS#12): \(error)"
            case .pem: return "the certificate and key do not load, or do not belong together: \(error)"
            }
        }
    }

    /// A TLS context that presents one user's own certificate (DER, with its issuer's) and key
    /// (PKCS#8 DER) and trusts what the destination trusts (`PrincipalPropagation` over
    /// mutual TLS). Connections made with it are pooled apart from every other context's,
    /// at most `maximumIdlePerUser` idle per event loop.
    package func userTLS(certificateDER: [UInt8], issuerDER: [UInt8], keyDER: [UInt8]) throws -> NIOSSLContext {
        var tls = baseTLS
        tls.certificateChain = [
            .certificate(try NIOSSLCertificate(bytes: certificateDER, format: .der)),
            .certificate(try NIOSSLCertificate(bytes: issuerDER, format: .der)),
        ]
        tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: keyDER, format: .der))
        return try NIOSSLContext(configuration: tls)
    }

    /// Idle connections kept per user context and event loop.
    package static let maximumIdlePerUser = 2

    /// The origin with one user's TLS context in place of the destination's.
    func origin(presenting context: NIOSSLContext?) -> UpstreamOrigin? {
        guard let context, var origin, origin.tls else { return origin }
        origin.trust = context
        origin.maximumIdle = Self.maximumIdlePerUser
        return origin
    }

    /// The request target at the back end for `remainder` (already checked by
    /// `ProxyPath.problem(in:)`) and the device's raw query, plus `URL.queries.*`, which
    /// replace the device's parameters of the same name (docs/forwarding.md, "Requests").
    package func target(remainder: Substring, query: String?) -> String {
        var target = basePath + remainder
        if target.isEmpty { target = "/" }
        var deviceQuery = query.flatMap { $0.isEmpty ? nil : $0 }
        if let device = deviceQuery, !fixedQueryNames.isEmpty {
            let kept = device.split(separator: "&", omittingEmptySubsequences: false).filter { !replacesParameter($0) }
            deviceQuery = kept.isEmpty ? nil : kept.joined(separator: "&")
        }
        switch (deviceQuery, fixedQuery) {
        case (nil, nil): break
        case (let device?, nil): target += "?" + device
        case (nil, let fixed?): target += "?" + fixed
        case (let device?, let fixed?): target += "?" + device + "&" + fixed
        }
        return target
    }

    /// Whether a device's query parameter (`name=value`, as sent) is one a `URL.queries.*`
    /// replaces: its name, percent-decoded (`+` as a space, as forms are read), equals a fixed
    /// one's in any letter case — every spelling a back end might read as that name (SAP's ICF
    /// reads form field names without regard to case). A name that does not decode is kept.
    func replacesParameter(_ parameter: Substring) -> Bool {
        let raw = parameter.prefix { $0 != "=" }
        let name = raw.contains("%") || raw.contains("+") ? String(raw).replacingOccurrences(of: "+", with: " ").removingPercentEncoding : String(raw)
        guard let name else { return false }
        let lower = name.lowercased(), upper = name.uppercased()
        return fixedQueryNames.contains { $0.lower.utf8.elementsEqual(lower.utf8) || $0.upper.utf8.elementsEqual(upper.utf8) }
    }

    /// The path part of `target(…)`, as the back end's cookies are scoped.
    package func path(remainder: Substring) -> String {
        let path = basePath + remainder
        return path.isEmpty ? "/" : path
    }
}
