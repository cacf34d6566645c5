import MidtierCore
import MidtierJSON

// `config/destinations/<Name>.json`, with SAP BTP destination property names.

extension ConfigurationLoader {
    /// Keys that only `BasicAuthentication` uses.
    static let basicKeys = ["User", "Password"]
    /// Keys that only `OAuth2SAMLBearerAssertion` uses.
    static let samlKeys = [
        "tokenServiceURL", "clientKey", "companyId", "audience", "assertionIssuer", "assertionRecipient",
        "nameIdFormat", "authnContextClassRef", "userIdSource", "samlAssertionEncoding",
        "signingKey", "signingKeyPassphrase", "signingCertificate", "tokenServiceUser", "tokenServicePassword", "scope",
        "nameQualifier", "assertionAttributes",
    ]
    /// Keys that only `PrincipalPropagation` uses (Midtier's own: it makes the certificates
    /// that SAP Cloud Connector would).
    static let principalPropagationKeys = [
        "principalPropagationMode", "subjectPattern", "certificateValidityMinutes", "caCertificate", "caKey", "caKeyPassphrase",
    ]
    /// `ClientCertificateAuthentication`'s keys; `PrincipalPropagation` uses them for
    /// Midtier's own certificate.
    static let keyStoreKeys = ["KeyStoreLocation", "KeyStorePassword"]
    /// The `OAuth2*` types' keys (some shared with `OAuth2SAMLBearerAssertion`), besides
    /// `tokenService.body.<name>`.
    static let oauth2Keys = [
        "tokenServiceURL", "clientId", "clientSecret", "scope", "tokenServiceUser", "tokenServicePassword",
        "tokenService.addClientCredentialsInBody", "tokenServiceURLType",
    ]
    /// The `OAuth2*` types and their grants.
    static let oauth2Types: [String: OAuth2Grant] = [
        "OAuth2ClientCredentials": .clientCredentials, "OAuth2JWTBearer": .jwtBearer,
        "OAuth2UserTokenExchange": .jwtBearer, "OAuth2TokenExchange": .tokenExchange,
    ]
    /// Headers that HTTP itself or Midtier's forwarding controls; a destination cannot add them.
    static let forbiddenHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te",
        "trailer", "proxy-connection", "proxy-authorization", "expect",
    ]

    /// Reads one destination. Keys that belong to another `Authentication` type than the one
    /// chosen are accepted and ignored without being checked: a destination pasted from
    /// SAP BTP carries them.
    func loadDestination(_ reader: ObjectReader, fileName: String) -> DestinationConfiguration? {
        let name = reader.string("Name", required: true)
        if let name {
            if let problem = checkDestinationName(name) {
                reader.problem("Name", problem.message)
            } else if name != fileName {
                reader.problem("Name", "must equal the file name without .json (\"\(fileName)\")")
            }
        }
        _ = reader.choice("Type", ["HTTP"])
        // `OnPremise` as BTP writes it for principal propagation; Midtier calls the URL directly.
        _ = reader.choice("ProxyType", ["Internet", "OnPremise"])
        _ = reader.string("Description", allowEmpty: true)

        var url: String?
        if let text = reader.string("URL", required: true) {
            switch checkHTTPURL(text, allowQuery: false) {
            case .success(let checked): url = checked
            case .failure(let problem): reader.problem("URL", problem.message)
            }
        }
        // Milliseconds; at most a day, so that no later arithmetic can overflow.
        let timeout = reader.integer("timeout", in: 1...86_400_000) ?? 30000

        let type = reader.choice(
            "Authentication",
            [
                "NoAuthentication", "BasicAuthentication", "OAuth2SAMLBearerAssertion", "PrincipalPropagation",
                "ClientCertificateAuthentication", "UserBasicAuthentication",
            ] + Self.oauth2Types.keys.sorted(), required: true
        )
        let headers = extraHeaders(reader, allowAuthorization: type == "NoAuthentication")
        let queries = extraQueries(reader)
        let deviceCookies = forwardDeviceCookies(reader)
        let patches = metadataPatches(reader)
        var trusted: [UInt8]?
        if reader.contains("trustedCertificates") {
            if let url, !url.lowercased().hasPrefix("https://") {
                _ = reader.value("trustedCertificates")
                reader.problem("trustedCertificates", "only for an https URL")
            } else {
                trusted = pemFile(reader, "trustedCertificates", reason: "", label: "CERTIFICATE", what: "a PEM file of certificates")
            }
        }

        var authentication: DestinationAuthentication?
        var userIdSource: String?
        var clientIdentity: ClientIdentity?
        let bodyKeys = reader.keys.filter { $0.hasPrefix("tokenService.body.") }
        let others = Self.basicKeys + Self.samlKeys + Self.principalPropagationKeys + Self.keyStoreKeys + Self.oauth2Keys + bodyKeys
        switch type {
        case "NoAuthentication":
            reader.accept(others)
            authentication = .noAuthentication
        case "UserBasicAuthentication":
            reader.accept(others)
            if let url, !isHTTPSOrLoopback(url) {
                reader.problem("URL", "must be https for UserBasicAuthentication (users' passwords would cross the network in clear)")
            }
            authentication = .userBasic
        case "BasicAuthentication":
            reader.accept(others.filter { !Self.basicKeys.contains($0) })
            let reason = "needed for BasicAuthentication"
            let user = reader.string("User", required: true, requiredBecause: reason)
            let password = secret(reader, "Password", required: true, requiredBecause: reason)
            if let user, let password { authentication = .basic(user: user, password: password) }
        case "OAuth2SAMLBearerAssertion":
            reader.accept(others.filter { !Self.samlKeys.contains($0) })
            userIdSource = reader.string("userIdSource")
            if let settings = samlSettings(reader) { authentication = .samlBearer(settings) }
        case "PrincipalPropagation":
            reader.accept(Self.basicKeys + Self.samlKeys.filter { $0 != "userIdSource" })
            userIdSource = reader.string("userIdSource")
            let settings = principalPropagationSettings(reader, url: url)
            if settings?.mode == .header || reader.contains("KeyStoreLocation") {
                clientIdentity = keyStore(
                    reader, reason: "needed for PrincipalPropagation with principalPropagationMode header (Midtier's own certificate)")
            } else {
                reader.accept(Self.keyStoreKeys)
            }
            if let settings, settings.mode == .mutualTLS || clientIdentity != nil { authentication = .principalPropagation(settings) }
        case "ClientCertificateAuthentication":
            reader.accept(others.filter { !Self.keyStoreKeys.contains($0) })
            if let url, !url.lowercased().hasPrefix("https://") { reader.problem("URL", "must be https for ClientCertificateAuthentication") }
            clientIdentity = keyStore(reader, reason: "needed for ClientCertificateAuthentication")
            if clientIdentity != nil { authentication = .clientCertificate }
        case let type? where Self.oauth2Types[type] != nil:
            reader.accept(others.filter { !Self.oauth2Keys.contains($0) && !bodyKeys.contains($0) })
            if let settings = oauth2Settings(reader, type: type, grant: Self.oauth2Types[type]!, bodyKeys: bodyKeys) {
                authentication = .oauth2(settings)
            }
        default:
            // Authentication is missing or wrong, which is reported; do not add noise.
            reader.accept(others)
        }

        reader.reportUnknownKeys()
        guard let name, let url, let authentication else { return nil }
        let destination = DestinationConfiguration(
            name: name, url: url, authentication: authentication, userIdSource: userIdSource,
            timeoutMilliseconds: timeout, extraHeaders: headers, extraQueries: queries, metadataPatches: patches,
            trustedCertificatesPEM: trusted, forwardDeviceCookies: deviceCookies, clientIdentity: clientIdentity
        )
        if let validate = validateDestination, let failure = validate(destination) {
            reader.problem(failure.key, failure.message)
            return nil
        }
        return destination
    }

    /// A header that carries a client certificate from a TLS-terminating proxy
    /// (`SSL_CLIENT_CERT`, `Client-Cert`, …): only `PrincipalPropagation` sets one, per user.
    static func isCertificateHeader(_ name: String) -> Bool {
        let normalized = String(name.lowercased().map { $0 == "_" ? "-" : $0 })
        return normalized.hasPrefix("ssl-client") || normalized.hasPrefix("client-cert") || normalized.hasPrefix("x-ssl-client")
            || normalized.hasPrefix("x-client-cert")
    }

    /// `URL.headers.<Name>`: added to every forwarded request. The name must be an HTTP token
    /// and not one that HTTP framing or Midtier controls; `Authorization` only for
    /// `NoAuthentication` (otherwise Midtier sets it). Values must be strings without line
    /// breaks. Names are case-insensitive, so two keys differing in case are a duplicate.
    private func extraHeaders(_ reader: ObjectReader, allowAuthorization: Bool) -> [(name: String, value: String)] {
        let prefix = "URL.headers."
        var headers: [(name: String, value: String)] = []
        var seen = Set<String>()
        for key in reader.keys where key.hasPrefix(prefix) {
            let name = String(key.dropFirst(prefix.count))
            guard let value = reader.string(key, allowEmpty: true, dynamic: true) else { continue }
            if !isHTTPToken(name) {
                reader.problem(key, "must end in a valid HTTP header name")
            } else if Self.forbiddenHeaders.contains(name.lowercased())
                || (name.lowercased() == "authorization" && !allowAuthorization)
                || Self.isCertificateHeader(name)
            {
                reader.problem(key, "the header \(name) is set by Midtier and cannot be configured here")
            } else if !seen.insert(name.lowercased()).inserted {
                reader.problem(key, "the header \(name) is given twice (header names ignore letter case)")
            } else if containsControlCharacters(value) {
                reader.problem(key, "must not contain line breaks or other control characters")
            } else {
                headers.append((name, value))
            }
        }
        return headers
    }

    /// `URL.queries.<name>`: query parameters added to every forwarded request, replacing the
    /// device's of the same name (compared ignoring letter case, so two keys differing only in
    /// case are a duplicate).
    private func extraQueries(_ reader: ObjectReader) -> [(name: String, value: String)] {
        let prefix = "URL.queries."
        var queries: [(name: String, value: String)] = []
        var seen = Set<String>()
        for key in reader.keys where key.hasPrefix(prefix) {
            let name = String(key.dropFirst(prefix.count))
            guard let value = reader.string(key, allowEmpty: true, dynamic: true) else { continue }
            if name.isEmpty || containsControlCharacters(name) {
                reader.problem(key, "must end in a query parameter name")
            } else if !seen.insert(name.lowercased()).inserted {
                reader.problem(key, "the query parameter \(name) is given twice (names are compared ignoring letter case)")
            } else if containsControlCharacters(value) {
                reader.problem(key, "must not contain line breaks or other control characters")
            } else {
                queries.append((name, value))
            }
        }
        return queries
    }

    /// `forwardDeviceCookies`: the names of the device's own cookies the back end is sent
    /// (none by default). Cookie names (HTTP tokens), each once, none that
    /// `DestinationConfiguration.neverForwardedCookie` names.
    private func forwardDeviceCookies(_ reader: ObjectReader) -> [String] {
        guard let elements = reader.array("forwardDeviceCookies") else { return [] }
        var names: [String] = []
        for (path, value) in elements {
            guard case .string(let name) = value, isHTTPToken(name) else {
                reader.problems.add(path, "must be a cookie name (letters, digits and !#$%&'*+-.^_`|~)")
                continue
            }
            if let rule = DestinationConfiguration.neverForwardedCookie(name) {
                reader.problems.add(path, "the cookie \(name) is never forwarded from devices (\(rule))")
            } else if names.contains(where: { $0.utf8.elementsEqual(name.utf8) }) {
                reader.problems.add(path, "the cookie \(name) is listed twice")
            } else {
                names.append(name)
            }
        }
        return names
    }

    /// `metadataPatches`: `[{"entityType":..,"property":..,"set":{facet: value}}]`. Facet
    /// values may be strings, numbers (kept as written: `15`) or booleans (`"false"`, for
    /// `Nullable`); facet names must be XML attribute names.
    private func metadataPatches(_ reader: ObjectReader) -> [MetadataPatch] {
        guard let elements = reader.array("metadataPatches") else { return [] }
        var patches: [MetadataPatch] = []
        for (path, element) in elements {
            guard let patch = ObjectReader.make(element, path: path, problems: reader.problems) else { continue }
            let entityType = patch.string("entityType", required: true)
            let property = patch.string("property", required: true)
            var facets: [String: String] = [:]
            if let set = patch.object("set", required: true) {
                for facet in set.keys {
                    guard let value = set.value(facet) else { continue }
                    let isXMLName =
                        isPlainName(facet, extra: ["_", "-", "."])
                        && (facet.first!.isLetter || facet.first == "_")
                    guard isXMLName else {
                        set.problem(facet, "must be an XML attribute name, such as Precision or Scale")
                        continue
                    }
                    switch value {
                    case .string(let text): facets[facet] = text
                    case .number(let literal): facets[facet] = literal
                    case .bool(let bool): facets[facet] = bool ? "true" : "false"
                    default: set.problem(facet, "must be a string or a number (found \(value.kind))")
                    }
                }
                if set.keys.isEmpty { patch.problem("set", "must set at least one facet") }
                // Only what can never be valid is refused here: a Scale larger than the
                // Precision set beside it. A Scale alone may fit the Precision the back end's
                // document already carries; that is judged on the patched document
                // (`check-config --metadata`, and a warning at run time; docs/configuration.md).
                if let scale = facets["Scale"].flatMap(Int.init), let precision = facets["Precision"].flatMap(Int.init), scale > precision {
                    set.problem("Scale", "is larger than Precision (\(precision))")
                }
            }
            patch.reportUnknownKeys()
            if let entityType, let property, !facets.isEmpty {
                patches.append(MetadataPatch(entityType: entityType, property: property, set: facets))
            }
        }
        return patches
    }

    /// The `OAuth2SAMLBearerAssertion` keys. Key and certificate files are read (relative to
    /// the working directory) and checked for PEM form; then `validateSigningMaterial`, if
    /// given, checks that they load and belong together.
    private func samlSettings(_ reader: ObjectReader) -> SAMLBearerSettings? {
        let reason = "needed for OAuth2SAMLBearerAssertion"
        var tokenServiceURL: String?
        if let text = reader.string("tokenServiceURL", required: true, requiredBecause: reason) {
            switch checkHTTPURL(text, allowQuery: true) {
            case .success(let url) where !isHTTPSOrLoopback(url):
                reader.problem("tokenServiceURL", "must be https (or http to this host): the signed assertion and the client's password go there")
            case .success(let url): tokenServiceURL = url
            case .failure(let problem): reader.problem("tokenServiceURL", problem.message)
            }
        }
        let clientKey = reader.string("clientKey", required: true, requiredBecause: reason)
        // SuccessFactors' company; other token services (the ABAP OAuth 2.0 server, S/4HANA
        // Cloud) have none, and then `audience` names the target system.
        let companyId = reader.string("companyId")
        let audience = reader.string(
            "audience", required: !reader.contains("companyId"),
            requiredBecause: "needed for OAuth2SAMLBearerAssertion without companyId (the target system's SAML name)")
        let tokenServiceUser = reader.string("tokenServiceUser")
        let tokenServicePassword = secret(
            reader, "tokenServicePassword", required: tokenServiceUser != nil,
            requiredBecause: "needed with tokenServiceUser")
        if tokenServicePassword != nil, tokenServiceUser == nil, !reader.problems.has(under: "tokenServiceUser") {
            reader.problem("tokenServicePassword", "is given without tokenServiceUser")
        }
        let scope = reader.string("scope")
        let nameQualifier = reader.string("nameQualifier")
        var assertionAttributes: [String] = []
        if let elements = reader.array("assertionAttributes") {
            for (path, value) in elements {
                guard case .string(let name) = value, !name.isEmpty, !containsControlCharacters(name) else {
                    reader.problems.add(path, "must be the name of a user attribute")
                    continue
                }
                if assertionAttributes.contains(where: { $0.utf8.elementsEqual(name.utf8) }) {
                    reader.problems.add(path, "the attribute \(name) is listed twice")
                } else if name == "api_key" {
                    reader.problems.add(path, "api_key is SuccessFactors' attribute, which Midtier sets from clientKey when companyId is set")
                } else {
                    assertionAttributes.append(name)
                }
            }
        }
        let assertionIssuer = reader.string("assertionIssuer")
        let assertionRecipient = reader.string("assertionRecipient")
        let nameIdFormat = reader.string("nameIdFormat")
        let authnContextClassRef = reader.string("authnContextClassRef")
        let encoding = reader.choice("samlAssertionEncoding", ["base64", "base64url"]).flatMap(AssertionEncoding.init)

        let passphrase = secret(reader, "signingKeyPassphrase", required: false)
        let key = pemFile(reader, "signingKey", reason: reason, label: "PRIVATE KEY", what: "a PEM private key")
        if let key, passphrase == nil, !reader.contains("signingKeyPassphrase") {
            let text = String(decoding: key, as: UTF8.self)
            if text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
                reader.problem("signingKey", "the key is encrypted: give signingKeyPassphrase")
            }
        }
        let certificate = pemFile(reader, "signingCertificate", reason: reason, label: "CERTIFICATE", what: "a PEM certificate")

        guard let tokenServiceURL, let clientKey, let key, let certificate,
            reader.contains("companyId") == (companyId != nil), audience != nil || companyId != nil,
            !reader.problems.has(under: "tokenServicePassword"), !reader.problems.has(under: "assertionAttributes"),
            !reader.problems.has(under: "signingKey"), !reader.problems.has(under: "signingKeyPassphrase"),
            !reader.problems.has(under: "samlAssertionEncoding")
        else { return nil }
        let settings = SAMLBearerSettings(
            tokenServiceURL: tokenServiceURL, clientKey: clientKey, companyId: companyId,
            tokenServiceUser: tokenServiceUser, tokenServicePassword: tokenServicePassword, scope: scope,
            nameQualifier: nameQualifier, assertionAttributes: assertionAttributes,
            audience: audience ?? "www.successfactors.com",
            assertionIssuer: assertionIssuer, assertionRecipient: assertionRecipient,
            nameIdFormat: nameIdFormat ?? "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified",
            authnContextClassRef: authnContextClassRef ?? "urn:oasis:names:tc:SAML:2.0:ac:classes:PreviousSession",
            assertionEncoding: encoding ?? .base64,
            signingKeyPEM: key, signingKeyPassphrase: passphrase, signingCertificatePEM: certificate
        )
        if let validate = validateSigningMaterial, let failure = validate(settings) {
            reader.problem(failure.key, failure.message)
            return nil
        }
        return settings
    }

    /// Whether passwords may go to `url`: https, or plain http to this host (`localhost`,
    /// `127.0.0.1`, `[::1]`, then a port, a path or nothing).
    func isHTTPSOrLoopback(_ url: String) -> Bool {
        let url = url.lowercased()
        guard !url.hasPrefix("https://") else { return true }
        return ["http://localhost", "http://127.0.0.1", "http://[::1]"].contains { url == $0 || url.hasPrefix($0 + ":") || url.hasPrefix($0 + "/") }
    }

    /// The `PrincipalPropagation` keys (docs/forwarding.md): how the certificate travels, its
    /// subject pattern and validity, and the CA that signs it.
    private func principalPropagationSettings(_ reader: ObjectReader, url: String?) -> PrincipalPropagationSettings? {
        let reason = "needed for PrincipalPropagation"
        let mode = reader.choice("principalPropagationMode", ["header", "mutualTLS"]).flatMap(PrincipalPropagationMode.init) ?? .header
        if let url, !url.lowercased().hasPrefix("https://") {
            reader.problem("URL", "must be https for PrincipalPropagation (the user's certificate is only believed over mutual TLS)")
        }
        var pattern: SubjectPattern? = .standard
        if let text = reader.string("subjectPattern") {
            do {
                pattern = try SubjectPattern(text)
            } catch {
                reader.problem("subjectPattern", error.message)
                pattern = nil
            }
        }
        let minutes = reader.integer("certificateValidityMinutes", in: 1...1440) ?? 10
        let certificate = pemFile(reader, "caCertificate", reason: reason, label: "CERTIFICATE", what: "a PEM certificate")
        let passphrase = secret(reader, "caKeyPassphrase", required: false)
        let key = pemFile(reader, "caKey", reason: reason, label: "PRIVATE KEY", what: "a PEM private key")
        if let key, passphrase == nil, !reader.contains("caKeyPassphrase") {
            let text = String(decoding: key, as: UTF8.self)
            if text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
                reader.problem("caKey", "the key is encrypted: give caKeyPassphrase")
            }
        }
        guard let pattern, let certificate, let key, !reader.problems.has(under: "caKey"), !reader.problems.has(under: "caKeyPassphrase"),
            !reader.problems.has(under: "certificateValidityMinutes"), !reader.problems.has(under: "principalPropagationMode")
        else { return nil }
        return PrincipalPropagationSettings(
            mode: mode, subjectPattern: pattern, validityMinutes: minutes,
            caCertificatePEM: certificate, caKeyPEM: key, caKeyPassphrase: passphrase)
    }

    /// The `OAuth2*` keys, BTP's: the token service, the client and where its credentials go,
    /// `scope`, `tokenService.body.*`.
    private func oauth2Settings(_ reader: ObjectReader, type: String, grant: OAuth2Grant, bodyKeys: [String]) -> OAuth2Settings? {
        let reason = "needed for \(type)"
        var tokenServiceURL: String?
        if let text = reader.string("tokenServiceURL", required: true, requiredBecause: reason) {
            switch checkHTTPURL(text, allowQuery: true) {
            case .success(let url) where !isHTTPSOrLoopback(url):
                reader.problem("tokenServiceURL", "must be https (or http to this host): the client's secret and the user's token go there")
            case .success(let url): tokenServiceURL = url
            case .failure(let problem): reader.problem("tokenServiceURL", problem.message)
            }
        }
        _ = reader.choice("tokenServiceURLType", ["Dedicated"])
        let clientId = reader.string("clientId", required: true, requiredBecause: reason)
        let clientSecret = secret(
            reader, "clientSecret", required: grant == .clientCredentials && !reader.contains("tokenServicePassword"),
            requiredBecause: reason)
        let tokenServiceUser = reader.string("tokenServiceUser")
        let tokenServicePassword = secret(
            reader, "tokenServicePassword", required: tokenServiceUser != nil,
            requiredBecause: "needed with tokenServiceUser")
        if reader.contains("tokenServicePassword"), !reader.contains("tokenServiceUser") {
            reader.problem("tokenServicePassword", "is given without tokenServiceUser")
        }
        let inBody = reader.bool("tokenService.addClientCredentialsInBody") ?? true
        let scope = reader.string("scope")
        var extraBody: [(String, String)] = []
        for key in bodyKeys {
            let name = String(key.dropFirst("tokenService.body.".count))
            guard let value = reader.string(key, allowEmpty: true, dynamic: true) else { continue }
            if name.isEmpty || containsControlCharacters(name) || containsControlCharacters(value) {
                reader.problem(key, "must end in a form parameter name and have a value without control characters")
            } else if ["grant_type", "assertion", "subject_token", "client_secret"].contains(name.lowercased()) {
                reader.problem(key, "\(name) is set by Midtier and cannot be configured here")
            } else {
                extraBody.append((name, value))
            }
        }
        guard let tokenServiceURL, let clientId, !reader.problems.has(under: "clientSecret"), !reader.problems.has(under: "tokenServicePassword"),
            !reader.problems.has(under: "tokenServiceUser"), !reader.problems.has(under: "tokenService.addClientCredentialsInBody"),
            !reader.problems.has(under: "tokenServiceURLType"), !reader.problems.has(under: "tokenService.body"),
            reader.contains("tokenServiceUser") == reader.contains("tokenServicePassword")
        else { return nil }
        return OAuth2Settings(
            type: type, grant: grant, tokenServiceURL: tokenServiceURL, clientId: clientId, clientSecret: clientSecret,
            tokenServiceUser: tokenServiceUser, tokenServicePassword: tokenServicePassword,
            addClientCredentialsInBody: inBody, scope: scope, extraBody: extraBody)
    }

    /// `KeyStoreLocation` (a `.p12`/`.pfx` PKCS#12 file, or a `.pem` file with the certificate
    /// chain and the private key) and `KeyStorePassword`; whether it opens is checked by
    /// `validateDestination`.
    private func keyStore(_ reader: ObjectReader, reason: String) -> ClientIdentity? {
        let password = secret(reader, "KeyStorePassword", required: false)
        guard let path = reader.string("KeyStoreLocation", required: true, requiredBecause: reason) else { return nil }
        let lower = path.lowercased()
        let isPKCS12 = lower.hasSuffix(".p12") || lower.hasSuffix(".pfx")
        guard isPKCS12 || lower.hasSuffix(".pem") else {
            reader.problem("KeyStoreLocation", "must name a .p12, .pfx or .pem file")
            return nil
        }
        switch readFile(path) {
        case .failure(let error):
            reader.problem("KeyStoreLocation", "cannot read file \(path): \(error.message)")
            return nil
        case .success(let bytes):
            if isPKCS12 { return .pkcs12(bytes, passphrase: password) }
            let text = String(decoding: bytes, as: UTF8.self)
            guard text.contains("CERTIFICATE-----"), text.contains("PRIVATE KEY-----") else {
                reader.problem("KeyStoreLocation", "file \(path) must hold the certificate (chain) and the private key, PEM")
                return nil
            }
            if password == nil, text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
                reader.problem("KeyStoreLocation", "the key is encrypted: give KeyStorePassword")
                return nil
            }
            return .pem(bytes, passphrase: password)
        }
    }

    /// Reads a PEM file named by a key and checks that it holds a `-----BEGIN … <label>-----`
    /// block.
    private func pemFile(_ reader: ObjectReader, _ name: String, reason: String, label: String, what: String) -> [UInt8]? {
        guard let path = reader.string(name, required: true, requiredBecause: reason) else { return nil }
        switch readFile(path) {
        case .failure(let error):
            reader.problem(name, "cannot read file \(path): \(error.message)")
            return nil
        case .success(let bytes):
            let text = String(decoding: bytes, as: UTF8.self)
            guard text.contains("-----BEGIN "), text.contains(label + "-----") else {
                reader.problem(name, "file \(path) is not \(what)")
                return nil
            }
            return bytes
        }
    }
}
