import Foundation
import FuzzTargets
import Testing

/// Every fuzz target over its committed seeds (Tests/Fuzz/corpus/<target>/) and crashers
/// (Tests/Fuzz/crashers/<target>/) (docs/reliability.md, "Fuzzing"): a crasher that still
/// crashes stops this test process, which is the point; once its bug is fixed it stays here
/// as a regression test.
@Suite struct FuzzCorpusTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// The regular, not hidden, files of one folder of one target, sorted.
    static func inputs(_ kind: String, _ target: FuzzTarget) -> [URL] {
        let folder = fuzzFolder.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { folder.appendingPathComponent($0) }
    }

    @Test(arguments: FuzzTarget.allCases)
    func seedsAndCrashersRunThrough(_ target: FuzzTarget) async throws {
        let seeds = Self.inputs("corpus", target)
        #expect(!seeds.isEmpty, "no seed corpus for \(target.rawValue)")
        for file in seeds {
            await target.runAsync(try [UInt8](Data(contentsOf: file)))
        }
        for file in Self.inputs("crashers", target) {
            // Named first, so that a crasher that still crashes is found in the output.
            FileHandle.standardError.write(Data("FuzzTargetsTests: crasher \(target.rawValue)/\(file.lastPathComponent)\n".utf8))
            await target.runAsync(try [UInt8](Data(contentsOf: file)))
        }
    }

    @Test func everyTargetHasItsFolders() {
        for target in FuzzTarget.allCases {
            for kind in ["corpus", "crashers"] {
                let folder = Self.fuzzFolder.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
                #expect(FileManager.default.fileExists(atPath: folder.path), "missing \(kind)/\(target.rawValue)")
            }
        }
    }
}
