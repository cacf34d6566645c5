import Foundation
import MidtierCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Files are read whole; nothing in a configuration set is anywhere near this large, and the
/// limit keeps a wrong path (a log file, a device) from being read into memory.
let maximumFileBytes = 16 * 1024 * 1024

/// Reads a regular file. On failure returns a message such as "file not found" that names
/// neither the path nor the contents (callers add the path where it helps).
/// Relative paths resolve against the process working directory (docs/configuration.md).
func readFile(_ path: String) -> Result<[UInt8], FileReadError> {
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a regular file).
    let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard descriptor >= 0 else { return .failure(FileReadError(errno: errno)) }
    defer { close(descriptor) }

    var status = stat()
    guard fstat(descriptor, &status) == 0 else { return .failure(FileReadError(errno: errno)) }
    let type = status.st_mode & 0o170000
    if type == 0o040000 { return .failure(FileReadError(message: "is a directory, not a file")) }
    guard type == 0o100000 else { return .failure(FileReadError(message: "is not a regular file")) }
    guard Int(status.st_size) <= maximumFileBytes else {
        return .failure(FileReadError(message: "is larger than \(maximumFileBytes / 1024 / 1024) MiB"))
    }

    var contents: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            return .failure(FileReadError(errno: errno))
        }
        if count == 0 { break }
        contents.append(contentsOf: buffer[..<count])
        guard contents.count <= maximumFileBytes else {
            return .failure(FileReadError(message: "is larger than \(maximumFileBytes / 1024 / 1024) MiB"))
        }
    }
    return .success(contents)
}

struct FileReadError: Error {
    /// e.g. "file not found", "permission denied".
    var message: String
    /// Whether the file does not exist at all (as opposed to existing but not being readable).
    var isMissing = false

    init(message: String) {
        self.message = message
    }

    init(errno code: Int32) {
        switch code {
        case ENOENT, ENOTDIR:
            message = "file not found"
            isMissing = true
        case EACCES, EPERM:
            message = "permission denied"
        case EISDIR:
            message = "is a directory, not a file"
        default:
            message = "cannot be read (error \(code))"
        }
    }
}

/// What a directory of configuration files holds.
enum DirectoryListing {
    case missing
    case notADirectory
    /// Names of the visible `*.json` entries, sorted.
    case files([String])
}

/// Lists `*.json` entries of a directory. Hidden entries (starting with `.`) and anything not
/// ending in `.json` are ignored: editors and tools leave such files next to real ones.
func listJSONFiles(in directory: String) -> DirectoryListing {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else { return .missing }
    guard isDirectory.boolValue,
        let names = try? FileManager.default.contentsOfDirectory(atPath: directory)
    else { return .notADirectory }
    return .files(names.filter { !$0.hasPrefix(".") && $0.hasSuffix(".json") && $0.count > 5 }.sorted())
}

/// `config` + `apps` = `config/apps`; a trailing slash on the directory given is not doubled.
func joinPath(_ directory: String, _ name: String) -> String {
    if directory.isEmpty { return name }
    return directory.hasSuffix("/") ? directory + name : directory + "/" + name
}
