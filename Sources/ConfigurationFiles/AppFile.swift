import Foundation
import MidtierCore
import MidtierJSON

// `config/apps/<appId>.json`.

extension ConfigurationLoader {
    /// Longest period in days for `blockDisconnectedPeriod`/`wipeDisconnectedPeriod` (about a
    /// century), so that no later date arithmetic can overflow.
    static let maximumPeriodDays = 36500

    /// Reads one app. Returns the app (nil if a value could not be read) and whether it uses
    /// `basic` authentication, which makes `users.json` required.
    ///
    /// `authentication` may be left out; it then means `{"type":"basic"}`, the model's default.
    func loadApp(_ reader: ObjectReader, id: String, definedDestinations: Set<String>) -> (app: AppConfiguration?, usesBasic: Bool) {
        var app = AppConfiguration(id: id)
        var complete = true

        if reader.contains("authentication") {
            if let authentication = appAuthentication(reader, definedDestinations: definedDestinations) {
                app.authentication = authentication
            } else {
                complete = false
            }
        }

        if let elements = reader.array("destinations") {
            var names: [String] = []
            for (path, value) in elements {
                guard case .string(let name) = value else {
                    reader.problems.add(path, "must be a destination name (found \(value.kind))")
                    continue
                }
                if !definedDestinations.contains(name) {
                    reader.problems.add(path, "destination \"\(name)\" is not defined (there is no destinations/\(name).json)")
                } else if names.contains(name) {
                    reader.problems.add(path, "destination \"\(name)\" is listed twice")
                } else {
                    names.append(name)
                }
            }
            app.destinations = names
        }

        if let policy = reader.object("blockWipingPolicy") {
            let days = 0...Self.maximumPeriodDays
            if let enabled = policy.bool("blockWipeEnabled") { app.blockWipingPolicy.blockWipeEnabled = enabled }
            if let block = policy.integer("blockDisconnectedPeriod", in: days) { app.blockWipingPolicy.blockDisconnectedPeriod = block }
            if let wipe = policy.integer("wipeDisconnectedPeriod", in: days) { app.blockWipingPolicy.wipeDisconnectedPeriod = wipe }
            policy.reportUnknownKeys()
        }

        if let group = reader.object("passwordPolicy") { app.passwordPolicy = policyGroup(group, ClientPolicy.passwordPolicy) }
        if let group = reader.object("usagePolicy") { app.usagePolicy = policyGroup(group, ClientPolicy.usagePolicy) }
        if let group = reader.object("featureVectorPolicies") {
            app.featureVectorPolicies = policyGroup(group, ClientPolicy.featureVectorPolicies)
        }
        if let implicit = reader.bool("implicitRegistration") { app.implicitRegistration = implicit }
        if let value = reader.freeObject("logSettings") { app.logSettings = value }
        if let value = reader.freeObject("discovery") { app.discovery = value }
        // A wrong push section is a problem of this file (so the app is not kept) but says
        // nothing against the rest: users.json is still required for basic authentication.
        if let push = reader.object("push"), let settings = pushSettings(push) { app.push = settings }

        reader.reportUnknownKeys()
        let usesBasic = complete && app.authentication == .basic
        return (complete ? app : nil, usesBasic)
    }

    /// Apps of one issuer share one realm of users (docs/identity.md): if they named users by
    /// different claims, the `alice` of one claim would be the `alice` of the other. Each app
    /// whose `userClaim` differs from an earlier app's (by id) of the same issuer is a problem
    /// naming both. Issuers and claims compare by bytes, as realms and ids do.
    func userClaimConflicts(_ apps: [String: AppConfiguration]) -> [ConfigProblem] {
        var first: [ExactString: (app: String, claim: String)] = [:]
        var problems: [ConfigProblem] = []
        for id in apps.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            guard case .jwt(let jwt)? = apps[id]?.authentication else { continue }
            guard let earlier = first[ExactString(jwt.issuer)] else {
                first[ExactString(jwt.issuer)] = (id, jwt.userClaim)
                continue
            }
            if !UserIdentity.sameBytes(earlier.claim, jwt.userClaim) {
                problems.append(
                    ConfigProblem(
                        file: joinPath(joinPath(directory, "apps"), id + ".json"), key: "authentication.userClaim",
                        message: "app \"\(id)\" names users by \"\(jwt.userClaim)\" but app \"\(earlier.app)\" of the same issuer "
                            + "\"\(jwt.issuer)\" names them by \"\(earlier.claim)\"; apps of one issuer share one realm of users "
                            + "(docs/identity.md), so give both the same userClaim"))
            }
        }
        return problems
    }

    /// A client policy group: each known key read as its type says (booleans also as `"true"`
    /// or `"false"`, numbers also as strings, as pasted settings carry them) and given to
    /// clients as JSON booleans, numbers and string lists; an unknown key is an error.
    private func policyGroup(_ group: ObjectReader, _ keys: [(key: String, value: ClientPolicy.Value)]) -> [String: JSON] {
        var values: [String: JSON] = [:]
        for (key, kind) in keys {
            switch kind {
            case .bool:
                if let value = group.bool(key) { values[key] = .bool(value) }
            case .integer(let range):
                if let value = group.integer(key, in: range) { values[key] = .number(value) }
            case .strings:
                guard let elements = group.array(key) else { continue }
                var strings: [JSON] = []
                for (path, element) in elements {
                    if case .string(let text) = element {
                        strings.append(.string(text))
                    } else {
                        group.problems.add(path, "must be a string (found \(element.kind))")
                    }
                }
                values[key] = .array(strings)
            }
        }
        group.reportUnknownKeys()
        return values
    }

    /// `authentication`: `{"type":"basic"}` or
    /// `{"type":"jwt","issuer":..,"audience":..,"jwks":{"file":..}|{"url":..},"userClaim":..}`.
    private func appAuthentication(_ reader: ObjectReader, definedDestinations: Set<String>) -> AppAuthentication? {
        guard let object = reader.object("authentication") else { return nil }
        let type = object.choice("type", ["basic", "jwt", "backend"], required: true)
        switch type {
        case "backend":
            // Checked by the back end of a destination (docs/identity.md, "Signing in with the
            // back end's own users").
            let destination = object.string("destination", required: true, requiredBecause: "needed for backend")
            if let destination, !definedDestinations.contains(destination) {
                object.problem("destination", "destination \"\(destination)\" is not defined (there is no destinations/\(destination).json)")
            }
            var path = "/"
            if let given = object.string("path") {
                if !given.hasPrefix("/") || given.contains("?") || given.contains("#") || given.contains("%") || given.contains("\\")
                    || containsControlCharacters(given)
                    || given.split(separator: "/").contains(where: { $0 == ".." || $0 == "." })
                {
                    object.problem("path", "must be a path under the destination's URL, starting with / (no query, no percent-encoding, no . or ..)")
                } else {
                    path = given
                }
            }
            object.reportUnknownKeys()
            guard let destination, !object.problems.has(under: object.key("destination")), !object.problems.has(under: object.key("path")) else {
                return nil
            }
            return .backend(BackendSignIn(destination: destination, path: path))
        case "basic":
            object.reportUnknownKeys()
            return .basic
        case "jwt":
            let reason = "needed for jwt"
            let issuer = object.string("issuer", required: true, requiredBecause: reason)
            // Realms Midtier names itself (docs/identity.md) are no identity provider's.
            if let issuer, issuer.hasPrefix(BackendSignIn.realmPrefix) || issuer.hasPrefix("midtier:") {
                object.problem("issuer", "\(issuer) is a realm Midtier names itself (backend:…, midtier:…), not an identity provider's issuer")
            }
            let audience = object.string("audience", required: true, requiredBecause: reason)
            let userClaim = object.string("userClaim") ?? "sub"
            let jwks = object.object("jwks", required: true, requiredBecause: reason).flatMap(jwksSource)
            let oauth2Reader = object.object("oauth2")
            let oauth2 = oauth2Reader.flatMap { oauth2Discovery($0, issuer: issuer) }
            object.reportUnknownKeys()
            guard let issuer, let audience, let jwks, oauth2Reader == nil || oauth2 != nil else { return nil }
            return .jwt(JWTAuthentication(issuer: issuer, audience: audience, jwks: jwks, userClaim: userClaim, oauth2: oauth2))
        default:
            // A missing or wrong type is reported; the other keys depend on it.
            object.accept(["issuer", "audience", "jwks", "userClaim", "oauth2"])
            object.reportUnknownKeys()
            return nil
        }
    }

    /// `oauth2`: `{"authorizationEndpoint": URL, "tokenEndpoint": URL, "endUserUI": URL,
    /// "clients": [{"clientID": .., "redirectURL": ..}]}` (`endUserUI` optional). The endpoints
    /// are https URLs (plain http only for localhost, as for `jwks`); a redirect URL is an
    /// absolute URL of any scheme (apps use their own, `com.example.app:/oauth2redirect`).
    ///
    /// Instead of the two endpoints, `"openidConfiguration": path` reads them from the issuer's
    /// OpenID Connect discovery document saved to a file (`<issuer>/.well-known/openid-configuration`),
    /// whose `issuer` must be the app's.
    private func oauth2Discovery(_ oauth2: ObjectReader, issuer: String?) -> OAuth2Discovery? {
        var authorization: String?
        var token: String?
        if let path = oauth2.string("openidConfiguration") {
            if oauth2.contains("authorizationEndpoint") || oauth2.contains("tokenEndpoint") {
                oauth2.problem("openidConfiguration", "give either openidConfiguration or the two endpoints, not both")
                oauth2.accept(["authorizationEndpoint", "tokenEndpoint"])
            } else {
                (authorization, token) = endpoints(fromDocument: path, oauth2, issuer: issuer)
            }
        } else {
            authorization = endpoint(oauth2, "authorizationEndpoint", required: true)
            token = endpoint(oauth2, "tokenEndpoint", required: true)
        }
        let endUserUI = oauth2.contains("endUserUI") ? endpoint(oauth2, "endUserUI", required: false) : nil
        var clients: [OAuth2Discovery.Client] = []
        var clientsComplete = true
        if let elements = oauth2.array("clients", required: true) {
            if elements.isEmpty { oauth2.problem("clients", "must name at least one client"); clientsComplete = false }
            for (path, value) in elements {
                guard let client = ObjectReader.make(value, path: path, problems: oauth2.problems) else { clientsComplete = false; continue }
                let id = client.string("clientID", required: true)
                let redirect = client.string("redirectURL", required: true)
                client.reportUnknownKeys()
                if let id, id.isEmpty || id.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
                    client.problem("clientID", "must be a non-empty client id without spaces or control characters")
                    clientsComplete = false
                } else if let redirect, !Self.isRedirectURL(redirect) {
                    client.problem("redirectURL", "must be an absolute URL (scheme:…) without spaces or control characters")
                    clientsComplete = false
                } else if let id, let redirect {
                    clients.append(OAuth2Discovery.Client(clientID: id, redirectURL: redirect))
                } else {
                    clientsComplete = false
                }
            }
        } else {
            clientsComplete = false
        }
        oauth2.reportUnknownKeys()
        guard let authorization, let token, clientsComplete, oauth2.contains("endUserUI") == (endUserUI != nil) else { return nil }
        return OAuth2Discovery(authorizationEndpoint: authorization, tokenEndpoint: token, endUserUI: endUserUI, clients: clients)
    }

    /// `authorization_endpoint` and `token_endpoint` of a saved OpenID Connect discovery document.
    private func endpoints(fromDocument path: String, _ oauth2: ObjectReader, issuer: String?) -> (String?, String?) {
        let bytes: [UInt8]
        switch readFile(path) {
        case .failure(let error):
            oauth2.problem("openidConfiguration", "cannot read file \(path): \(error.message)")
            return (nil, nil)
        case .success(let read):
            bytes = read
        }
        guard case .object(let members)? = JSONParser.parse(bytes).value else {
            oauth2.problem("openidConfiguration", "file \(path) is not an OpenID Connect discovery document (a JSON object)")
            return (nil, nil)
        }
        func member(_ name: String) -> String? {
            members.first { $0.key == name }.flatMap { if case .string(let text) = $0.value { text } else { nil } }
        }
        if let issuer, let documented = member("issuer"), documented != issuer {
            oauth2.problem("openidConfiguration", "file \(path) is the document of issuer \(documented), not of this app's issuer \(issuer)")
            return (nil, nil)
        }
        var found: [String] = []
        for name in ["authorization_endpoint", "token_endpoint"] {
            guard let url = member(name) else {
                oauth2.problem("openidConfiguration", "file \(path) has no \(name)")
                return (nil, nil)
            }
            switch Self.checkedEndpoint(url) {
            case .success(let checked): found.append(checked)
            case .failure(let problem):
                oauth2.problem("openidConfiguration", "the \(name) in file \(path) \(problem)")
                return (nil, nil)
            }
        }
        return (found[0], found[1])
    }

    /// An IdP endpoint: https, or plain http for localhost only.
    private func endpoint(_ reader: ObjectReader, _ name: String, required: Bool) -> String? {
        guard let text = reader.string(name, required: required) else { return nil }
        switch Self.checkedEndpoint(text) {
        case .success(let checked): return checked
        case .failure(let problem):
            reader.problem(name, problem.description)
            return nil
        }
    }

    static func checkedEndpoint(_ text: String) -> Result<String, EndpointProblem> {
        switch checkHTTPURL(text, allowQuery: true) {
        case .failure(let problem):
            return .failure(EndpointProblem(problem.message))
        case .success(let checked):
            let components = URLComponents(string: checked)
            let host = components?.host?.lowercased() ?? ""
            guard components?.scheme?.lowercased() == "https" || ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host) else {
                return .failure(EndpointProblem("must be an https URL (plain http only for localhost)"))
            }
            return .success(checked)
        }
    }

    /// `scheme:rest`, the scheme as RFC 3986 spells it, no spaces or control characters.
    static func isRedirectURL(_ text: String) -> Bool {
        guard let colon = text.firstIndex(of: ":"), colon > text.startIndex, text.index(after: colon) < text.endIndex,
            !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F })
        else { return false }
        let scheme = text[..<colon]
        return scheme.first!.isLetter && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
    }

    /// `jwks`: `{"file": path}` (read now and checked to be a JWKS: a JSON object with a
    /// `keys` array; relative to the working directory) or `{"url": URL}` (https; plain http
    /// only for a loopback host, since keys fetched over plain http could be swapped by
    /// anyone on the network).
    func jwksSource(_ jwks: ObjectReader) -> JWTAuthentication.KeySource? {
        let path = jwks.string("file")
        let url = jwks.string("url")
        jwks.reportUnknownKeys()
        switch (jwks.contains("file"), jwks.contains("url")) {
        case (true, true):
            jwks.problems.add(jwks.path, "give either file or url, not both")
            return nil
        case (false, false):
            jwks.problems.add(jwks.path, "must be {\"file\": path} or {\"url\": URL}")
            return nil
        default:
            break
        }
        if let path {
            switch readFile(path) {
            case .failure(let error):
                jwks.problem("file", "cannot read file \(path): \(error.message)")
                return nil
            case .success(let bytes):
                guard case .object(let members)? = JSONParser.parse(bytes).value,
                    members.contains(where: { if $0.key == "keys", case .array = $0.value { true } else { false } })
                else {
                    jwks.problem("file", "file \(path) is not a JWKS (a JSON object with a \"keys\" array)")
                    return nil
                }
                return .file(path: path)
            }
        }
        if url != nil {
            return endpoint(jwks, "url", required: false).map { .url($0) }
        }
        return nil
    }
}

/// Why a URL cannot be an IdP or JWKS endpoint.
struct EndpointProblem: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
