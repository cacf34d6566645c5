import ClientUploads
import Foundation
import MidtierStore
import MidtierTestSupport
import Testing

/// SAP's client log format and the bodies the log upload takes (docs/device-api.md, "Client
/// logs and usage"): plain, zipped, multipart.
@Suite struct ClientLogFormatTests {
    static let limits = ClientLogLimits(maxFiles: 5, maxInflatedBytes: 64 * 1024, maxEntries: 1000)

    static func entries(_ text: String, contentType: String? = "text/plain") throws(ClientUploadError) -> [ClientLogEntry] {
        try ClientLogBody.entries(of: Array(text.utf8), contentType: contentType, upload: "u1", limits: limits)
    }

    static func failure(_ text: String, contentType: String? = "text/plain") -> ClientUploadError? {
        failure(Array(text.utf8), contentType: contentType)
    }

    static func failure(_ body: [UInt8], contentType: String?) -> ClientUploadError? {
        do {
            _ = try ClientLogBody.entries(of: body, contentType: contentType, upload: "u1", limits: limits)
            return nil
        } catch {
            return error
        }
    }

    /// A zip archive of `files` (name, text), deflated.
    static func zip(_ files: [(String, [UInt8])]) throws -> [UInt8] {
        TestZip.make(files)
    }

    static func multipart(_ parts: [(String, [UInt8])], boundary: String = "XyZ123") -> [UInt8] {
        var body: [UInt8] = []
        for (name, bytes) in parts {
            body += Array(
                "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(name)\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                    .utf8)
            body += bytes
            body += Array("\r\n".utf8)
        }
        body += Array("--\(boundary)--\r\n".utf8)
        return body
    }

    static let sample = """
        #2014-07-01T17:16:08.637+02:00#INFO##com.sap.demo#ViewController.swift:12#App started#
        #2014-07-01T17:16:09Z#ERROR#c0ffee#Network#Client.swift:40#Request failed: 500#

        """

    @Test func plainEntriesAreReadFieldByField() throws {
        let entries = try Self.entries(Self.sample)
        #expect(entries.count == 2)
        let first = try #require(entries.first)
        // 2014-07-01T15:16:08.637Z
        #expect(first.time == 1_404_227_768_637)
        #expect(first.severity == .info && first.correlationId == "" && first.source == "com.sap.demo")
        #expect(first.location == "ViewController.swift:12" && first.message == "App started")
        #expect(first.upload == "u1" && first.sequence == 0)
        #expect(entries[1].time == 1_404_234_969_000 && entries[1].severity == .error && entries[1].correlationId == "c0ffee")
        #expect(entries[1].sequence == 1 && entries[1].message == "Request failed: 500")
    }

    @Test func crlfLinesReadAsLf() throws {
        let entries = try Self.entries(Self.sample.replacingOccurrences(of: "\n", with: "\r\n"))
        #expect(entries.map(\.message) == ["App started", "Request failed: 500"])
    }

    @Test func anEscapedHashIsALiteralHash() throws {
        let entries = try Self.entries(##"#2020-01-02T03:04:05.6-01:30#WARN#id#src#loc#Order \#42 failed \# retry#"##)
        #expect(entries.first?.message == "Order #42 failed # retry")
        #expect(entries.first?.severity == .warn)
        // -01:30: 04:34:05.600Z
        #expect(entries.first?.time == 1_577_939_645_600)
    }

    @Test func continuationLinesJoinTheMessage() throws {
        let entries = try Self.entries("#2020-01-02T03:04:05Z#FATAL###loc#Crash\n\tat frame 1\n\tat frame 2#\n#2020-01-02T03:04:06Z#DEBUG####next#\n")
        #expect(entries.map(\.message) == ["Crash\n\tat frame 1\n\tat frame 2", "next"])
    }

    @Test func aBadSeverityOrDateNamesTheLine() {
        let severity = Self.failure("#2020-01-02T03:04:05Z#INFO####ok#\n#2020-01-02T03:04:05Z#LOUD####no#\n")
        #expect(
            severity?.kind == .invalid && severity?.message.contains("line 2") == true && severity?.message.contains("severity") == true,
            "\(String(describing: severity))")
        let date = Self.failure("#2020-01-02T03:04:05Z#INFO####ok#\n\n#2020-02-30T03:04:05Z#INFO####no#\n")
        #expect(date?.message.contains("line 3") == true && date?.message.contains("date time") == true, "\(String(describing: date))")
        let zone = Self.failure("#2020-01-02 03:04:05#INFO####no#")
        #expect(zone?.message.contains("line 1") == true, "\(String(describing: zone))")
        let fields = Self.failure("#2020-01-02T03:04:05Z#INFO#only#")
        #expect(fields?.message.contains("line 1") == true && fields?.message.contains("fields") == true, "\(String(describing: fields))")
        let unclosed = Self.failure("#2020-01-02T03:04:05Z#INFO####no end")
        #expect(unclosed?.message.contains("does not end with #") == true, "\(String(describing: unclosed))")
        let stray = Self.failure("not a log\n")
        #expect(stray?.message.contains("line 1 does not start with #") == true, "\(String(describing: stray))")
        let control = Self.failure("#2020-01-02T03:04:05Z#INFO##so\u{1B}urce##m#")
        #expect(control?.message.contains("source has a control character") == true, "\(String(describing: control))")
        let nul = Self.failure("#2020-01-02T03:04:05Z#INFO####m\u{0}#")
        #expect(nul?.message.contains("message has a control character") == true, "\(String(describing: nul))")
        let notUTF8 = Self.failure(Array("#2020-01-02T03:04:05Z#INFO####".utf8) + [0xFF, 0x23], contentType: nil)
        #expect(notUTF8?.message.contains("not UTF-8") == true, "\(String(describing: notUTF8))")
    }

    @Test func anEmptyBodyIsAnError() {
        #expect(Self.failure("")?.message == "the log upload is empty")
        #expect(Self.failure("\n\n")?.message.contains("no entry") == true)
    }

    @Test func tooManyEntriesIsTooLarge() {
        let line = "#2020-01-02T03:04:05Z#INFO####m#\n"
        let error = Self.failure(String(repeating: line, count: Self.limits.maxEntries + 1))
        #expect(error?.kind == .tooLarge && error?.message.contains("more than 1000 entries") == true, "\(String(describing: error))")
    }

    @Test func aZipIsReadByTypeOrSignature() throws {
        let zip = try Self.zip([("a.log", Array(Self.sample.utf8)), ("b.log", Array("#2020-01-02T03:04:05Z#DEBUG####third#".utf8))])
        for type in ["application/zip", "application/x-zip-compressed", "application/octet-stream"] {
            let entries = try ClientLogBody.entries(of: zip, contentType: type, upload: "u1", limits: Self.limits)
            #expect(entries.map(\.message) == ["App started", "Request failed: 500", "third"], "\(type)")
            #expect(entries.map(\.sequence) == [0, 1, 2])
        }
        let damaged = Self.failure(Array(zip.prefix(40)), contentType: "application/zip")
        #expect(damaged?.kind == .invalid, "\(String(describing: damaged))")
        let notZip = Self.failure(Array(Self.sample.utf8), contentType: "application/zip")
        #expect(notZip?.message.contains("not a readable zip archive") == true, "\(String(describing: notZip))")
        let bad = try Self.zip([("a.log", Array(Self.sample.utf8)), ("b.log", Array("#nope#INFO####x#".utf8))])
        let named = Self.failure(bad, contentType: "application/zip")
        #expect(named?.message.contains("file 2") == true && named?.message.contains("line 1") == true, "\(String(describing: named))")
    }

    @Test func aZipBombIsStoppedWhileInflating() throws {
        // 16 MiB of one byte deflates to a few KiB; its headers say how large it is, but the
        // limit is checked on what actually comes out.
        let bomb = try Self.zip([("big.log", [UInt8](repeating: 0x23, count: 16 << 20))])
        #expect(bomb.count < 64 * 1024)
        let error = Self.failure(bomb, contentType: "application/zip")
        #expect(error?.kind == .tooLarge && error?.message.contains("larger than 65536 bytes") == true, "\(String(describing: error))")
        // Many small files are counted together.
        let many = try Self.zip((0..<4).map { ("f\($0).log", [UInt8](repeating: 0x23, count: 20 * 1024)) })
        #expect(Self.failure(many, contentType: "application/zip")?.kind == .tooLarge)
        let files = try Self.zip((0..<6).map { ("f\($0).log", Array(Self.sample.utf8)) })
        #expect(Self.failure(files, contentType: "application/zip")?.message.contains("more than 5 files") == true)
    }

    /// Where the central directory entry of `zip`'s first file starts (`PK\x01\x02`).
    static func centralEntry(_ zip: [UInt8]) throws -> Int {
        try #require((0..<(zip.count - 4)).first { zip[$0..<($0 + 4)].elementsEqual([0x50, 0x4B, 0x01, 0x02]) })
    }

    /// `zip` with the 4-byte little-endian field at `offset` set to `value`.
    static func patched(_ zip: [UInt8], at offset: Int, _ value: UInt32) -> [UInt8] {
        var zip = zip
        for byte in 0..<4 { zip[offset + byte] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(byte))) }
        return zip
    }

    /// A central directory whose offsets and sizes point past the data stopped the process in
    /// ZIPFoundation ("Range requires lowerBound <= upperBound"); libarchive answers an error.
    @Test(arguments: [(42, UInt32(0xFFFF_FF00)), (42, UInt32(60)), (20, UInt32(0x7FFF_FFFF)), (24, UInt32(0xFFFF_FFFF)), (28, UInt32(0xFFFF))])
    func aZipWhoseDirectoryLiesIsAnError(field: Int, value: UInt32) throws {
        let zip = try Self.zip([("a.log", Array(Self.sample.utf8))])
        let damaged = Self.patched(zip, at: try Self.centralEntry(zip) + field, value)
        for type in ["application/zip", "text/plain", nil] {
            // An answer either way, never a trap: an error, or what the local headers hold.
            let outcome = Result { () throws(ClientUploadError) in
                try ClientLogBody.entries(of: damaged, contentType: type, upload: "u1", limits: Self.limits)
            }
            if case .success(let entries) = outcome { #expect(entries.allSatisfy { $0.message.utf8.count <= 64 * 1024 }) }
        }
        // The review's exact case: the local header's offset past the end of the body.
        let past = Self.patched(zip, at: try Self.centralEntry(zip) + 42, UInt32(zip.count + 100))
        #expect(Self.failure(past, contentType: "application/zip") != nil)
    }

    /// Every single-byte change of a valid zip gives entries or an error (a seeded walk, the
    /// same every run; `make fuzz` searches further).
    @Test func changedBytesOfAZipNeverTrap() throws {
        let zip = try Self.zip([("a.log", Array(Self.sample.utf8)), ("b.log", Array("#2020-01-02T03:04:05Z#DEBUG####third#".utf8))])
        var random = UInt64(0x2545_F491_4F6C_DD1D)
        for _ in 0..<2000 {
            random ^= random << 13; random ^= random >> 7; random ^= random << 17
            var changed = zip
            changed[Int(random % UInt64(zip.count))] = UInt8(truncatingIfNeeded: random >> 32)
            _ = Result { () throws(ClientUploadError) in
                try ClientLogBody.entries(of: changed, contentType: "application/zip", upload: "u", limits: Self.limits)
            }
        }
    }

    @Test func multipartPartsAreLogsZippedOrNot() throws {
        let zipped = try Self.zip([("b.log", Array("#2020-01-02T03:04:05Z#DEBUG####zipped#".utf8))])
        let body = Self.multipart([("a.log", Array(Self.sample.utf8)), ("b.zip", zipped)])
        let entries = try ClientLogBody.entries(of: body, contentType: "multipart/form-data; boundary=XyZ123", upload: "u1", limits: Self.limits)
        #expect(entries.map(\.message) == ["App started", "Request failed: 500", "zipped"])
        let quoted = try ClientLogBody.entries(of: body, contentType: #"multipart/form-data; boundary="XyZ123""#, upload: "u1", limits: Self.limits)
        #expect(quoted.count == 3)
        #expect(Self.failure(body, contentType: "multipart/form-data")?.message.contains("no boundary") == true)
        let cut = Array(body.prefix(body.count - 12))
        #expect(Self.failure(cut, contentType: "multipart/form-data; boundary=XyZ123")?.message.contains("ends inside a part") == true)
        #expect(Self.failure(body, contentType: "multipart/form-data; boundary=other")?.kind == .invalid)
    }

    /// MultipartKit 4.7.1 traps on a header name byte of 0x80 or more (found by `make fuzz`:
    /// ten bytes stopped the process); such bodies are refused before it sees them.
    @Test func aPartHeaderThatIsNotASCIIIsAnError() throws {
        let type = "multipart/form-data; boundary=XyZ"
        for body in [
            Array("--XyZ\r\n".utf8) + [0xFF],
            Array("--XyZ\r\nContent-Type: text/plain\r\nX".utf8) + [0xC3, 0xA9] + Array(": 1\r\n\r\nbody\r\n--XyZ--".utf8),
            Array("preamble --XyZ\r\n".utf8) + [0x80] + Array(": x\r\n\r\n".utf8),
        ] {
            let error = Self.failure(body, contentType: type)
            #expect(error?.kind == .invalid && error?.message.contains("not ASCII") == true, "\(String(describing: error))")
        }
        // Bytes of 0x80 and more in a part's body are the log's own (UTF-8 text).
        let text = Array("#2020-01-02T03:04:05Z#INFO####caf\u{E9}#".utf8)
        let fine = Self.multipart([("a.log", text)], boundary: "XyZ")
        #expect(try ClientLogBody.entries(of: fine, contentType: type, upload: "u1", limits: Self.limits).map(\.message) == ["caf\u{E9}"])
    }

    @Test func usageReportsAreChecked() throws {
        let good =
            #"{"report":"8f4d2c1e-0000-4000-8000-000000000001","appInfo":{"application":"demo","appVersion":"1.0"},"deviceInfo":{"platform":"iOS"},"sessions":[{"sessionInfo":{"sessionId":"s"},"events":[{"time":"2020-01-02T03:04:05Z","type":"tap"}]}]}"#
        #expect(try ClientUsageReport.check(Array(good.utf8), limit: 4096) == good)
        func failure(_ text: String, limit: Int = 4096) -> String {
            do {
                _ = try ClientUsageReport.check(Array(text.utf8), limit: limit)
                return "accepted"
            } catch {
                return error.message
            }
        }
        #expect(failure(#"{"appInfo":{"application":"demo"}}"#).contains("no report id"))
        #expect(failure(#"{"report":1,"appInfo":{"application":"demo"}}"#).contains("no report id"))
        #expect(failure(#"{"report":"r"}"#).contains("no appInfo"))
        #expect(failure(#"{"report":"r","appInfo":{}}"#).contains("no application"))
        #expect(failure(#"{"report":"r","appInfo":{"application":"a"},"sessions":[{"events":[{}]}]}"#).contains("sessions[0].events[0] has no time"))
        #expect(failure(#"{"report":"r","appInfo":{"application":"a"},}"#).contains("not a JSON object"))
        #expect(failure(good, limit: 10).contains("larger than 10 bytes"))
        #expect(failure("").contains("empty"))
    }
}
