import ArgumentParser
import Foundation
import Logging
import MidtierCore
import MidtierServer
import MidtierStore

/// The registrations of the scale benchmark (`make bench-scale`, docs/benchmarks.md): the
/// shape of one an SAP SDK app makes when it onboards (device fields, an APNs token, a few
/// details), with an id of Midtier's own form; registration `n` is `benchRegistrationID(n)`.
/// With `android`, an Android phone with an FCM token instead.
func benchRegistration(_ n: Int, app: String, user: UserIdentity, now: Int64, android: Bool = false) -> Registration {
    if android {
        return Registration(
            id: benchRegistrationID(n), appId: app, user: user, deviceType: "Android", deviceModel: "Pixel 8",
            deviceId: String(format: "%08X-1111-4222-8333-%012X", n, n), formFactor: "phone",
            androidGcmRegistrationId: "bench-\(n)", createdAt: now, lastContactAt: now,
            details: ["DeviceLocale": "de_DE", "TimeZone": "Europe/Berlin", "UserLocale": "de-DE"])
    }
    return Registration(
        id: benchRegistrationID(n), appId: app, user: user, deviceType: "iOS", deviceModel: "iPhone15,2",
        deviceId: String(format: "%08X-1111-4222-8333-%012X", n, n), formFactor: "phone",
        apnsDeviceToken: String(format: "%064x", n), createdAt: now, lastContactAt: now,
        details: ["DeviceSubType": "iPhone", "DeviceLocale": "de_DE", "TimeZone": "Europe/Berlin", "UserLocale": "de-DE"])
}

/// As Midtier's own ids (a UUID), numbered: `0000002a-0000-4000-8000-00000000002a` for 42.
func benchRegistrationID(_ n: Int) -> String { String(format: "%08x-0000-4000-8000-%012x", n, n) }

/// `make-store`: fills the store a configuration names with `registrations` registrations of
/// one user, through the store's bulk path, in batches (before any instance serves it).
struct MakeStore: AsyncParsableCommand {
    @Option var config: String
    @Option var registrations: Int
    @Option var user = "user0"
    @Option var app = "demo"
    @Option var batch = 5_000
    /// Every other registration an Android phone with an FCM token (the push benchmark).
    @Flag(name: .customLong("half-android")) var halfAndroid = false

    func run() async throws {
        let configuration = try loadConfiguration(config)
        let store = try await MidtierServer.openStore(configuration.server.store, logger: Logger(label: "bench")).base
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let user = UserIdentity.local(user)
        var written = 0
        for start in stride(from: 0, to: registrations, by: batch) {
            let rows = (start..<min(registrations, start + batch)).map {
                benchRegistration($0, app: app, user: user, now: now, android: halfAndroid && $0 % 2 == 1)
            }
            switch store {
            case let sqlite as SQLiteStore: written += try await sqlite.importRegistrations(rows)
            case let postgres as PostgresStore: written += try await postgres.importRegistrations(rows)
            default: throw ValidationError("the store has no bulk path")
            }
        }
        print(written)
    }
}

/// `registration-cache-memory`: the memory one cached registration takes. Fills an SQLite
/// store with `registrations`, then reads each through the memory cache (or, with
/// `--whole-rows`, keeps the whole rows in a map, as the cache did before it kept only the
/// standing) and prints the resident memory before and after in KiB, and the count kept.
struct RegistrationCacheMemory: AsyncParsableCommand {
    @Option var registrations: Int = 200_000
    @Flag(name: .customLong("whole-rows")) var wholeRows = false

    func run() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("midtier-bench-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let base = try SQLiteStore(path: folder + "/store.sqlite")
        for start in stride(from: 0, to: registrations, by: 5_000) {
            let rows = (start..<min(registrations, start + 5_000)).map { benchRegistration($0, app: "demo", user: .local("user0"), now: 1_000) }
            _ = try await base.importRegistrations(rows)
        }
        let cache = CachedStateStore(base: base, capacity: MemoryCacheSettings(registrations: registrations))
        var rows: [ExactString: Registration] = [:]
        // Warm the store's own reading first, so that its memory is not counted.
        for n in 0..<min(registrations, 1_000) { _ = try await base.registration(id: benchRegistrationID(n)) }
        let before = residentKiB()
        for n in 0..<registrations {
            let id = benchRegistrationID(n)
            if wholeRows {
                rows[ExactString(id)] = try await base.registration(id: id)
            } else {
                _ = try await cache.standing(ofRegistration: id)
            }
        }
        let after = residentKiB()
        print("\(before) \(after) \(wholeRows ? rows.count : cache.registrationCount)")
    }
}
