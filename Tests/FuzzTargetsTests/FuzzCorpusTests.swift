import Foundation
import FuzzTargets
import Testing

/// Every fuzz target over its committed seeds (Tests/Fuzz/corpus/<target>/) and crashers
/// (Tests/Fuzz/crashers/<target>/) (docs/reliability.md, "Fuzzing"): a crasher that still
/// crashes stops this test process, which is the point, and one that still hangs fails the
/// test after 60 s (a hang guard, far above any input's time even on a loaded machine); once its bug is fixed it stays here as a regression test.
@Suite struct FuzzCorpusTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// The most one input may take (libFuzzer's `-timeout` in `make fuzz`).
    static let timeLimit: Duration = .seconds(60)

    /// The regular, not hidden, files of one folder of one target, sorted.
    static func inputs(_ kind: String, _ target: FuzzTarget) -> [URL] {
        let folder = fuzzFolder.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { folder.appendingPathComponent($0) }
    }

    /// Set by the thread that ran an input once it is done.
    final class Done: @unchecked Sendable {
        private let lock = NSLock()
        private var done = false
        var isSet: Bool { lock.withLock { done } }
        func set() { lock.withLock { done = true } }
    }

    /// Runs one input on a thread of its own and waits for it at most `timeLimit`: true when it
    /// finished. A hanging input's thread is left spinning until the test process ends.
    static func finishes(_ target: FuzzTarget, _ bytes: [UInt8]) async throws -> Bool {
        let done = Done()
        let thread = Thread {
            target.run(bytes)
            done.set()
        }
        thread.stackSize = 8 << 20
        thread.start()
        let clock = ContinuousClock()
        let deadline = clock.now + timeLimit
        while !done.isSet {
            guard clock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(2))
        }
        return true
    }

    @Test(arguments: FuzzTarget.allCases)
    func seedsAndCrashersRunThrough(_ target: FuzzTarget) async throws {
        let seeds = Self.inputs("corpus", target)
        #expect(!seeds.isEmpty, "no seed corpus for \(target.rawValue)")
        for file in seeds {
            let finished = try await Self.finishes(target, [UInt8](Data(contentsOf: file)))
            #expect(finished, "the seed \(target.rawValue)/\(file.lastPathComponent) takes more than \(Self.timeLimit)")
        }
        for file in Self.inputs("crashers", target) {
            // Named first, so that a crasher that still crashes is found in the output.
            FileHandle.standardError.write(Data("FuzzTargetsTests: crasher \(target.rawValue)/\(file.lastPathComponent)\n".utf8))
            let finished = try await Self.finishes(target, [UInt8](Data(contentsOf: file)))
            #expect(finished, "the crasher \(target.rawValue)/\(file.lastPathComponent) still hangs (more than \(Self.timeLimit))")
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
