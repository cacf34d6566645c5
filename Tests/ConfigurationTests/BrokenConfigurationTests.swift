import ConfigurationFiles
import Foundation
import MidtierCore
import Testing

/// One broken change to the valid fixture, and the one problem it must cause.
struct Broken: Sendable, CustomTestStringConvertible {
    var name: String
    /// The file (under `config/`) the problem names.
    var file: String
    var key: String
    /// A recognisable part of the message.
    var message: String
    /// How many problems the change causes in all (usually exactly one: no noise).
    var count = 1
    var change: @Sendable (Fixture) -> Void

    var testDescription: String { name }

    init(_ name: String, file: String, key: String, message: String, count: Int = 1, change: @escaping @Sendable (Fixture) -> Void) {
        self.name = name
        self.file = file
        self.key = key
        self.message = message
        self.count = count
        self.change = change
    }
}

let midtier = "midtier.json"
let sf = "destinations/sf.json"
let legacy = "destinations/legacy.json"
let payroll = "apps/com.example.payroll.json"
let jwtApp = "apps/com.example.jwt.json"
let users = "users.json"

let brokenCases: [Broken] = [
    // midtier.json
    Broken("unknown server key gets a hint for a typo", file: midtier, key: "lissten", message: #"unknown key (did you mean "listen"?)"#) {
        $0.set(midtier, "lissten", #""0.0.0.0:1""#)
    },
    Broken("unknown key differing in case gets a hint", file: midtier, key: "LogLevel", message: #"did you mean "logLevel"?"#) {
        $0.set(midtier, "LogLevel", #""info""#)
    },
    Broken("listen without host", file: midtier, key: "listen", message: "must be host:port") {
        $0.set(midtier, "listen", #""8080""#)
    },
    Broken("listen with bare IPv6", file: midtier, key: "listen", message: "in brackets") {
        $0.set(midtier, "listen", #""::1:8080""#)
    },
    Broken("listen port out of range", file: midtier, key: "listen", message: "port from 1 to 65535") {
        $0.set(midtier, "listen", #""0.0.0.0:70000""#)
    },
    Broken("adminListen wrong type", file: midtier, key: "adminListen", message: "must be a string (found a number)") {
        $0.set(midtier, "adminListen", "9090")
    },
    Broken("adminListen on the listen port", file: midtier, key: "adminListen", message: "same port as listen") {
        $0.set(midtier, "adminListen", #""127.0.0.1:8081""#)
    },
    Broken("publicURL not absolute", file: midtier, key: "publicURL", message: "absolute http or https URL") {
        $0.set(midtier, "publicURL", #""mobile.example.com""#)
    },
    Broken("store of unknown kind", file: midtier, key: "store", message: "sqlite:PATH or a postgres:// URL") {
        $0.set(midtier, "store", #""mysql://db/midtier""#)
    },
    Broken("adminTokenHashes not bcrypt", file: midtier, key: "adminTokenHashes[1]", message: "bcrypt hash") {
        $0.set(midtier, "adminTokenHashes", "[\"\(Values.adminHash)\", \"$2b$12$tooShort\"]")
    },
    Broken("logLevel unknown", file: midtier, key: "logLevel", message: "must be one of") {
        $0.set(midtier, "logLevel", #""verbose""#)
    },
    Broken("maxRequestBodyBytes not a number", file: midtier, key: "maxRequestBodyBytes", message: "whole number of at least 1") {
        $0.set(midtier, "maxRequestBodyBytes", #""lots""#)
    },
    Broken("maxRequestBodyBytes beyond Int", file: midtier, key: "maxRequestBodyBytes", message: "whole number") {
        $0.set(midtier, "maxRequestBodyBytes", "123456789012345678901234567890")
    },
    Broken("credentialCacheSeconds out of range", file: midtier, key: "credentialCacheSeconds", message: "from 0 to 86400") {
        $0.set(midtier, "credentialCacheSeconds", "100000")
    },
    Broken("midtier.json missing", file: midtier, key: "", message: "required file is missing") {
        $0.files[midtier] = nil
    },
    Broken(
        "invalid JSON says where", file: midtier, key: "", message: "invalid JSON at line 3, column 1: a comma after the last member is not allowed"
    ) {
        $0.files[midtier] = nil
        $0.rawFiles[midtier] = "{\n  \"listen\": \"0.0.0.0:8080\",\n}"
    },
    Broken("duplicate key", file: midtier, key: "logLevel", message: "duplicate key") {
        $0.files[midtier] = nil
        $0.rawFiles[midtier] = #"{"logLevel":"info","logLevel":"debug"}"#
    },
    Broken("file is an array", file: midtier, key: "", message: "must contain a JSON object (found an array)") {
        $0.files[midtier] = nil
        $0.rawFiles[midtier] = "[]"
    },
    Broken("file is not UTF-8", file: midtier, key: "", message: "not valid UTF-8") {
        $0.files[midtier] = nil
        $0.rawBytes[midtier] = Array(#"{"logLevel":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
    },

    // destinations
    Broken("unknown destination key", file: sf, key: "CloudConnectorLocationId", message: "unknown key") {
        $0.set(sf, "CloudConnectorLocationId", #""loc1""#)
    },
    Broken("typo in a key of another authentication type gets a hint", file: sf, key: "Passwort", message: #"did you mean "Password"?"#) {
        $0.set(sf, "Passwort", #""x""#)
    },
    Broken("unknown key inside an object", file: payroll, key: "blockWipingPolicy.wipePeriod", message: "unknown key") {
        $0.set(payroll, "blockWipingPolicy", #"{"wipePeriod":3}"#)
    },
    Broken("Name differs from file name", file: sf, key: "Name", message: #"must equal the file name without .json ("sf")"#) {
        $0.set(sf, "Name", #""successfactors""#)
    },
    Broken("Name missing", file: sf, key: "Name", message: "missing required key") {
        $0.remove(sf, "Name")
    },
    Broken("reserved destination name", file: "destinations/odata.json", key: "Name", message: "reserved") {
        $0.files["destinations/odata.json"] = [("Name", #""odata""#), ("URL", #""http://x.example""#), ("Authentication", #""NoAuthentication""#)]
    },
    Broken("destination name with bad characters", file: "destinations/my dest.json", key: "Name", message: "letters, digits") {
        $0.files["destinations/my dest.json"] = [
            ("Name", #""my dest""#), ("URL", #""http://x.example""#), ("Authentication", #""NoAuthentication""#),
        ]
    },
    Broken("URL not http", file: sf, key: "URL", message: "absolute http or https URL") {
        $0.set(sf, "URL", #""ftp://files.example/""#)
    },
    Broken("URL with a query", file: sf, key: "URL", message: "must not contain a query") {
        $0.set(sf, "URL", #""https://api.sf.example/odata/v2?x=1""#)
    },
    Broken("URL missing", file: legacy, key: "URL", message: "missing required key") {
        $0.remove(legacy, "URL")
    },
    Broken("Authentication unsupported", file: sf, key: "Authentication", message: "must be one of") {
        $0.set(sf, "Authentication", #""OAuth2Password""#)
    },
    Broken("Type unsupported", file: sf, key: "Type", message: #""HTTP""#) {
        $0.set(sf, "Type", #""RFC""#)
    },
    Broken("ProxyType unsupported", file: sf, key: "ProxyType", message: #""Internet""#) {
        $0.set(sf, "ProxyType", #""PrivateLink""#)
    },
    Broken("SAML without companyId and audience", file: sf, key: "audience", message: "needed for OAuth2SAMLBearerAssertion without companyId") {
        $0.remove(sf, "companyId")
        $0.remove(sf, "audience")
    },
    Broken("tokenServiceUser without its password", file: sf, key: "tokenServicePassword", message: "needed with tokenServiceUser") {
        $0.set(sf, "tokenServiceUser", #""OAUTH_CLIENT""#)
    },
    Broken("tokenServicePassword without its user", file: sf, key: "tokenServicePassword", message: "without tokenServiceUser") {
        $0.set(sf, "tokenServicePassword", #""secret-1234""#)
    },
    Broken("assertionAttributes naming api_key", file: sf, key: "assertionAttributes[1]", message: "SuccessFactors' attribute") {
        $0.set(sf, "assertionAttributes", #"["mail", "api_key"]"#)
    },
    Broken("PrincipalPropagation without its CA", file: sf, key: "caCertificate", message: "missing required key (needed for PrincipalPropagation)") {
        $0.set(sf, "Authentication", #""PrincipalPropagation""#)
        $0.set(sf, "principalPropagationMode", #""mutualTLS""#)
        $0.set(sf, "caKey", "\"\($0.root)/certs/sf.key\"")
    },
    Broken("PrincipalPropagation with a broken subject pattern", file: sf, key: "subjectPattern", message: "XX is not an attribute type") {
        $0.set(sf, "Authentication", #""PrincipalPropagation""#)
        $0.set(sf, "principalPropagationMode", #""mutualTLS""#)
        $0.set(sf, "caKey", "\"\($0.root)/certs/sf.key\"")
        $0.set(sf, "caCertificate", "\"\($0.root)/certs/sf.crt\"")
        $0.set(sf, "subjectPattern", #""CN=${name},XX=1""#)
    },
    Broken("PrincipalPropagation in header mode without Midtier's certificate", file: sf, key: "KeyStoreLocation", message: "missing required key") {
        $0.set(sf, "Authentication", #""PrincipalPropagation""#)
        $0.set(sf, "caKey", "\"\($0.root)/certs/sf.key\"")
        $0.set(sf, "caCertificate", "\"\($0.root)/certs/sf.crt\"")
    },
    Broken(
        "ClientCertificateAuthentication with a key store of another kind", file: sf, key: "KeyStoreLocation",
        message: "must name a .p12, .pfx or .pem file"
    ) {
        $0.set(sf, "Authentication", #""ClientCertificateAuthentication""#)
        $0.set(sf, "KeyStoreLocation", #""certs/client.jks""#)
    },
    Broken("SAML without clientKey", file: sf, key: "clientKey", message: "missing required key (needed for OAuth2SAMLBearerAssertion)") {
        $0.remove(sf, "clientKey")
    },
    Broken("SAML without signingCertificate", file: sf, key: "signingCertificate", message: "missing required key") {
        $0.remove(sf, "signingCertificate")
    },
    Broken("tokenServiceURL not a URL", file: sf, key: "tokenServiceURL", message: "absolute http or https URL") {
        $0.set(sf, "tokenServiceURL", #""/oauth/token""#)
    },
    Broken("unreadable key file", file: sf, key: "signingKey", message: "cannot read file /nonexistent/sf.key: file not found") {
        $0.set(sf, "signingKey", #""/nonexistent/sf.key""#)
    },
    Broken("certificate file that is not a certificate", file: sf, key: "signingCertificate", message: "is not a PEM certificate") {
        $0.set(sf, "signingCertificate", "\"\($0.root)/certs/sf.key\"")
    },
    Broken("encrypted key without passphrase", file: sf, key: "signingKey", message: "give signingKeyPassphrase") {
        $0.writeText("certs/encrypted.key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----\n")
        $0.set(sf, "signingKey", "\"\($0.root)/certs/encrypted.key\"")
        $0.remove(sf, "signingKeyPassphrase")
    },
    Broken("env secret missing", file: sf, key: "signingKeyPassphrase", message: "environment variable TEST_SF_KEY_PASSPHRASE is not set") {
        $0.environment = [:]
    },
    Broken("secret file unreadable", file: legacy, key: "Password", message: "cannot read secret file /nonexistent/password: file not found") {
        $0.set(legacy, "Password", #"{"file":"/nonexistent/password"}"#)
    },
    Broken("secret with both env and file", file: legacy, key: "Password", message: "either env or file") {
        $0.set(legacy, "Password", #"{"env":"A","file":"/b"}"#)
    },
    Broken("secret of an unknown form", file: legacy, key: "Password.vault", message: "unknown key", count: 2) {
        $0.set(legacy, "Password", #"{"vault":"x"}"#)
    },
    Broken("basic without User", file: legacy, key: "User", message: "missing required key (needed for BasicAuthentication)") {
        $0.remove(legacy, "User")
    },
    Broken("basic without Password", file: legacy, key: "Password", message: "missing required key") {
        $0.remove(legacy, "Password")
    },
    Broken("timeout not a number", file: sf, key: "timeout", message: "whole number from 1 to") {
        $0.set(sf, "timeout", #""30s""#)
    },
    Broken("timeout wrong type", file: sf, key: "timeout", message: "(found an object)") {
        $0.set(sf, "timeout", #"{"ms":1}"#)
    },
    Broken("timeout zero", file: sf, key: "timeout", message: "whole number from 1 to") {
        $0.set(sf, "timeout", "0")
    },
    Broken("samlAssertionEncoding unknown", file: sf, key: "samlAssertionEncoding", message: #""base64", "base64url""#) {
        $0.set(sf, "samlAssertionEncoding", #""hex""#)
    },
    Broken("header name not a token", file: sf, key: "URL.headers.Bad Header", message: "valid HTTP header name") {
        $0.set(sf, "URL.headers.Bad Header", #""x""#)
    },
    Broken("header Midtier controls", file: sf, key: "URL.headers.Authorization", message: "set by Midtier") {
        $0.set(sf, "URL.headers.Authorization", #""Basic abc""#)
    },
    Broken("header value with a line break", file: sf, key: "URL.headers.X-Trace", message: "line breaks") {
        $0.set(sf, "URL.headers.X-Trace", #""on\r\nX-Evil: 1""#)
    },
    Broken("query value not a string", file: sf, key: "URL.queries.customPageSize", message: "must be a string (found a number)") {
        $0.set(sf, "URL.queries.customPageSize", "100")
    },
    Broken("metadata patch without property", file: sf, key: "metadataPatches[0].property", message: "missing required key") {
        $0.set(sf, "metadataPatches", #"[{"entityType":"E","set":{"MaxLength":"20"}}]"#)
    },
    Broken("metadata Scale larger than Precision", file: sf, key: "metadataPatches[0].set.Scale", message: "larger than Precision") {
        $0.set(sf, "metadataPatches", #"[{"entityType":"E","property":"p","set":{"Precision":"3","Scale":"5"}}]"#)
    },
    Broken("metadata facet of wrong type", file: sf, key: "metadataPatches[1].set.Precision", message: "string or a number (found an object)") {
        $0.set(
            sf, "metadataPatches",
            #"[{"entityType":"E","property":"p","set":{"Precision":15,"Scale":2}},{"entityType":"E","property":"q","set":{"Precision":{}}}]"#)
    },

    // apps
    Broken("app names an undefined destination", file: payroll, key: "destinations[1]", message: #"destination "nowhere" is not defined"#) {
        $0.set(payroll, "destinations", #"["sf","nowhere"]"#)
    },
    Broken("app lists a destination twice", file: payroll, key: "destinations[2]", message: "listed twice") {
        $0.set(payroll, "destinations", #"["sf","legacy","sf"]"#)
    },
    Broken("app destinations not an array", file: payroll, key: "destinations", message: "must be an array (found a string)") {
        $0.set(payroll, "destinations", #""sf""#)
    },
    Broken("app unknown key", file: payroll, key: "destinationz", message: "unknown key") {
        $0.set(payroll, "destinationz", "[]")
    },
    Broken("app authentication type unknown", file: payroll, key: "authentication.type", message: #""basic", "jwt""#) {
        $0.set(payroll, "authentication", #"{"type":"oauth"}"#)
    },
    Broken("jwt without issuer", file: jwtApp, key: "authentication.issuer", message: "missing required key") {
        $0.set(jwtApp, "authentication", #"{"type":"jwt","audience":"a","jwks":{"url":"https://idp.example/jwks"}}"#)
    },
    Broken("oauth2 without tokenEndpoint", file: jwtApp, key: "authentication.oauth2.tokenEndpoint", message: "missing required key") {
        $0.set(
            jwtApp, "authentication",
            #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"https://idp.example/jwks"},"oauth2":{"authorizationEndpoint":"https://idp.example/auth","clients":[{"clientID":"app","redirectURL":"com.example.app:/cb"}]}}"#
        )
    },
    Broken("oauth2 endpoint over plain http", file: jwtApp, key: "authentication.oauth2.authorizationEndpoint", message: "https") {
        $0.set(
            jwtApp, "authentication",
            #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"https://idp.example/jwks"},"oauth2":{"authorizationEndpoint":"http://idp.example/auth","tokenEndpoint":"https://idp.example/token","clients":[{"clientID":"app","redirectURL":"com.example.app:/cb"}]}}"#
        )
    },
    Broken("oauth2 without clients", file: jwtApp, key: "authentication.oauth2.clients", message: "at least one") {
        $0.set(
            jwtApp, "authentication",
            #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"https://idp.example/jwks"},"oauth2":{"authorizationEndpoint":"https://idp.example/auth","tokenEndpoint":"https://idp.example/token","clients":[]}}"#
        )
    },
    Broken("oauth2 redirect URL not absolute", file: jwtApp, key: "authentication.oauth2.clients[0].redirectURL", message: "absolute URL") {
        $0.set(
            jwtApp, "authentication",
            #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"https://idp.example/jwks"},"oauth2":{"authorizationEndpoint":"https://idp.example/auth","tokenEndpoint":"https://idp.example/token","clients":[{"clientID":"app","redirectURL":"/cb"}]}}"#
        )
    },
    Broken("oauth2 unknown key", file: jwtApp, key: "authentication.oauth2.clientSecret", message: "unknown key") {
        $0.set(
            jwtApp, "authentication",
            #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"https://idp.example/jwks"},"oauth2":{"authorizationEndpoint":"https://idp.example/auth","tokenEndpoint":"https://idp.example/token","clientSecret":"x","clients":[{"clientID":"app","redirectURL":"com.example.app:/cb"}]}}"#
        )
    },
    Broken("trustedCertificates for a plain http URL", file: legacy, key: "trustedCertificates", message: "only for an https URL") {
        $0.set(legacy, "trustedCertificates", "\"\($0.root)/certs/sf.crt\"")
    },
    Broken("trustedCertificates not a PEM file", file: sf, key: "trustedCertificates", message: "not a PEM file of certificates") {
        $0.writeText("not-a-certificate.txt", "hello")
        $0.set(sf, "trustedCertificates", "\"\($0.root)/not-a-certificate.txt\"")
    },
    Broken(
        "oauth2 discovery document of another issuer", file: jwtApp, key: "authentication.oauth2.openidConfiguration",
        message: "not of this app's issuer"
    ) {
        $0.writeText(
            "other-idp.json",
            #"{"issuer":"https://other.example","authorization_endpoint":"https://other.example/a","token_endpoint":"https://other.example/t"}"#)
        $0.set(
            jwtApp, "authentication",
            #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"https://idp.example/jwks"},"oauth2":{"openidConfiguration":"\#($0.root)/other-idp.json","clients":[{"clientID":"app","redirectURL":"com.example.app:/cb"}]}}"#
        )
    },
    Broken("oauth2 discovery document and endpoints both", file: jwtApp, key: "authentication.oauth2.openidConfiguration", message: "not both") {
        $0.writeText("idp.json", #"{"issuer":"i","authorization_endpoint":"https://idp.example/a","token_endpoint":"https://idp.example/t"}"#)
        $0.set(
            jwtApp, "authentication",
            #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"https://idp.example/jwks"},"oauth2":{"openidConfiguration":"\#($0.root)/idp.json","authorizationEndpoint":"https://idp.example/a","tokenEndpoint":"https://idp.example/t","clients":[{"clientID":"app","redirectURL":"com.example.app:/cb"}]}}"#
        )
    },
    Broken("jwks file unreadable", file: jwtApp, key: "authentication.jwks.file", message: "cannot read file /nonexistent/jwks.json") {
        $0.set(jwtApp, "authentication", #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"file":"/nonexistent/jwks.json"}}"#)
    },
    Broken("jwks file not a JWKS", file: jwtApp, key: "authentication.jwks.file", message: "is not a JWKS") {
        $0.set(jwtApp, "authentication", "{\"type\":\"jwt\",\"issuer\":\"i\",\"audience\":\"a\",\"jwks\":{\"file\":\"\($0.root)/certs/sf.crt\"}}")
    },
    Broken("jwks over plain http", file: jwtApp, key: "authentication.jwks.url", message: "https") {
        $0.set(jwtApp, "authentication", #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"http://idp.example/jwks"}}"#)
    },
    Broken("jwks with neither file nor url", file: jwtApp, key: "authentication.jwks", message: #"must be {"file": path} or {"url": URL}"#) {
        $0.set(jwtApp, "authentication", #"{"type":"jwt","issuer":"i","audience":"a","jwks":{}}"#)
    },
    // Two apps of one issuer share a realm (docs/identity.md): naming users by different
    // claims would make `alice` by preferred_username the `alice` by sub.
    Broken(
        "two jwt apps of one issuer with different userClaim", file: "apps/com.example.jwt2.json", key: "authentication.userClaim",
        message:
            #"app "com.example.jwt2" names users by "preferred_username" but app "com.example.jwt" of the same issuer "https://idp.example" names them by "sub""#
    ) {
        $0.files["apps/com.example.jwt2.json"] = [
            (
                "authentication",
                "{\"type\":\"jwt\",\"issuer\":\"https://idp.example\",\"audience\":\"other\",\"userClaim\":\"preferred_username\",\"jwks\":{\"file\":\"\($0.root)/jwks.json\"}}"
            )
        ]
    },
    Broken("blockWipeEnabled not a boolean", file: payroll, key: "blockWipingPolicy.blockWipeEnabled", message: "true or false") {
        $0.set(payroll, "blockWipingPolicy", #"{"blockWipeEnabled":"yes"}"#)
    },
    Broken("negative period", file: payroll, key: "blockWipingPolicy.blockDisconnectedPeriod", message: "whole number from 0") {
        $0.set(payroll, "blockWipingPolicy", #"{"blockDisconnectedPeriod":-1}"#)
    },
    Broken("passwordPolicy with a key the SDK does not read", file: payroll, key: "passwordPolicy.minLength", message: "unknown key") {
        $0.set(payroll, "passwordPolicy", #"{"passwordPolicyEnabled":true,"minLength":8}"#)
    },
    Broken("passwordPolicy boolean that is not one", file: payroll, key: "passwordPolicy.passwordPolicyDigitRequired", message: "true or false") {
        $0.set(payroll, "passwordPolicy", #"{"passwordPolicyDigitRequired":"yes"}"#)
    },
    Broken("usagePolicy days out of range", file: payroll, key: "usagePolicy.uploadDataAfterDays", message: "whole number from 0") {
        $0.set(payroll, "usagePolicy", #"{"uploadDataAfterDays":-1}"#)
    },
    Broken("featureVectorPolicies list of non-strings", file: payroll, key: "featureVectorPolicies.allowedPolicies[0]", message: "must be a string") {
        $0.set(payroll, "featureVectorPolicies", #"{"allowedPolicies":[1]}"#)
    },
    Broken("passwordPolicy not an object", file: payroll, key: "passwordPolicy", message: "must be an object (found a string)") {
        $0.set(payroll, "passwordPolicy", #""strict""#)
    },
    Broken("number too large for JSON values", file: payroll, key: "discovery.limits[1]", message: "too large") {
        $0.set(payroll, "discovery", #"{"limits":[1,1e999]}"#)
    },
    Broken("app file name not an app id", file: "apps/my app.json", key: "", message: "app id") {
        $0.files["apps/my app.json"] = [("authentication", #"{"type":"basic"}"#)]
    },

    // users.json
    Broken("users.json missing while an app uses basic", file: users, key: "", message: #"app "com.example.payroll" uses basic authentication"#) {
        $0.files[users] = nil
    },
    Broken("duplicate user id", file: users, key: "users[1].id", message: #"duplicate user id "alice""#) {
        $0.set(users, "users", #"[{"id":"alice","passwordHash":"\#(Values.aliceHash)"},{"id":"alice","passwordHash":"\#(Values.bobHash)"}]"#)
    },
    Broken("empty user id", file: users, key: "users[0].id", message: "must not be empty") {
        $0.set(users, "users", #"[{"id":"","passwordHash":"\#(Values.aliceHash)"}]"#)
    },
    Broken("user id with a colon", file: users, key: "users[0].id", message: "':'") {
        $0.set(users, "users", #"[{"id":"a:b","passwordHash":"\#(Values.aliceHash)"}]"#)
    },
    Broken("non-bcrypt hash", file: users, key: "users[0].passwordHash", message: "bcrypt hash") {
        $0.set(users, "users", #"[{"id":"alice","passwordHash":"$1$plainmd5"}]"#)
    },
    Broken("attribute of wrong type", file: users, key: "users[0].attributes.sfUserId", message: "must be a string (found a boolean)") {
        $0.set(users, "users", #"[{"id":"alice","passwordHash":"\#(Values.aliceHash)","attributes":{"sfUserId":true}}]"#)
    },
    Broken("unknown user key", file: users, key: "users[0].password", message: "unknown key") {
        $0.set(users, "users", #"[{"id":"alice","passwordHash":"\#(Values.aliceHash)","password":"x"}]"#)
    },
    Broken("backendSessionKeys not an array", file: midtier, key: "backendSessionKeys", message: "must be an array") {
        $0.set(midtier, "backendSessionKeys", #""c2VjcmV0""#)
    },
    Broken("backendSessionKeys entry too short", file: midtier, key: "backendSessionKeys[1]", message: "32 random bytes in base64") {
        $0.set(midtier, "backendSessionKeys", #"["AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "c2hvcnQ="]"#)
    },
    Broken("backendSessionKeys entry not base64", file: midtier, key: "backendSessionKeys[0]", message: "openssl rand -base64 32") {
        $0.set(midtier, "backendSessionKeys", #"["not base64 at all, but 44 characters long!!"]"#)
    },
    Broken("backendSessionKeys entry repeated", file: midtier, key: "backendSessionKeys[1]", message: "repeats an earlier key") {
        $0.set(midtier, "backendSessionKeys", #"["AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="]"#)
    },
    Broken("backendSessionKeys entry from an unset variable", file: midtier, key: "backendSessionKeys[0]", message: "MIDTIER_NO_SUCH_KEY is not set")
    {
        $0.set(midtier, "backendSessionKeys", #"[{"env": "MIDTIER_NO_SUCH_KEY"}]"#)
    },
    Broken("users not an array", file: users, key: "users", message: "must be an array (found an object)") {
        $0.set(users, "users", "{}")
    },
]

@Suite struct BrokenConfigurationTests {
    @Test(arguments: brokenCases)
    func brokenCaseNamesFileAndKey(_ broken: Broken) {
        let fixture = Fixture()
        broken.change(fixture)
        let problems = fixture.problems()
        let expectedFile = fixture.path(broken.file)
        let match = problems.first { $0.file == expectedFile && $0.key == broken.key }
        #expect(match != nil, "no problem for \(broken.file): \(broken.key) in:\n\(problems.map(\.description).joined(separator: "\n"))")
        if let match {
            #expect(match.message.contains(broken.message), "message was: \(match.message)")
        }
        #expect(problems.count == broken.count, "problems:\n\(problems.map(\.description).joined(separator: "\n"))")
        #expect(problems.allSatisfy { $0.file == expectedFile })
    }

    @Test func atLeastTwentyFiveBrokenCases() {
        #expect(brokenCases.count >= 25)
    }

    @Test func problemsInSeveralFilesAreAllReportedInOneLoad() {
        let fixture = Fixture()
        fixture.set(midtier, "listen", #""nowhere""#)
        fixture.set(midtier, "colour", #""blue""#)
        fixture.set(sf, "Name", #""other""#)
        fixture.remove(legacy, "User")
        fixture.set(payroll, "destinations", #"["sf","missing"]"#)
        fixture.set(users, "users", #"[{"id":"alice","passwordHash":"nope"}]"#)
        fixture.rawFiles["apps/broken.json"] = "{"
        let problems = fixture.problems()
        let found = Set(problems.map { "\($0.file.dropFirst(fixture.config.count + 1)): \($0.key)" })
        #expect(
            found == [
                "midtier.json: listen",
                "midtier.json: colour",
                "destinations/sf.json: Name",
                "destinations/legacy.json: User",
                "apps/com.example.payroll.json: destinations[1]",
                "apps/broken.json: ",
                "users.json: users[0].passwordHash",
            ])
        #expect(problems.count == 7)
        // The description prints one problem per line, as check-config shows them.
        let errors = ConfigurationErrors(problems: problems)
        #expect(errors.description.split(separator: "\n").count == 7)
        #expect(errors.description.contains("\(fixture.path(midtier)): listen: must be host:port"))
    }

    @Test func missingDirectoryIsOneProblem() {
        let directory = "/nonexistent/midtier-config-\(UUID().uuidString)"
        do {
            _ = try ConfigurationLoader(directory: directory, environment: [:]).load()
            Issue.record("expected a problem")
        } catch {
            #expect(error.problems == [ConfigProblem(file: directory, key: "", message: "configuration directory not found")])
        }
    }

    @Test func undefinedDestinationIsNotReportedWhenItsFileIsMerelyBroken() {
        let fixture = Fixture()
        fixture.set(legacy, "timeout", #""soon""#)
        let problems = fixture.problems()
        #expect(problems == [ConfigProblem(file: fixture.path(legacy), key: "timeout", message: "must be a whole number from 1 to 86400000")])
    }
}
