import ConfigurationFiles
import Foundation
import MidtierCore
import MidtierJSON
import Testing

@Suite struct SecretTests {
    /// Secrets put in every wrong place a hurried operator might put them: no message repeats them.
    @Test func noProblemMessageContainsASecretValue() {
        let secrets = [
            "inline-password-5b1e", "pg-password-77aa", "admin-token-plain-31f0", "user-password-plain-c4d2",
            "header-secret-9e8d", "proxy-secret-0a0b", "url-secret-4c4c",
            Values.keyPassphrase, Values.legacyPassword,
        ]
        let fixture = Fixture()
        // Inline password, but User missing.
        fixture.set("destinations/legacy.json", "Password", #""inline-password-5b1e""#)
        fixture.remove("destinations/legacy.json", "User")
        // Secrets in keys that expect something else.
        fixture.set("midtier.json", "store", #""postgres://midtier:pg-password-77aa@ db/x""#)
        fixture.set("midtier.json", "adminTokenHashes", #"["admin-token-plain-31f0"]"#)
        fixture.set("midtier.json", "logLevel", #""admin-token-plain-31f0""#)
        fixture.set("midtier.json", "maxRequestBodyBytes", #""admin-token-plain-31f0""#)
        fixture.set("users.json", "users", #"[{"id":"alice","passwordHash":"user-password-plain-c4d2"}]"#)
        fixture.set("destinations/sf.json", "URL.headers.X-Api-Key", #""header-secret-9e8d\n""#)
        fixture.set("destinations/sf.json", "ProxyType", #""proxy-secret-0a0b""#)
        fixture.set("destinations/sf.json", "URL", #""https://user:url-secret-4c4c@api.sf.example/""#)
        fixture.set("destinations/sf.json", "Passwort", #""inline-password-5b1e""#)
        fixture.set("apps/com.example.payroll.json", "blockWipingPolicy", #"{"blockWipeEnabled":"user-password-plain-c4d2"}"#)
        // Resolved secrets next to other problems.
        fixture.set("destinations/sf.json", "signingCertificate", #""/nonexistent/cert.pem""#)
        fixture.set("destinations/sf.json", "timeout", #""Dedicated""#)
        fixture.set("destinations/legacy.json", "timeout", #""inline-password-5b1e""#)

        let problems = fixture.problems()
        #expect(problems.count >= 14)
        for problem in problems {
            for secret in secrets {
                #expect(!problem.description.contains(secret), "\(problem.file): \(problem.key) leaks a secret")
            }
        }
        // Secret resolution problems name the variable or file, never a value.
        fixture.environment = ["TEST_SF_KEY_PASSPHRASE": ""]
        #expect(
            fixture.problems().contains(
                ConfigProblem(
                    file: fixture.path("destinations/sf.json"), key: "signingKeyPassphrase",
                    message: "environment variable TEST_SF_KEY_PASSPHRASE is empty"
                )))
    }
}

@Suite struct RobustnessTests {
    /// Every truncation of a valid file is a file-level problem, never a crash.
    @Test func everyTruncationOfADestinationIsReported() throws {
        let fixture = Fixture()
        fixture.write()
        let text = try String(contentsOfFile: fixture.path("destinations/sf.json"), encoding: .utf8)
        let bytes = Array(text.utf8)
        fixture.files["destinations/sf.json"] = nil
        for length in stride(from: 0, to: bytes.count - 2, by: 7) {
            fixture.rawBytes["destinations/sf.json"] = Array(bytes[..<length])
            let problems = fixture.problems()
            #expect(
                problems.contains { $0.file == fixture.path("destinations/sf.json") && $0.key == "" },
                "prefix of \(length) bytes")
        }
    }

    @Test func deepNestingIsRefusedNotFollowed() {
        let fixture = Fixture()
        let depth = 100_000
        fixture.set(
            "apps/com.example.payroll.json", "discovery",
            "{\"deep\":" + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}")
        let problems = fixture.problems()
        #expect(problems.count == 1)
        #expect(problems.first?.key == "")
        #expect(problems.first?.message.contains("nested more than 100 levels deep") == true)
    }

    /// Very many keys, and long keys nested deeply, are read in about linear time.
    @Test func largeFilesAreReadInLinearTime() {
        let fixture = Fixture()
        let manyHeaders = (0..<20_000).map { "\"URL.headers.X-H\($0)\": \"v\"" }.joined(separator: ",")
        let manyUnknown = (0..<20_000).map { "\"unknown\($0)\": 1" }.joined(separator: ",")
        fixture.files["destinations/public.json"] = nil
        fixture.rawFiles["destinations/public.json"] =
            #"{"Name":"public","URL":"http://localhost:8099","Authentication":"NoAuthentication","#
            + manyHeaders + "," + manyUnknown + "}"
        let longKey = String(repeating: "k", count: 50_000)
        let nested = String(repeating: "{\"\(longKey)\":", count: 99) + "1e999" + String(repeating: "}", count: 99)
        fixture.set("apps/com.example.payroll.json", "discovery", nested)

        let start = ContinuousClock.now
        let problems = fixture.problems()
        #expect(ContinuousClock.now - start < .seconds(30))
        // At most 1000 problems per file, then one line saying there are more.
        let publicProblems = problems.filter { $0.file == fixture.path("destinations/public.json") }
        #expect(publicProblems.count == 1001)
        #expect(publicProblems.prefix(1000).allSatisfy { $0.message == "unknown key" })
        #expect(publicProblems.last?.message == "more than 1000 problems; the rest are not listed")
        // Long keys are shortened in key paths.
        let tooLarge = problems.first { $0.message == "number is too large" }
        #expect(tooLarge?.file == fixture.path("apps/com.example.payroll.json"))
        #expect(tooLarge?.key.hasPrefix("discovery." + String(repeating: "k", count: 100) + "….kkk") == true)
        #expect((tooLarge?.key.count ?? 0) < 11_000)
        #expect(problems.count == 1002)
    }

    @Test func moderateNestingInFreeFormValuesIsKept() throws {
        let fixture = Fixture()
        let depth = 50
        fixture.set(
            "apps/com.example.payroll.json", "discovery",
            "{\"deep\":" + String(repeating: "[", count: depth) + "1e3" + String(repeating: "]", count: depth) + "}")
        var value = try #require(try fixture.load().apps["com.example.payroll"]?.discovery["deep"])
        for _ in 0..<depth {
            guard case .array(let elements) = value, let first = elements.first else {
                Issue.record("expected an array")
                return
            }
            value = first
        }
        // Kept as written: numbers keep their text.
        #expect(value == .number("1e3"))
        #expect(value.doubleValue == 1000)
    }

    @Test func wrongTypesEverywhereAreProblemsNotCrashes() {
        let values = ["null", "true", "-0", "1e400", "-123456789012345678901234567890", "\"\"", "\"\\u0000\"", "[]", "{}", "[[{}]]"]
        for value in values {
            let fixture = Fixture()
            for (file, members) in fixture.files {
                for (key, _) in members { fixture.set(file, key, value) }
            }
            let problems = fixture.problems()
            #expect(!problems.isEmpty, "value \(value)")
        }
    }

    @Test func escapesAndUnicodeAreDecoded() throws {
        let fixture = Fixture()
        fixture.set("destinations/sf.json", "Description", #""Gehaltsabrechnung \u00fc \ud83d\ude00 \"quoted\" \\ \/""#)
        fixture.set("destinations/sf.json", "companyId", #""Acme\u0041""#)
        let destination = try #require(try fixture.load().destinations["sf"])
        guard case .samlBearer(let saml) = destination.authentication else {
            Issue.record("expected SAML")
            return
        }
        #expect(saml.companyId == "AcmeA")

        fixture.set("destinations/sf.json", "Description", #""lone \ud83d surrogate""#)
        let problems = fixture.problems()
        #expect(problems.count == 1)
        #expect(problems.first?.message.contains("unpaired surrogate") == true)
    }

    @Test func unreadableFilesAreProblems() throws {
        let fixture = Fixture()
        fixture.write()
        // A directory where a file should be.
        try FileManager.default.createDirectory(atPath: fixture.path("destinations/dir.json"), withIntermediateDirectories: true)
        let problems = try? ConfigurationLoader(directory: fixture.config, environment: fixture.environment).load()
        #expect(problems == nil)
        do {
            _ = try ConfigurationLoader(directory: fixture.config, environment: fixture.environment).load()
        } catch {
            #expect(
                error.problems == [
                    ConfigProblem(
                        file: fixture.path("destinations/dir.json"), key: "", message: "cannot read the file: is a directory, not a file"
                    )
                ])
        }
    }
}

@Suite struct URLAndAddressTests {
    @Test(arguments: [
        ("http://[::1]:8080/base/", "http://[::1]:8080/base"),
        ("https://api.sf.example", "https://api.sf.example"),
        ("https://api.sf.example///", "https://api.sf.example"),
        ("HTTPS://API.sf.example/odata/v2", "HTTPS://API.sf.example/odata/v2"),
        ("http://10.0.0.5:65535/x", "http://10.0.0.5:65535/x"),
    ])
    func destinationURLIsAccepted(_ given: String, _ expected: String) throws {
        let fixture = Fixture()
        fixture.set("destinations/public.json", "URL", "\"\(given)\"")
        #expect(try fixture.load().destinations["public"]?.url == expected)
    }

    @Test(arguments: [
        ("", "must not be empty"),
        ("localhost:8080", "absolute http or https URL"),
        ("http:/localhost/", "absolute http or https URL"),
        ("https:///path", "absolute http or https URL"),
        ("http://exa mple.com", "absolute http or https URL"),
        ("https://host:0/", "port from 1 to 65535"),
        ("https://host/#top", "fragment"),
        ("https://host/?", "query"),
        ("https://u@host/", "user name or password"),
    ])
    func destinationURLIsRefused(_ given: String, _ message: String) {
        let fixture = Fixture()
        fixture.set("destinations/public.json", "URL", "\"\(given)\"")
        let problems = fixture.problems()
        #expect(problems.count == 1)
        #expect(problems.first?.key == "URL")
        #expect(problems.first?.message.contains(message) == true, "\(problems)")
    }

    @Test(arguments: [
        ("localhost:1", ListenAddress(host: "localhost", port: 1)),
        ("[::]:8080", ListenAddress(host: "::", port: 8080)),
        ("192.168.1.10:65535", ListenAddress(host: "192.168.1.10", port: 65535)),
    ])
    func listenAddressIsAccepted(_ given: String, _ expected: ListenAddress) throws {
        let fixture = Fixture()
        fixture.set("midtier.json", "listen", "\"\(given)\"")
        #expect(try fixture.load().server.listen == expected)
    }

    @Test(arguments: [":8080", "host:", "host:0", "host:+80", "host:08080x", "[::1]8080", "[zz::1]:80", "ho st:80", "[::1]:99999"])
    func listenAddressIsRefused(_ given: String) {
        let fixture = Fixture()
        fixture.set("midtier.json", "listen", "\"\(given)\"")
        let problems = fixture.problems()
        #expect(problems.map(\.key) == ["listen"], "\(problems)")
    }

    @Test(arguments: [
        ("sqlite:/var/lib/midtier/db.sqlite", StoreLocation.sqlite(path: "/var/lib/midtier/db.sqlite")),
        ("postgres://midtier@localhost/midtier", StoreLocation.postgres(PostgresLocation(host: "localhost", user: "midtier", database: "midtier"))),
        (
            "postgresql://midtier@/midtier?host=/var/run/postgresql",
            StoreLocation.postgres(PostgresLocation(host: "/var/run/postgresql", user: "midtier", database: "midtier"))
        ),
        (
            "postgres://mid%40tier:p%40ss@[::1]:6543/?sslmode=verify-full&sslrootcert=/etc/ca.pem",
            StoreLocation.postgres(
                PostgresLocation(
                    host: "::1", port: 6543, user: "mid@tier", password: "p@ss", database: "mid@tier",
                    tls: .verifyFull, rootCertificatePath: "/etc/ca.pem"))
        ),
        (
            "postgres://u@db.example/d?sslmode=disable",
            StoreLocation.postgres(PostgresLocation(host: "db.example", user: "u", database: "d", tls: .disable))
        ),
        (
            "postgres://u@pgbouncer.example:6432/d?prepared_statements=off",
            StoreLocation.postgres(PostgresLocation(host: "pgbouncer.example", port: 6432, user: "u", database: "d", preparedStatements: false))
        ),
        (
            "postgres://u@db.example/d?prepared_statements=on",
            StoreLocation.postgres(PostgresLocation(host: "db.example", user: "u", database: "d", preparedStatements: true))
        ),
    ])
    func storeIsAccepted(_ given: String, _ expected: StoreLocation) throws {
        let fixture = Fixture()
        fixture.set("midtier.json", "store", "\"\(given)\"")
        #expect(try fixture.load().server.store == expected)
    }

    @Test(arguments: [
        "sqlite:", "sqlite://data/x.sqlite", "postgres://", "redis://x", "data/midtier.sqlite",
        "postgres://db.example/midtier", "postgres://u@db.example/d?sslmode=maybe", "postgres://u@db.example/d?connect_timeout=5",
        "postgres://u@db.example/d?sslrootcert=/ca.pem", "postgres://u@db.example/a/b", "postgres://u@db.example:0/d",
        "postgres://u@/d?host=relative", "postgres://u@db.example/d?prepared_statements=false",
        "postgres://u@db.example/d?prepared_statements=",
    ])
    func storeIsRefused(_ given: String) {
        let fixture = Fixture()
        fixture.set("midtier.json", "store", "\"\(given)\"")
        #expect(fixture.problems().map(\.key) == ["store"])
    }

    @Test func jwksOverPlainHTTPIsAllowedForLocalhostOnly() throws {
        let fixture = Fixture()
        fixture.set(
            "apps/com.example.jwt.json", "authentication",
            #"{"type":"jwt","issuer":"i","audience":"a","jwks":{"url":"http://localhost:8081/jwks"}}"#)
        #expect(try fixture.load().apps["com.example.jwt"] != nil)
    }
}

@Suite struct SpecialFileTests {
    @Test func fifoIsRefusedWithoutWaiting() throws {
        let fixture = Fixture()
        let fifo = fixture.root + "/secrets/pipe"
        #expect(mkfifo(fifo, 0o600) == 0)
        fixture.set("destinations/legacy.json", "Password", "{\"file\":\"\(fifo)\"}")
        #expect(
            fixture.problems() == [
                ConfigProblem(
                    file: fixture.path("destinations/legacy.json"), key: "Password",
                    message: "cannot read secret file \(fifo): is not a regular file"
                )
            ])
    }

    @Test func configurationPathThatIsAFileIsOneProblem() {
        let fixture = Fixture()
        fixture.writeText("plain-file", "x")
        do {
            _ = try ConfigurationLoader(directory: fixture.root + "/plain-file", environment: [:]).load()
            Issue.record("expected a problem")
        } catch {
            #expect(error.problems.map(\.key) == [""])
            #expect(error.problems.first?.message.contains("is not a directory") == true)
        }
    }
}

/// The one strict reader of JSON bodies (admin API, registrations, JWKS, token service
/// answers): every problem is an error that says what, never a silent value.
@Suite struct StrictJSONTests {
    @Test func aKeyGivenTwiceIsRefusedByName() {
        guard case .failure(let error) = StrictJSON.object(Array(#"{"type":"traffic","type":"all"}"#.utf8)) else {
            Issue.record("a duplicate key was accepted")
            return
        }
        #expect(error.message.contains("type"), "\(error.message)")
    }

    @Test(arguments: [#"{"a":1e999}"#, #"{"a":[-1e400]}"#, #"{"a":{"b":2e308}}"#])
    func aNumberNoDoubleHoldsIsRefused(_ text: String) {
        guard case .failure(let error) = StrictJSON.object(Array(text.utf8)) else {
            Issue.record("\(text) was accepted (it used to read as an infinity or NaN)")
            return
        }
        #expect(error.message.contains("out of range"), "\(error.message)")
    }

    @Test(arguments: [#"{"a":1,}"#, #"{"a":1} {}"#, "[1]", "", #"{'a':1}"#])
    func anythingButOneObjectIsRefused(_ text: String) {
        guard case .failure = StrictJSON.object(Array(text.utf8)) else {
            Issue.record("\(text) was accepted")
            return
        }
    }

    @Test func numbersAndNestingAreRead() throws {
        let object = try StrictJSON.object(Array(#"{"n":8,"f":-1.5e2,"a":[true,null,"x"],"o":{"k":"v"}}"#.utf8)).get()
        #expect(object["n"] == .number(8))
        #expect(object["f"] == .number("-1.5e2"))
        #expect(object["f"]?.doubleValue == -150)
        #expect(object["a"] == .array([.bool(true), .null, .string("x")]))
        #expect(object["o"] == .object(["k": .string("v")]))
    }
}
