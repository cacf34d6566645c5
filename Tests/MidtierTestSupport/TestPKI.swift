package import Foundation
import Glibc

/// Key pairs made by the `openssl` command line for one test, in a temporary directory.
package struct TestKeyPair {
    package let keyPath: String
    package let certificatePath: String
    package init(keyPath: String, certificatePath: String) {
        self.keyPath = keyPath
        self.certificatePath = certificatePath
    }
    package var keyPEM: [UInt8] { Array(FileManager.default.contents(atPath: keyPath)!) }
    package var certificatePEM: [UInt8] { Array(FileManager.default.contents(atPath: certificatePath)!) }

    /// A fresh RSA key pair; with `passphrase`, the key is encrypted (AES-256, PKCS#8).
    package static func make(in directory: String, name: String = "signing", bits: Int = 2048, passphrase: String? = nil) throws -> TestKeyPair {
        let key = "\(directory)/\(name).key"
        let certificate = "\(directory)/\(name).crt"
        var arguments = [
            "req", "-x509", "-newkey", "rsa:\(bits)", "-sha256", "-days", "2",
            "-subj", "/CN=\(name)", "-keyout", key, "-out", certificate,
        ]
        if let passphrase { arguments += ["-passout", "pass:\(passphrase)"] } else { arguments.append("-nodes") }
        let result = try run("/usr/bin/openssl", arguments)
        guard result.status == 0 else { throw TestFailure("openssl req failed: \(result.output)") }
        return TestKeyPair(keyPath: key, certificatePath: certificate)
    }
}

package struct TestFailure: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Runs a program to completion; returns its exit status and combined output.
@discardableResult
package func run(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> (status: Int32, output: String) {
    var input = input.map { [UInt8]($0) } ?? []
    let (stdinRead, stdinWrite) = try cloexecPipe()
    let (outputRead, outputWrite) = try cloexecPipe()
    let pid: pid_t
    do {
        pid = try spawn(executable, arguments, stdin: stdinRead, output: outputWrite)
    } catch {
        [stdinRead, stdinWrite, outputRead, outputWrite].forEach { _ = Glibc.close($0) }
        throw error
    }
    _ = Glibc.close(stdinRead)
    _ = Glibc.close(outputWrite)
    var written = 0
    while written < input.count {
        let count = input.withUnsafeMutableBytes { Glibc.write(stdinWrite, $0.baseAddress! + written, $0.count - written) }
        if count <= 0 { break }
        written += count
    }
    _ = Glibc.close(stdinWrite)
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = buffer.withUnsafeMutableBytes { Glibc.read(outputRead, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
        output += buffer[0..<count]
    }
    _ = Glibc.close(outputRead)
    return (waitForExit(pid), String(decoding: output, as: UTF8.self))
}

/// Starts `executable` with `arguments` and returns its process id: standard input from
/// `stdin`, standard output and error to `output` (each /dev/null when nil). With posix_spawn,
/// not Foundation's `Process`: on Linux (Swift 6.3.1) `Process.run()` now and then reads past
/// a buffer while it lists /proc/self/fd and stops the whole test process
/// (swift-corelibs-foundation PR 5472; seen here once in a clean `make test`).
package func spawn(_ executable: String, _ arguments: [String], stdin: Int32? = nil, output: Int32? = nil) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let stdin {
        posix_spawn_file_actions_adddup2(&actions, stdin, 0)
    } else {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    }
    if let output {
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, output, 2)
    } else {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { (argv + envp).forEach { free($0) } }
    var pid: pid_t = 0
    let status = posix_spawn(&pid, executable, &actions, nil, argv, envp)
    guard status == 0 else { throw TestFailure("cannot start \(executable): \(String(cString: strerror(status)))") }
    return pid
}

/// Waits for the process `pid` to end; its exit status (128 + the signal when a signal ended it).
@discardableResult
package func waitForExit(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let signal = status & 0x7F
    return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
}

/// A pipe whose ends are closed in any program started later (a second child must not keep
/// another's output open, or its reader would wait for that child too). (`pipe2` is not
/// imported; between `pipe` and `fcntl` another thread's child could still inherit an end,
/// which only delays that reader's end of file until the child exits.)
private func cloexecPipe() throws -> (read: Int32, write: Int32) {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { throw TestFailure("pipe failed: \(String(cString: strerror(errno)))") }
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    return (ends[0], ends[1])
}

package func runOffThePool(_ executable: String, _ arguments: [String], input: Data? = nil) async throws -> (status: Int32, output: String) {
    try await offThePool { try run(executable, arguments, input: input) }
}

/// Runs blocking work (a process, a socket client of the in-process server) on a thread of its
/// own, so that it never holds one of the concurrency pool's few threads.
package func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// A fresh temporary directory, removed by the caller with `removeTemporaryDirectory`.
package func makeTemporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "midtier-test-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

package func removeTemporaryDirectory(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}
