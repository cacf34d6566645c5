import AsyncHTTPClient
import ConfigurationFiles
import Foundation
import MidtierCore
import MidtierJSON
import MidtierServer
import MidtierStore
import MidtierTestSupport
import NIOCore
import NIOHTTP1
import Registrations
import Testing

/// SAP's client log upload and client usage upload (docs/device-api.md, "Client logs and
/// usage"), through the device listener, on SQLite and on PostgreSQL.
@Suite(.timeLimit(.minutes(10))) struct ClientUploadRoutesTests {
    static let logPath = "/mobileservices/application/demo/clientlogs/v1/runtime/log/application/demo"
    static let usagePath = "/mobileservices/application/demo/clientusage/v1/runtime/clientusage/application/demo"
    static let log = """
        #2024-05-06T07:08:09.123+02:00#ERROR#corr-1#com.example.app#Orders.swift:42#Order \\#7 failed#
        #2024-05-06T07:08:10.000+02:00#INFO##com.example.app#Orders.swift:50#retrying#

        """
    static let usage =
        #"{"report":"0b5a3c9e-1f0d-4c57-9a52-2f1d8c1e7a11","appInfo":{"application":"demo","appVersion":"1.0"},"deviceInfo":{"platform":"iOS","deviceID":"phone-a"},"sessions":[{"sessionInfo":{"sessionId":"s1"},"events":[{"time":"2024-05-06T07:08:09Z","name":"open"}]}]}"#

    static func withMidtier(
        _ kind: StoreKind, logs: Bool = true, usage: Bool = true,
        adjust: @escaping @Sendable (inout MidtierConfiguration) -> Void = { _ in },
        _ body: (TestEnvironment) async throws -> Void
    ) async throws {
        try await TestEnvironment.withMidtier(
            kind,
            adjust: { configuration in
                if logs { configuration.apps["demo"]?.logSettings = ["logEnabled": .string("true"), "logLevel": .string("DEBUG")] }
                if usage { configuration.apps["demo"]?.usagePolicy = ["dataCollectionEnabled": .bool(true)] }
                adjust(&configuration)
            }, body)
    }

    /// A POST with a body of bytes.
    static func post(_ env: TestEnvironment, _ path: String, _ body: [UInt8], headers: [(String, String)]) async throws -> TestEnvironment.Reply {
        var request = HTTPClientRequest(url: env.midtierURL + path)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await env.client.execute(request, timeout: .seconds(30))
        var buffer = try await response.body.collect(upTo: 1 << 20)
        return TestEnvironment.Reply(
            status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
            body: buffer.readBytes(length: buffer.readableBytes) ?? [])
    }

    static func zip(_ text: String) throws -> [UInt8] {
        TestZip.make([("client.log", Array(text.utf8))])
    }

    static func logs(_ env: TestEnvironment, registration: String) async throws -> [ClientLogRecord] {
        try await env.server.registrations.store.clientLogs(matching: ClientUploadFilter(registration: registration), after: nil, limit: 100)
    }

    static func headers(_ user: TestUser, _ registration: String?) -> [(String, String)] {
        [("Authorization", user.basic), ("Content-Type", "text/plain")] + (registration.map { [("X-SMP-APPCID", $0)] } ?? [])
    }

    @Test(arguments: StoreKind.allCases) func uploadsAreKeptForTheCallersRegistration(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env in
            let alice = try await UserStorageTests.onboard(env, .alice, device: "phone-a")
            let plain = try await Self.post(env, Self.logPath + "?deviceId=phone-a", Array(Self.log.utf8), headers: Self.headers(.alice, alice))
            #expect(plain.status == 204, "\(plain.status) \(plain.text)")
            var kept = try await Self.logs(env, registration: alice)
            #expect(kept.count == 2)
            let failed = try #require(kept.first { $0.entry.severity == .error })
            #expect(failed.entry.message == "Order #7 failed" && failed.entry.correlationId == "corr-1" && failed.entry.location == "Orders.swift:42")
            #expect(failed.upload.user == UserIdentity(realm: "local", id: "alice") || failed.upload.user.id == "alice")
            #expect(failed.upload.deviceId == "phone-a" && failed.upload.app == "demo" && failed.upload.kind == .log)
            // Its size is what it takes stored: its entries, not the body as sent.
            #expect(failed.upload.size == kept.reduce(0) { $0 + $1.entry.storedSize })

            // Zipped, found by the SDK's X-SMP-DEVICEID alone (no X-SMP-APPCID).
            let zipped = try Self.zip(Self.log)
            let byDevice = try await Self.post(
                env, Self.logPath + "?deviceId=phone-a", zipped,
                headers: [
                    ("Authorization", TestUser.alice.basic), ("Content-Type", "application/zip"),
                    ("X-SMP-APPID", "demo"), ("X-SMP-DEVICEID", "phone-a"),
                ])
            #expect(byDevice.status == 204, "\(byDevice.status) \(byDevice.text)")
            kept = try await Self.logs(env, registration: alice)
            #expect(kept.count == 4)

            // Usage, with and without the device in the path.
            for path in [Self.usagePath, Self.usagePath + "/device/phone-a"] {
                let reply = try await Self.post(
                    env, path, Array(Self.usage.utf8),
                    headers: [("Authorization", TestUser.alice.basic), ("Content-Type", "application/json"), ("X-SMP-APPCID", alice)])
                #expect(reply.status == 204, "\(path): \(reply.status) \(reply.text)")
            }
            let reports = try await env.server.registrations.store.clientUploads(
                .usage, matching: ClientUploadFilter(registration: alice),
                after: nil, limit: 10)
            #expect(reports.count == 2 && reports.allSatisfy { $0.report == Self.usage && $0.deviceId == "phone-a" })

            // A bad log is 400 naming the line; nothing more is kept.
            let bad = try await Self.post(
                env, Self.logPath, Array("#2024-05-06T07:08:09Z#INFO####ok#\n#yesterday#INFO####no#\n".utf8),
                headers: Self.headers(.alice, alice))
            #expect(bad.status == 400 && bad.errorMessage?.contains("line 2") == true, "\(bad.status) \(bad.text)")
            let badUsage = try await Self.post(
                env, Self.usagePath, Array(#"{"appInfo":{"application":"demo"}}"#.utf8), headers: Self.headers(.alice, alice))
            #expect(badUsage.status == 400 && badUsage.errorMessage?.contains("report") == true, "\(badUsage.text)")
            #expect(try await Self.logs(env, registration: alice).count == 4)
        }
    }

    @Test(arguments: StoreKind.allCases) func nobodyWritesIntoAnotherUsersRegistration(_ kind: StoreKind) async throws {
        try await Self.withMidtier(kind) { env in
            let alice = try await UserStorageTests.onboard(env, .alice, device: "phone-a")
            let bob = try await UserStorageTests.onboard(env, .bob, device: "phone-b")
            let body = Array(Self.log.utf8)
            // Alice's registration id: not Bob's, so unknown to him.
            let named = try await Self.post(env, Self.logPath, body, headers: Self.headers(.bob, alice))
            #expect(named.status == 403 && named.errorMessage == "the registration id is not known", "\(named.status) \(named.text)")
            // Alice's device, without a registration id: Bob has no registration of it.
            let byDevice = try await Self.post(env, Self.logPath + "?deviceId=phone-a", body, headers: Self.headers(.bob, nil))
            #expect(byDevice.status == 403, "\(byDevice.status) \(byDevice.text)")
            let byHeader = try await Self.post(
                env, Self.logPath, body,
                headers: Self.headers(.bob, nil) + [("X-SMP-APPID", "demo"), ("X-SMP-DEVICEID", "phone-a")])
            #expect(byHeader.status == 403, "\(byHeader.status) \(byHeader.text)")
            // His own registration naming her device: 400, never stored as hers or his.
            let mixed = try await Self.post(env, Self.logPath + "?deviceId=phone-a", body, headers: Self.headers(.bob, bob))
            #expect(mixed.status == 400 && mixed.errorMessage?.contains("not the device of the caller's registration") == true, "\(mixed.text)")
            let mixedUsage = try await Self.post(env, Self.usagePath + "/device/phone-a", Array(Self.usage.utf8), headers: Self.headers(.bob, bob))
            #expect(mixedUsage.status == 400, "\(mixedUsage.status) \(mixedUsage.text)")
            #expect(try await Self.logs(env, registration: alice).isEmpty)
            #expect(try await Self.logs(env, registration: bob).isEmpty)
            // Without credentials: 401.
            let anonymous = try await Self.post(env, Self.logPath, body, headers: [("X-SMP-APPCID", alice)])
            #expect(anonymous.status == 401)
        }
    }

    @Test func theTwoAppIdsMustBeTheSameKnownApp() async throws {
        try await Self.withMidtier(
            .sqlite,
            adjust: { configuration in
                configuration.apps["other"] = AppConfiguration(id: "other", destinations: [])
            }
        ) { env in
            let alice = try await UserStorageTests.onboard(env, .alice, device: "phone-a")
            let body = Array(Self.log.utf8)
            let unknown = try await Self.post(
                env, "/mobileservices/application/demo/clientlogs/v1/runtime/log/application/nope", body,
                headers: Self.headers(.alice, alice))
            #expect(unknown.status == 404 && unknown.errorMessage == "unknown application nope", "\(unknown.text)")
            let other = try await Self.post(
                env, "/mobileservices/application/demo/clientlogs/v1/runtime/log/application/other", body,
                headers: Self.headers(.alice, alice))
            #expect(other.status == 403, "\(other.status) \(other.text)")
            let get = try await env.call(.GET, Self.logPath, headers: Self.headers(.alice, alice))
            #expect(get.status == 405 && get.header("Allow") == "POST")
        }
    }

    @Test func uploadsAreRefusedWhenTheAppDoesNotCollectThem() async throws {
        try await Self.withMidtier(
            .sqlite, logs: false, usage: false,
            adjust: { configuration in
                configuration.apps["demo"]?.logSettings = ["logEnabled": .string("false")]
            }
        ) { env in
            let alice = try await UserStorageTests.onboard(env, .alice, device: "phone-a")
            let log = try await Self.post(env, Self.logPath, Array(Self.log.utf8), headers: Self.headers(.alice, alice))
            #expect(log.status == 403 && log.errorMessage?.contains("logSettings.logEnabled") == true, "\(log.status) \(log.text)")
            let usage = try await Self.post(env, Self.usagePath, Array(Self.usage.utf8), headers: Self.headers(.alice, alice))
            #expect(usage.status == 403 && usage.errorMessage?.contains("usagePolicy.dataCollectionEnabled") == true, "\(usage.status) \(usage.text)")
        }
    }

    @Test(arguments: StoreKind.allCases) func tooLargeTooOftenAndLockedAreRefused(_ kind: StoreKind) async throws {
        try await Self.withMidtier(
            kind,
            adjust: { configuration in
                configuration.server.clientUploads = ClientUploadSettings(
                    maxUploadBytes: 1024, maxStoredBytesPerRegistration: 4096,
                    maxUploadsPerHour: 2, retentionDays: 14)
            }
        ) { env in
            let alice = try await UserStorageTests.onboard(env, .alice, device: "phone-a")
            let line = "#2024-05-06T07:08:09Z#INFO####0123456789012345678901234567890123456789#\n"
            let large = try await Self.post(env, Self.logPath, Array(String(repeating: line, count: 30).utf8), headers: Self.headers(.alice, alice))
            #expect(large.status == 413 && large.errorMessage?.contains("clientUploads.maxUploadBytes") == true, "\(large.status) \(large.text)")
            // A zip that inflates past four times the limit is 413 too.
            let bomb = try Self.zip(String(repeating: line, count: 200))
            #expect(bomb.count <= 1024)
            let inflated = try await Self.post(env, Self.logPath, bomb, headers: Self.headers(.alice, alice) + [("Content-Type", "application/zip")])
            #expect(inflated.status == 413, "\(inflated.status) \(inflated.text)")
            #expect(try await Self.logs(env, registration: alice).isEmpty)

            for _ in 0..<2 {
                let ok = try await Self.post(env, Self.logPath, Array(line.utf8), headers: Self.headers(.alice, alice))
                #expect(ok.status == 204, "\(ok.status) \(ok.text)")
            }
            let third = try await Self.post(env, Self.logPath, Array(line.utf8), headers: Self.headers(.alice, alice))
            #expect(
                third.status == 429 && third.header("Retry-After") != nil && third.errorMessage?.contains("maxUploadsPerHour") == true,
                "\(third.status) \(third.text)")
            // Usage is counted on its own.
            let usage = try await Self.post(env, Self.usagePath, Array(Self.usage.utf8), headers: Self.headers(.alice, alice))
            #expect(usage.status == 204, "\(usage.status) \(usage.text)")

            // A locked registration may not upload.
            let locked = try await env.call(
                .POST, "/mobileservices/me/registrations/\(alice)/lock", headers: [("Authorization", TestUser.alice.basic)])
            #expect(locked.status == 200, "\(locked.text)")
            let refused = try await Self.post(env, Self.usagePath, Array(Self.usage.utf8), headers: Self.headers(.alice, alice))
            #expect(refused.status == 403 && refused.header("x-message-code") == "TRAFFIC_REG_LOCKED", "\(refused.status) \(refused.text)")
        }
    }

    /// A 10 KB zip of 99 999 entries was kept as 10 KB and added 21 MB to the store: the quotas
    /// now count what is stored (each entry's texts and its row), per registration and per user.
    @Test func quotasCountWhatIsStoredNotWhatWasSent() async throws {
        try await Self.withMidtier(
            .sqlite,
            adjust: { configuration in
                configuration.server.clientUploads = ClientUploadSettings(
                    maxUploadBytes: 64 * 1024, maxStoredBytesPerRegistration: 256 * 1024,
                    maxStoredBytesPerUser: 300 * 1024, maxUploadsPerHour: 100, retentionDays: 14)
            }
        ) { env in
            let alice = try await UserStorageTests.onboard(env, .alice, device: "phone-a")
            let line = "#2024-05-06T07:08:09Z#INFO####x#\n"
            // 7 000 entries: 238 000 bytes unzipped (within four times maxUploadBytes), a few KB
            // zipped, and 7 000 × 65 = 455 000 bytes stored: more than the registration may keep.
            let many = try Self.zip(String(repeating: line, count: 7000))
            #expect(many.count < 16 * 1024)
            let refused = try await Self.post(env, Self.logPath, many, headers: Self.headers(.alice, alice) + [("Content-Type", "application/zip")])
            #expect(
                refused.status == 413 && refused.errorMessage?.contains("maxStoredBytesPerRegistration") == true, "\(refused.status) \(refused.text)")
            #expect(try await Self.logs(env, registration: alice).isEmpty)

            // 1 000 entries are 65 000 bytes stored; two registrations of the user keep at most
            // 300 KiB together, the oldest going first.
            let second = try await UserStorageTests.onboard(env, .alice, device: "phone-b")
            let thousand = try Self.zip(String(repeating: line, count: 1000))
            for registration in [alice, second, alice, second, alice, second] {
                let kept = try await Self.post(
                    env, Self.logPath, thousand, headers: Self.headers(.alice, registration) + [("Content-Type", "application/zip")])
                #expect(kept.status == 204, "\(kept.status) \(kept.text)")
            }
            let store = env.server.registrations.store
            let uploads = try await store.clientUploads(
                .log, matching: ClientUploadFilter(user: UserIdentity(realm: "", id: "alice")), after: nil, limit: 100)
            #expect(uploads.allSatisfy { $0.size == 65_000 }, "\(uploads.map(\.size))")
            #expect(uploads.count == 4 && uploads.reduce(0) { $0 + $1.size } <= 300 * 1024, "\(uploads.count) uploads kept")
        }
    }

    /// The upload records the registration's own device, whatever the call names; an entry dated
    /// far in the future is kept at its arrival.
    @Test func anUploadRecordsItsRegistrationsDeviceAndNoFarFutureTimes() async throws {
        try await Self.withMidtier(.sqlite) { env in
            let onboarded = try await DeviceCalls.onboard(env, .alice, body: #"{"DeviceType":"iOS"}"#)
            let alice = try #require(onboarded.header("X-SMP-APPCID"), "\(onboarded.status) \(onboarded.text)")
            let log = "#9999-12-31T00:00:00Z#ERROR####from the far future#\n#2024-05-06T07:08:09Z#INFO####now#\n"
            let reply = try await Self.post(env, Self.logPath + "?deviceId=someone-else", Array(log.utf8), headers: Self.headers(.alice, alice))
            #expect(reply.status == 204, "\(reply.status) \(reply.text)")
            let kept = try await Self.logs(env, registration: alice)
            #expect(kept.count == 2 && kept.allSatisfy { $0.upload.deviceId == "" }, "\(kept.map(\.upload.deviceId))")
            let future = try #require(kept.first { $0.entry.message == "from the far future" })
            #expect(future.entry.time <= future.upload.receivedAt, "\(future.entry.time) \(future.upload.receivedAt)")
        }
    }

    /// `clientUploads` in `midtier.json`: defaults, values read, bad values are problems naming the key.
    @Test func theSettingsAreReadAndCheckedNamingTheKey() throws {
        func load(_ text: String) throws -> Result<ClientUploadSettings, ConfigurationErrors> {
            let directory = FileManager.default.temporaryDirectory.path + "/midtier-client-uploads-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/midtier.json"))
            do {
                return .success(try ConfigurationLoader(directory: directory).load().server.clientUploads)
            } catch {
                return .failure(error)
            }
        }
        #expect(
            try load("{}").get()
                == ClientUploadSettings(
                    maxUploadBytes: 5 << 20, maxStoredBytesPerRegistration: 20 << 20,
                    maxUploadsPerHour: 60, retentionDays: 14))
        let set = try load(
            #"{"clientUploads":{"maxUploadBytes":2048,"maxStoredBytesPerRegistration":"4096","maxUploadsPerHour":5,"retentionDays":3}}"#
        ).get()
        #expect(set == ClientUploadSettings(maxUploadBytes: 2048, maxStoredBytesPerRegistration: 4096, maxUploadsPerHour: 5, retentionDays: 3))
        for (text, key) in [
            (#"{"clientUploads":{"maxUploadBytes":0}}"#, "clientUploads.maxUploadBytes"),
            (#"{"clientUploads":{"maxUploadsPerHour":"many"}}"#, "clientUploads.maxUploadsPerHour"),
            (#"{"clientUploads":{"retentionDays":0}}"#, "clientUploads.retentionDays"),
            (#"{"clientUploads":{"maxStoredBytesPerRegistration":2048}}"#, "clientUploads.maxUploadBytes"),
            (#"{"clientUploads":{"maxStoredBytesPerUser":2048}}"#, "clientUploads.maxStoredBytesPerUser"),
            (#"{"clientUploads":{"retention":3}}"#, "clientUploads.retention"),
            (#"{"clientUploads":14}"#, "clientUploads"),
        ] {
            guard case .failure(let errors) = try load(text) else {
                Issue.record("\(text) was accepted")
                continue
            }
            #expect(errors.problems.contains { $0.key == key }, "\(text): \(errors)")
        }
    }

    /// Uploads are kept `clientUploads.retentionDays`, then the sweeper deletes them.
    @Test(arguments: StoreKind.allCases) func uploadsPastTheirRetentionAreDeleted(_ kind: StoreKind) async throws {
        try await Self.withMidtier(
            kind,
            adjust: { configuration in
                configuration.server.clientUploads.retentionDays = 14
            }
        ) { env in
            let alice = try await UserStorageTests.onboard(env, .alice, device: "phone-a")
            let reply = try await Self.post(env, Self.logPath, Array(Self.log.utf8), headers: Self.headers(.alice, alice))
            #expect(reply.status == 204, "\(reply.status) \(reply.text)")
            env.clock.advance(days: 13)
            #expect(await env.server.purgeExpiredClientUploads() == 0)
            #expect(try await Self.logs(env, registration: alice).count == 2)
            env.clock.advance(days: 2)
            #expect(await env.server.purgeExpiredClientUploads() == 1)
            #expect(try await Self.logs(env, registration: alice).isEmpty)
        }
    }
}
