import Foundation
import FuzzTargets

// midtier-fuzz (docs/reliability.md, "Fuzzing"). Built with `-sanitize=fuzzer,address -DFUZZING`
// (scripts/fuzz.sh) it is a libFuzzer binary for the target named by MIDTIER_FUZZ_TARGET. In the
// normal build it replays inputs through a target: `midtier-fuzz <target> <file or folder>…`.

#if FUZZING
/// The target MIDTIER_FUZZ_TARGET names, read once.
let fuzzTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["MIDTIER_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: " ")
        FileHandle.standardError.write(Data("midtier-fuzz: set MIDTIER_FUZZ_TARGET to one of: \(names)\n".utf8))
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    fuzzTarget.run(bytes)
    return 0
}

/// libFuzzer's driver (compiler-rt's `LLVMFuzzerRunDriver(int *argc, char ***argv, int (*)(const
/// uint8_t *, size_t))`), declared here for want of a header: its arguments are pointers, passed
/// alike by the C and Swift conventions on x86_64 and arm64.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// SwiftPM links an executable's `main` to the module's own entry point (`midtier_fuzz_main`), so
/// libFuzzer's `main` is not used: this one starts libFuzzer's driver with the same arguments.
@main
enum MidtierFuzz {
    static func main() {
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runFuzzerDriver(&argc, &argv, { data, size in fuzz(data, size) }))
    }
}
#else
@main
enum MidtierFuzz {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "make-seed", arguments.count == 2, arguments[1] == "saml" {
            do { print(try FuzzSeeds.signedSAMLAssertion()) } catch { fail("cannot sign the seed: \(error)") }
            return
        }
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count > 1 else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: " ")
            fail(
                "usage: midtier-fuzz <target> <file or folder>…  (replays inputs through a target)\n"
                    + "       midtier-fuzz make-seed saml  (prints the signed seed assertion)\ntargets: \(names)")
        }
        var count = 0
        for path in arguments.dropFirst() {
            for file in files(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else { fail("cannot read \(file)") }
                print("\(target.rawValue): \(file) (\(data.count) bytes)")
                await target.runAsync(Array(data))
                count += 1
            }
        }
        print("\(target.rawValue): \(count) inputs replayed, no crash")
    }

    /// The file itself, or every regular file under the folder (sorted; hidden files skipped).
    static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { fail("no such file: \(path)") }
        guard isDirectory.boolValue else { return [path] }
        let names = (FileManager.default.enumerator(atPath: path)?.allObjects as? [String]) ?? []
        return names.filter { !$0.split(separator: "/").contains { $0.hasPrefix(".") } }.sorted().map { path + "/" + $0 }.filter {
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isFolder) && !isFolder.boolValue
        }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("midtier-fuzz: \(message)\n".utf8))
        exit(2)
    }
}
#endif
