import Crypto
import CryptoExtras
import Foundation
import MidtierCore
import MidtierJSON

// `push` in `config/apps/<appId>.json` (docs/configuration.md, "push"; docs/push.md):
// `{"apns": {...}, "fcm": {...}}`, either or both.

extension ConfigurationLoader {
    /// Reads an app's `push`. The keys are read and checked now (APNs: a P-256 key that loads;
    /// FCM: a service account whose RSA key loads), so that a wrong key stops the start or the
    /// reload rather than the first notification. Returns nil when anything is wrong; every
    /// problem is recorded.
    func pushSettings(_ push: ObjectReader) -> PushSettings? {
        let apnsReader = push.object("apns")
        let fcmReader = push.object("fcm")
        let apns = apnsReader.flatMap(apnsSettings)
        let fcm = fcmReader.flatMap(fcmSettings)
        push.reportUnknownKeys()
        if !push.contains("apns") && !push.contains("fcm") {
            // Only unknown keys (reported above, with a hint for a typo) say enough already.
            if push.keys.isEmpty {
                push.problems.add(push.path, "must have apns, fcm or both (leave push out for an app without push)")
            }
            return nil
        }
        guard apnsReader == nil || apns != nil, fcmReader == nil || fcm != nil,
            push.contains("apns") == (apnsReader != nil), push.contains("fcm") == (fcmReader != nil)
        else { return nil }
        return PushSettings(apns: apns, fcm: fcm)
    }

    /// `apns`: `teamId`, `keyId`, `key` (a secret: the `.p8` file's text), `topic`,
    /// `environment`, and optionally `endpoint` and `caFile`.
    private func apnsSettings(_ apns: ObjectReader) -> APNsSettings? {
        let teamID = appleID(apns, "teamId", what: "team id")
        let keyID = appleID(apns, "keyId", what: "key id")
        let key = secret(apns, "key", required: true).flatMap { apnsKey($0, apns) }
        let topic = apns.string("topic", required: true)
        if let topic, topic.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control }) {
            apns.problem("topic", "must be the app's bundle id (apns-topic), without spaces or control characters")
        }
        let environment = apns.choice("environment", APNsSettings.Environment.allCases.map(\.rawValue), required: true)
            .flatMap(APNsSettings.Environment.init(rawValue:))
        let endpoint = pushEndpoint(apns, "endpoint")
        let caFile = certificateFile(apns, "caFile")
        apns.reportUnknownKeys()
        guard let teamID, let keyID, let key, let topic, let environment,
            !apns.problems.has(under: apns.path),
            apns.contains("endpoint") == (endpoint != nil), apns.contains("caFile") == (caFile != nil)
        else { return nil }
        return APNsSettings(
            teamID: teamID, keyID: keyID, privateKeyPEM: key, topic: topic, environment: environment,
            endpoint: endpoint, caFile: caFile)
    }

    /// `fcm`: `projectId`, `serviceAccount` (a secret: the service account's JSON key file),
    /// and optionally `tokenURI`, `endpoint` and `caFile`.
    private func fcmSettings(_ fcm: ObjectReader) -> FCMSettings? {
        let projectID = fcm.string("projectId", required: true)
        if let projectID, !projectID.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") }) {
            fcm.problem("projectId", "must be the Firebase project id: lower-case letters, digits and '-'")
        }
        let tokenURI = fcm.string("tokenURI").flatMap { tokenEndpoint($0, fcm, "tokenURI") }
        let account: ServiceAccount?
        if case .object(let members)? = fcm.value("serviceAccount"),
            !members.contains(where: { $0.key == "env" || $0.key == "file" }),
            members.contains(where: { $0.key == "type" || $0.key == "private_key" })
        {
            fcm.problem(
                "serviceAccount",
                "give the service account's JSON as a string, {\"env\": \"VAR\"} or "
                    + "{\"file\": \"path\"} (the JSON key file itself), not pasted into this file as an object")
            account = nil
        } else {
            account = secret(fcm, "serviceAccount", required: true)
                .flatMap { serviceAccount($0, fcm, tokenURIGiven: fcm.contains("tokenURI")) }
        }
        let endpoint = pushEndpoint(fcm, "endpoint")
        let caFile = certificateFile(fcm, "caFile")
        fcm.reportUnknownKeys()
        guard let projectID, let account, let tokenURI = tokenURI ?? account.tokenURI,
            !fcm.problems.has(under: fcm.path),
            fcm.contains("endpoint") == (endpoint != nil), fcm.contains("caFile") == (caFile != nil)
        else { return nil }
        return FCMSettings(
            projectID: projectID, clientEmail: account.clientEmail, privateKeyPEM: account.privateKeyPEM,
            tokenURI: tokenURI, endpoint: endpoint ?? FCMSettings.defaultEndpoint, caFile: caFile)
    }

    /// Apple's team and key ids: 10 capital letters and digits.
    private func appleID(_ reader: ObjectReader, _ name: String, what: String) -> String? {
        guard let text = reader.string(name, required: true) else { return nil }
        guard text.utf8.count == 10, text.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) }) else {
            reader.problem(name, "must be Apple's \(what): 10 capital letters and digits")
            return nil
        }
        return text
    }

    /// The `.p8` key: a P-256 private key in PEM, as Apple hands it out (PKCS#8,
    /// `-----BEGIN PRIVATE KEY-----`). Checked with swift-crypto, which the APNs client's
    /// jwt-kit uses underneath, so a key that passes here signs there.
    private func apnsKey(_ pem: String, _ apns: ObjectReader) -> String? {
        do {
            _ = try P256.Signing.PrivateKey(pemRepresentation: pem)
            return pem
        } catch {
            apns.problem(
                "key",
                "must be the text of Apple's .p8 key file (a P-256 private key in PEM, "
                    + "-----BEGIN PRIVATE KEY-----); the secret given does not load as one"
                    + fileHint(apns, "key", looksLikeContents: pem.contains("-----BEGIN")))
            return nil
        }
    }

    /// A hint for a secret that was given inline but looks like a path rather than contents.
    private func fileHint(_ reader: ObjectReader, _ name: String, looksLikeContents: Bool) -> String {
        guard case .string? = reader.value(name), !looksLikeContents else { return "" }
        return " (to read it from a file, write {\"file\": \"path\"})"
    }

    /// What Midtier takes from a Google service account's JSON key file.
    private struct ServiceAccount {
        var clientEmail: String
        var privateKeyPEM: String
        var tokenURI: String?
    }

    /// The service account's JSON: `type` `service_account`, `client_email`, `private_key` (an
    /// RSA key in PEM that loads) and `token_uri` (https; may be missing when `tokenURI` is
    /// given). Other members (`project_id`, `private_key_id`, …) are not used. Problems name the
    /// member, never a value.
    private func serviceAccount(_ text: String, _ fcm: ObjectReader, tokenURIGiven: Bool) -> ServiceAccount? {
        let members: [String: JSON]
        switch StrictJSON.value(Array(text.utf8)) {
        case .failure(let error):
            // The parser's messages say where, and quote nothing but a duplicate key's name or
            // a number's text; a number could be part of the secret, so that one is not shown.
            let detail = error.message.hasPrefix("the number") ? "a number is out of range" : error.message
            fcm.problem(
                "serviceAccount",
                "must be the service account's JSON key file; the secret given is not JSON (\(detail))"
                    + fileHint(fcm, "serviceAccount", looksLikeContents: text.hasPrefix("{")))
            return nil
        case .success(let value):
            guard let object = value.members else {
                fcm.problem("serviceAccount", "must be the service account's JSON key file (a JSON object; found \(value.kind))")
                return nil
            }
            members = Dictionary(object.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        }
        func member(_ name: String) -> String? {
            guard let value = members[name] else {
                fcm.problem("serviceAccount", "the service account has no \(name)")
                return nil
            }
            guard case .string(let text) = value, !text.isEmpty else {
                fcm.problem("serviceAccount", "the service account's \(name) must be a non-empty string (found \(value.kind))")
                return nil
            }
            return text
        }
        var complete = true
        if let type = member("type"), type != "service_account" {
            fcm.problem("serviceAccount", "the service account's type must be \"service_account\" (is this the key file of a service account?)")
            complete = false
        }
        let email = member("client_email")
        if let email,
            !email.contains("@") || email.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control })
        {
            fcm.problem("serviceAccount", "the service account's client_email must be an e-mail address without spaces or control characters")
            complete = false
        }
        var key = member("private_key")
        if let pem = key {
            do {
                _ = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
            } catch {
                fcm.problem(
                    "serviceAccount",
                    "the service account's private_key must be an RSA private key in PEM "
                        + "(-----BEGIN PRIVATE KEY-----) of at least 2048 bits; it does not load as one")
                key = nil
            }
        }
        var tokenURI: String?
        if members["token_uri"] != nil || !tokenURIGiven {
            if let uri = member("token_uri") {
                tokenURI = tokenEndpoint(uri, fcm, "serviceAccount", what: "the service account's token_uri ")
                if tokenURI == nil { complete = false }
            } else {
                complete = false
            }
        }
        guard complete, let email, let key else { return nil }
        return ServiceAccount(clientEmail: email, privateKeyPEM: key, tokenURI: tokenURI)
    }

    /// An OAuth token endpoint: an absolute https URL (a path is fine).
    private func tokenEndpoint(_ text: String, _ reader: ObjectReader, _ name: String, what: String = "") -> String? {
        switch checkHTTPURL(text, allowQuery: true) {
        case .failure(let problem):
            reader.problem(name, what + problem.message)
            return nil
        case .success(let url):
            guard url.lowercased().hasPrefix("https://") else {
                reader.problem(name, what + "must be an https URL")
                return nil
            }
            return url
        }
    }

    /// Where notifications are posted: `https://host[:port]`, nothing after (a trailing `/` is
    /// dropped).
    private func pushEndpoint(_ reader: ObjectReader, _ name: String) -> String? {
        guard let text = reader.string(name) else { return nil }
        let shape = "must be https://host or https://host:port, without a path, query or fragment"
        if text.contains("?") || text.contains("#") {
            reader.problem(name, shape)
            return nil
        }
        switch checkHTTPURL(text, allowQuery: false) {
        case .failure(let problem):
            reader.problem(name, problem.message == "must be an absolute http or https URL" ? shape : problem.message)
            return nil
        case .success(let url):
            guard url.lowercased().hasPrefix("https://"), let components = URLComponents(string: url),
                components.path.isEmpty
            else {
                reader.problem(name, shape)
                return nil
            }
            return url
        }
    }

    /// A PEM file of CA certificates: it must read and hold at least one certificate.
    private func certificateFile(_ reader: ObjectReader, _ name: String) -> String? {
        guard let path = reader.string(name) else { return nil }
        switch readFile(path) {
        case .failure(let error):
            reader.problem(name, "cannot read file \(path): \(error.message)")
            return nil
        case .success(let bytes):
            guard let text = utf8Text(bytes), text.contains("-----BEGIN CERTIFICATE-----") else {
                reader.problem(name, "file \(path) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
                return nil
            }
            return path
        }
    }
}
