package import Foundation

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
        var arguments = ["req", "-x509", "-newkey", "rsa:\(bits)", "-sha256", "-days", "2",
                         "-subj", "/CN=\(name)", "-keyout", key, "-out", certificate]
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
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    let inputPipe = Pipe()
    process.standardInput = inputPipe
    try process.run()
    if let input { inputPipe.fileHandleForWriting.write(input) }
    try inputPipe.fileHandleForWriting.close()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

/// `run`, on a thread of its own rather than one of Swift concurrency's pool threads, which a
/// blocking wait would hold (and a test whose program calls back into the test process, as
/// curl calls the in-process server, would deadlock).
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
